package vigil

import (
	"encoding/json"
	"time"
)

// TimeFormat is how every time crosses the wire: RFC 3339 with milliseconds, UTC.
const TimeFormat = "2006-01-02T15:04:05.000Z07:00"

// FormatTime formats t as TimeFormat in UTC; the zero time formats as "".
func FormatTime(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(TimeFormat)
}

// ParseTime parses an RFC 3339 time (any precision) and returns it in UTC;
// "" parses as the zero time.
func ParseTime(s string) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}, err
	}
	return t.UTC(), nil
}

func formatDuration(d time.Duration) string {
	if d == 0 {
		return ""
	}
	return FormatDuration(d)
}

type observationJSON struct {
	Verdict   Verdict        `json:"verdict"`
	At        string         `json:"at,omitempty"`
	Summary   string         `json:"summary,omitempty"`
	Facts     map[string]any `json:"facts,omitempty"`
	Reason    string         `json:"reason,omitempty"`
	Permanent bool           `json:"permanent,omitempty"`
}

// MarshalJSON implements json.Marshaler.
func (o Observation) MarshalJSON() ([]byte, error) {
	return json.Marshal(observationJSON{o.Verdict, FormatTime(o.At), o.Summary, o.Facts, o.Reason, o.Permanent})
}

// UnmarshalJSON implements json.Unmarshaler.
func (o *Observation) UnmarshalJSON(b []byte) error {
	var j observationJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	at, err := ParseTime(j.At)
	if err != nil {
		return err
	}
	*o = Observation{Verdict: j.Verdict, At: at, Summary: j.Summary, Facts: j.Facts, Reason: j.Reason, Permanent: j.Permanent}
	return nil
}

type receiptJSON struct {
	Channel   string `json:"channel"`
	Status    string `json:"status"`
	Attempts  int    `json:"attempts"`
	Detail    string `json:"detail,omitempty"`
	UpdatedAt string `json:"updated_at,omitempty"`
}

// MarshalJSON implements json.Marshaler.
func (r Receipt) MarshalJSON() ([]byte, error) {
	return json.Marshal(receiptJSON{r.Channel, r.Status, r.Attempts, r.Detail, FormatTime(r.UpdatedAt)})
}

// UnmarshalJSON implements json.Unmarshaler.
func (r *Receipt) UnmarshalJSON(b []byte) error {
	var j receiptJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	t, err := ParseTime(j.UpdatedAt)
	if err != nil {
		return err
	}
	*r = Receipt{Channel: j.Channel, Status: j.Status, Attempts: j.Attempts, Detail: j.Detail, UpdatedAt: t}
	return nil
}

type messageJSON struct {
	Seq       int64           `json:"seq"`
	ID        string          `json:"id"`
	Recipient string          `json:"recipient"`
	WatchID   string          `json:"watch_id,omitempty"`
	Type      MessageType     `json:"type"`
	Text      string          `json:"text"`
	Data      json.RawMessage `json:"data,omitempty"`
	CreatedAt string          `json:"created_at"`
}

// MarshalJSON implements json.Marshaler.
func (m Message) MarshalJSON() ([]byte, error) {
	return json.Marshal(messageJSON{m.Seq, m.ID, m.Recipient, m.WatchID, m.Type, m.Text, m.Data, FormatTime(m.CreatedAt)})
}

// UnmarshalJSON implements json.Unmarshaler.
func (m *Message) UnmarshalJSON(b []byte) error {
	var j messageJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	t, err := ParseTime(j.CreatedAt)
	if err != nil {
		return err
	}
	*m = Message{Seq: j.Seq, ID: j.ID, Recipient: j.Recipient, WatchID: j.WatchID, Type: j.Type, Text: j.Text, Data: j.Data, CreatedAt: t}
	return nil
}

