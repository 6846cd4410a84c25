package mcpserver

import (
	"encoding/json"
	"math"
	"time"

	"github.com/vigil-run/vigil"
	"github.com/vigil-run/vigil/wording"
)

// Watch is a watch as the tools return it: the fields of SPEC §3 with the
// wire spellings of the HTTP API, plus the subject in words.
type Watch struct {
	ID                 string            `json:"id" jsonschema:"the watch id; pass it to watch_get, watch_why, watch_wait or watch_cancel"`
	Kind               vigil.Kind        `json:"kind" jsonschema:"the kind of condition"`
	Subject            string            `json:"subject" jsonschema:"what is watched, in a few words"`
	Predicate          json.RawMessage   `json:"predicate" jsonschema:"the predicate in its canonical form"`
	Recipient          string            `json:"recipient" jsonschema:"whose inbox gets the outcome"`
	State              vigil.State       `json:"state" jsonschema:"pending until it settles; then fired, failed, expired, cancelled or errored"`
	Mode               vigil.Mode        `json:"mode" jsonschema:"until (tell me when it holds) or unless (tell me if it happens)"`
	Every              string            `json:"every,omitempty" jsonschema:"the re-check interval"`
	Deadline           string            `json:"deadline,omitempty" jsonschema:"when the watch expires (RFC 3339, UTC)"`
	CreatedAt          string            `json:"created_at" jsonschema:"when the watch was registered (RFC 3339, UTC)"`
	NextDue            string            `json:"next_due,omitempty" jsonschema:"when the next check runs, while pending (RFC 3339, UTC)"`
	SettledAt          string            `json:"settled_at,omitempty" jsonschema:"when the watch settled (RFC 3339, UTC)"`
	Polls              int               `json:"polls" jsonschema:"how many checks have run"`
	LastObservation    *Observation      `json:"last_observation,omitempty" jsonschema:"what the latest check saw"`
	Outcome            *Outcome          `json:"outcome,omitempty" jsonschema:"how the watch settled, once it has"`
	Receipts           []Receipt         `json:"receipts,omitempty" jsonschema:"what became of pushing the outcome to each push channel"`
	Note               string            `json:"note,omitempty" jsonschema:"the note given at registration"`
	Labels             map[string]string `json:"labels,omitempty" jsonschema:"the labels given at registration"`
	Standing           bool              `json:"standing,omitempty" jsonschema:"a standing watch reports each change to the inbox and never settles by itself"`
	Deliver            json.RawMessage   `json:"deliver,omitempty" jsonschema:"where the outcome is pushed besides the inbox (secrets redacted)"`
	Existing           bool              `json:"existing,omitempty" jsonschema:"the same condition was already watched for this recipient; this is that watch"`
	AskedDeliver       json.RawMessage   `json:"asked_deliver,omitempty" jsonschema:"with existing: the delivery options this call asked for (its wake among them; secrets redacted), which the pending watch does not carry: they were NOT registered"`
	AnsweredAtCreation bool              `json:"answered_at_creation,omitempty" jsonschema:"the first check already settled the watch; nothing was mailed, since this result holds the answer"`
	CompletionToken    string            `json:"completion_token,omitempty" jsonschema:"a token watch's secret: whoever holds it can settle the watch; shown only in the result that created it"`
	CompletionURL      string            `json:"completion_url,omitempty" jsonschema:"a token watch's completion URL: POST {\"status\": \"success\"} or {\"status\": \"failure\"} (and optional \"data\") to settle it; shown only in the result that created it"`
}

// Observation is what one check of a watch saw.
type Observation struct {
	Verdict   vigil.Verdict  `json:"verdict" jsonschema:"satisfied, failed, pending (not yet) or unavailable (could not tell)"`
	At        string         `json:"at,omitempty" jsonschema:"when the check ran (RFC 3339, UTC)"`
	Summary   string         `json:"summary,omitempty" jsonschema:"one line on what the check saw"`
	Facts     map[string]any `json:"facts,omitempty" jsonschema:"the numbers, ids and texts the summary was made from"`
	Reason    string         `json:"reason,omitempty" jsonschema:"why the check could not tell"`
	Permanent bool           `json:"permanent,omitempty" jsonschema:"the check can never tell"`
}