type watchJSON struct {
	ID                 string            `json:"id"`
	Kind               Kind              `json:"kind"`
	Predicate          json.RawMessage   `json:"predicate"`
	Recipient          string            `json:"recipient"`
	State              State             `json:"state"`
	Mode               Mode              `json:"mode"`
	Every              string            `json:"every,omitempty"`
	Deadline           string            `json:"deadline,omitempty"`
	StartAt            string            `json:"start_at,omitempty"`
	CreatedAt          string            `json:"created_at"`
	NextDue            string            `json:"next_due,omitempty"`
	SettledAt          string            `json:"settled_at,omitempty"`
	Polls              int               `json:"polls"`
	Errors             int               `json:"errors,omitempty"`
	ConsecutiveErrors  int               `json:"consecutive_errors,omitempty"`
	CheckedAt          string            `json:"checked_at,omitempty"`
	LastObservation    *Observation      `json:"last_observation,omitempty"`
	Outcome            *Outcome          `json:"outcome,omitempty"`
	Receipts           []Receipt         `json:"receipts,omitempty"`
	Note               string            `json:"note,omitempty"`
	Labels             map[string]string `json:"labels,omitempty"`
	Stable             int               `json:"stable,omitempty"`
	StableFor          string            `json:"stable_for,omitempty"`
	MaxPolls           int               `json:"max_polls,omitempty"`
	MaxErrors          int               `json:"max_errors,omitempty"`
	Standing           bool              `json:"standing,omitempty"`
	Deliver            json.RawMessage   `json:"deliver,omitempty"`
	AnsweredAtCreation bool              `json:"answered_at_creation,omitempty"`
	Existing           bool              `json:"existing,omitempty"`
	AskedDeadline      string            `json:"asked_deadline,omitempty"`
	CompletionToken    string            `json:"completion_token,omitempty"`
	CompletionURL      string            `json:"completion_url,omitempty"`
	Unreadable         string            `json:"unreadable,omitempty"`
}

// MarshalJSON implements json.Marshaler: the watch as returned by every
// surface (SPEC §3).
func (w Watch) MarshalJSON() ([]byte, error) {
	j := watchJSON{
		ID: w.ID, Kind: w.Kind, Predicate: w.Predicate, Recipient: w.Recipient, State: w.State, Mode: w.Mode,
		Every: formatDuration(w.Every), Deadline: FormatTime(w.Deadline), StartAt: FormatTime(w.StartAt),
		CreatedAt: FormatTime(w.CreatedAt), SettledAt: FormatTime(w.SettledAt), Polls: w.Polls,
		Errors: w.Errors, ConsecutiveErrors: w.ConsecutiveErrors, CheckedAt: FormatTime(w.CheckedAt),
		LastObservation: w.LastObservation, Outcome: w.Outcome, Receipts: w.Receipts, Note: w.Note, Labels: w.Labels,
		Stable: w.Stable, StableFor: formatDuration(w.StableFor), MaxPolls: w.MaxPolls, MaxErrors: w.MaxErrors,
		Standing: w.Standing, Deliver: w.Deliver, AnsweredAtCreation: w.AnsweredAtCreation, Existing: w.Existing,
		AskedDeadline:   FormatTime(w.AskedDeadline),
		CompletionToken: w.CompletionToken, CompletionURL: w.CompletionURL, Unreadable: w.Unreadable,
	}
	if w.State == StatePending {
		j.NextDue = FormatTime(w.NextDue)
	}
	return json.Marshal(j)
}

// UnmarshalJSON implements json.Unmarshaler.
func (w *Watch) UnmarshalJSON(b []byte) error {
	var j watchJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	out := Watch{
		ID: j.ID, Kind: j.Kind, Predicate: j.Predicate, Recipient: j.Recipient, State: j.State, Mode: j.Mode,
		Polls: j.Polls, Errors: j.Errors, ConsecutiveErrors: j.ConsecutiveErrors, LastObservation: j.LastObservation, Outcome: j.Outcome, Receipts: j.Receipts, Note: j.Note,
		Labels: j.Labels, Stable: j.Stable, MaxPolls: j.MaxPolls, MaxErrors: j.MaxErrors, Standing: j.Standing,
		Deliver: j.Deliver, AnsweredAtCreation: j.AnsweredAtCreation, Existing: j.Existing,
		CompletionToken: j.CompletionToken, CompletionURL: j.CompletionURL, Unreadable: j.Unreadable,
	}
	var err error
	for _, f := range []struct {
		dst *time.Time
		src string
	}{{&out.Deadline, j.Deadline}, {&out.StartAt, j.StartAt}, {&out.CreatedAt, j.CreatedAt}, {&out.NextDue, j.NextDue}, {&out.SettledAt, j.SettledAt}, {&out.CheckedAt, j.CheckedAt}, {&out.AskedDeadline, j.AskedDeadline}} {
		if *f.dst, err = ParseTime(f.src); err != nil {
			return err
		}
	}
	if j.Every != "" {
		if out.Every, err = ParseDuration(j.Every); err != nil {
			return err
		}
	}
	if j.StableFor != "" {
		if out.StableFor, err = ParseDuration(j.StableFor); err != nil {
			return err
		}
	}
	*w = out
	return nil
}