// Outcome is how a watch settled.
type Outcome struct {
	State       vigil.State  `json:"state" jsonschema:"the state the watch settled in"`
	Sentence    string       `json:"sentence" jsonschema:"the outcome in one sentence"`
	Attention   bool         `json:"attention,omitempty" jsonschema:"bad news that needs attention"`
	Held        bool         `json:"held,omitempty" jsonschema:"an unless watch whose window passed without the condition: good news"`
	Reason      string       `json:"reason" jsonschema:"why it settled: satisfied, failed, deadline, permanent, cancelled, …"`
	Observation *Observation `json:"observation,omitempty" jsonschema:"the check it was decided on"`
}

// Receipt is what became of pushing an outcome to one channel.
type Receipt struct {
	Channel   string `json:"channel"`
	Status    string `json:"status"`
	Attempts  int    `json:"attempts"`
	Detail    string `json:"detail,omitempty"`
	UpdatedAt string `json:"updated_at,omitempty"`
}

// Message is one message of an inbox.
type Message struct {
	Seq       int64             `json:"seq" jsonschema:"the message's place in the inbox"`
	ID        string            `json:"id"`
	WatchID   string            `json:"watch_id,omitempty" jsonschema:"the watch the message is about"`
	Type      vigil.MessageType `json:"type" jsonschema:"fired, failed, expired, errored, cancelled, changed or note"`
	Text      string            `json:"text" jsonschema:"the message in one sentence"`
	Data      json.RawMessage   `json:"data,omitempty" jsonschema:"the facts behind the message"`
	CreatedAt string            `json:"created_at" jsonschema:"when the message landed (RFC 3339, UTC)"`
}

func watchOut(w *vigil.Watch) Watch {
	out := Watch{
		ID: w.ID, Kind: w.Kind, Subject: wording.Subject(w), Predicate: w.Predicate, Recipient: w.Recipient,
		State: w.State, Mode: w.Mode, Deadline: vigil.FormatTime(w.Deadline), CreatedAt: vigil.FormatTime(w.CreatedAt),
		SettledAt: vigil.FormatTime(w.SettledAt), Polls: w.Polls, LastObservation: observationOut(w.LastObservation),
		Outcome: outcomeOut(w.Outcome), Note: w.Note, Labels: w.Labels, Standing: w.Standing, Deliver: w.Deliver,
		Existing: w.Existing, AskedDeliver: w.AskedDeliver, AnsweredAtCreation: w.AnsweredAtCreation,
		CompletionToken: w.CompletionToken, CompletionURL: w.CompletionURL,
	}
	if out.Predicate == nil {
		out.Predicate = json.RawMessage("{}")
	}
	if w.Every > 0 {
		out.Every = vigil.FormatDuration(w.Every)
	}
	if w.State == vigil.StatePending {
		out.NextDue = vigil.FormatTime(w.NextDue)
	}
	for _, r := range w.Receipts {
		out.Receipts = append(out.Receipts, Receipt{Channel: r.Channel, Status: r.Status, Attempts: r.Attempts,
			Detail: r.Detail, UpdatedAt: vigil.FormatTime(r.UpdatedAt)})
	}
	return out
}

func observationOut(o *vigil.Observation) *Observation {
	if o == nil {
		return nil
	}
	return &Observation{Verdict: o.Verdict, At: vigil.FormatTime(o.At), Summary: o.Summary, Facts: o.Facts,
		Reason: o.Reason, Permanent: o.Permanent}
}

func outcomeOut(o *vigil.Outcome) *Outcome {
	if o == nil {
		return nil
	}
	return &Outcome{State: o.State, Sentence: o.Sentence, Attention: o.Attention, Held: o.Held, Reason: o.Reason,
		Observation: observationOut(o.Observation)}
}

func messagesOut(ms []*vigil.Message) []Message {
	out := make([]Message, 0, len(ms))
	for _, m := range ms {
		out = append(out, Message{Seq: m.Seq, ID: m.ID, WatchID: m.WatchID, Type: m.Type, Text: m.Text, Data: m.Data,
			CreatedAt: vigil.FormatTime(m.CreatedAt)})
	}
	return out
}

// seconds rounds d up to whole seconds, at least 1.
func seconds(d time.Duration) int {
	return max(1, int(math.Ceil(d.Seconds())))
}
