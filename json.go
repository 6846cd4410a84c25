package vigil

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"strconv"
	"time"

	"github.com/vigil-run/vigil/internal/jsonw"
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

// MarshalJSON implements json.Marshaler. It writes what encoding/json
// writes for observationJSON, byte for byte, without reflection but for
// facts other than strings (TestOutcomeJSONMatchesReflection).
func (o Observation) MarshalJSON() ([]byte, error) {
	return o.AppendJSON(make([]byte, 0, 128))
}

// AppendJSON appends what MarshalJSON returns to b. A store encoding a
// settlement calls it directly: through encoding/json, a Marshaler's
// output is parsed once more to be checked and compacted.
func (o *Observation) AppendJSON(b []byte) ([]byte, error) {
	b = jsonw.KeyString(b, `{"verdict":`, string(o.Verdict))
	if !o.At.IsZero() {
		// FormatTime's, without the string: nothing in it needs escaping.
		b = append(o.At.UTC().AppendFormat(append(b, `,"at":"`...), TimeFormat), '"')
	}
	b = jsonw.OptString(b, `,"summary":`, o.Summary)
	if len(o.Facts) > 0 {
		var err error
		if b, err = appendFacts(append(b, `,"facts":`...), o.Facts); err != nil {
			return nil, err
		}
	}
	b = jsonw.OptString(b, `,"reason":`, o.Reason)
	if o.Permanent {
		b = append(b, `,"permanent":true`...)
	}
	return append(b, '}'), nil
}

// appendFacts appends facts as encoding/json writes a map[string]any:
// keys sorted; without reflection when every value is a string (a
// timer's facts), through encoding/json otherwise.
func appendFacts(b []byte, facts map[string]any) ([]byte, error) {
	for _, v := range facts {
		if _, ok := v.(string); !ok {
			j, err := json.Marshal(facts)
			if err != nil {
				return nil, err
			}
			return append(b, j...), nil
		}
	}
	return jsonw.Object(b, facts, func(b []byte, v any) []byte { return jsonw.String(b, v.(string)) }), nil
}

// MarshalJSON implements json.Marshaler: what encoding/json writes for
// Outcome's fields, without reflection (see Observation.MarshalJSON).
func (o Outcome) MarshalJSON() ([]byte, error) {
	return o.AppendJSON(make([]byte, 0, 256))
}

// AppendJSON appends what MarshalJSON returns to b.
func (o *Outcome) AppendJSON(b []byte) ([]byte, error) {
	b = jsonw.KeyString(b, `{"state":`, string(o.State))
	b = jsonw.KeyString(b, `,"sentence":`, o.Sentence)
	if o.Attention {
		b = append(b, `,"attention":true`...)
	}
	if o.Held {
		b = append(b, `,"held":true`...)
	}
	b = jsonw.KeyString(b, `,"reason":`, o.Reason)
	if o.Observation != nil {
		var err error
		if b, err = o.Observation.AppendJSON(append(b, `,"observation":`...)); err != nil {
			return nil, err
		}
	}
	return append(b, '}'), nil
}

// UnmarshalJSON implements json.Unmarshaler. Numbers among the facts
// are json.Number, as the stores and the watchers give them, so that an
// integer past 2^53 keeps its digits.
func (o *Observation) UnmarshalJSON(b []byte) error {
	var j observationJSON
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	if err := dec.Decode(&j); err != nil {
		return err
	}
	if _, err := dec.Token(); err != io.EOF {
		return errors.New("vigil: an observation followed by more JSON")
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
	AskedDeliver       json.RawMessage   `json:"asked_deliver,omitempty"`
	CompletionToken    string            `json:"completion_token,omitempty"`
	CompletionURL      string            `json:"completion_url,omitempty"`
	Unreadable         string            `json:"unreadable,omitempty"`
}

// MarshalJSON implements json.Marshaler: the watch as returned by every
// surface (SPEC §3). It writes what encoding/json writes for watchJSON,
// field for field and byte for byte (TestWatchJSONMatchesReflection holds
// the two equal), without reflection: every registration's answer and
// every listed watch is one of these.
func (w Watch) MarshalJSON() ([]byte, error) {
	return w.appendJSON(make([]byte, 0, 512))
}

func (w *Watch) appendJSON(b []byte) ([]byte, error) {
	var err error
	b = jsonw.KeyString(b, `{"id":`, w.ID)
	b = jsonw.KeyString(b, `,"kind":`, string(w.Kind))
	b = append(b, `,"predicate":`...)
	if b, err = jsonw.Raw(b, w.Predicate); err != nil {
		return nil, err
	}
	b = jsonw.KeyString(b, `,"recipient":`, w.Recipient)
	b = jsonw.KeyString(b, `,"state":`, string(w.State))
	b = jsonw.KeyString(b, `,"mode":`, string(w.Mode))
	b = jsonw.OptString(b, `,"every":`, formatDuration(w.Every))
	b = jsonw.OptString(b, `,"deadline":`, FormatTime(w.Deadline))
	b = jsonw.OptString(b, `,"start_at":`, FormatTime(w.StartAt))
	b = jsonw.KeyString(b, `,"created_at":`, FormatTime(w.CreatedAt))
	if w.State == StatePending {
		b = jsonw.OptString(b, `,"next_due":`, FormatTime(w.NextDue))
	}
	b = jsonw.OptString(b, `,"settled_at":`, FormatTime(w.SettledAt))
	b = strconv.AppendInt(append(b, `,"polls":`...), int64(w.Polls), 10)
	b = jsonw.OptInt(b, `,"errors":`, w.Errors)
	b = jsonw.OptInt(b, `,"consecutive_errors":`, w.ConsecutiveErrors)
	b = jsonw.OptString(b, `,"checked_at":`, FormatTime(w.CheckedAt))
	if w.LastObservation != nil {
		if b, err = w.LastObservation.AppendJSON(append(b, `,"last_observation":`...)); err != nil {
			return nil, err
		}
	}
	if w.Outcome != nil {
		if b, err = w.Outcome.AppendJSON(append(b, `,"outcome":`...)); err != nil {
			return nil, err
		}
	}
	if len(w.Receipts) > 0 {
		if b, err = jsonw.Marshaled(b, `,"receipts":`, w.Receipts); err != nil {
			return nil, err
		}
	}
	b = jsonw.OptString(b, `,"note":`, w.Note)
	if len(w.Labels) > 0 {
		b = jsonw.StringMap(append(b, `,"labels":`...), w.Labels)
	}
	b = jsonw.OptInt(b, `,"stable":`, w.Stable)
	b = jsonw.OptString(b, `,"stable_for":`, formatDuration(w.StableFor))
	b = jsonw.OptInt(b, `,"max_polls":`, w.MaxPolls)
	b = jsonw.OptInt(b, `,"max_errors":`, w.MaxErrors)
	if w.Standing {
		b = append(b, `,"standing":true`...)
	}
	if len(w.Deliver) > 0 {
		if b, err = jsonw.Raw(append(b, `,"deliver":`...), w.Deliver); err != nil {
			return nil, err
		}
	}
	if w.AnsweredAtCreation {
		b = append(b, `,"answered_at_creation":true`...)
	}
	if w.Existing {
		b = append(b, `,"existing":true`...)
	}
	b = jsonw.OptString(b, `,"asked_deadline":`, FormatTime(w.AskedDeadline))
	if len(w.AskedDeliver) > 0 {
		if b, err = jsonw.Raw(append(b, `,"asked_deliver":`...), w.AskedDeliver); err != nil {
			return nil, err
		}
	}
	b = jsonw.OptString(b, `,"completion_token":`, w.CompletionToken)
	b = jsonw.OptString(b, `,"completion_url":`, w.CompletionURL)
	b = jsonw.OptString(b, `,"unreadable":`, w.Unreadable)
	return append(b, '}'), nil
}

// UnmarshalJSON implements json.Unmarshaler.
func (w *Watch) UnmarshalJSON(b []byte) error {
	if quickWatch(b, w) {
		return nil
	}
	return w.unmarshalReflect(b)
}

// unmarshalReflect decodes b with encoding/json over watchJSON: what
// quickWatch does not read.
func (w *Watch) unmarshalReflect(b []byte) error {
	var j watchJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	out := Watch{
		ID: j.ID, Kind: j.Kind, Predicate: j.Predicate, Recipient: j.Recipient, State: j.State, Mode: j.Mode,
		Polls: j.Polls, Errors: j.Errors, ConsecutiveErrors: j.ConsecutiveErrors, LastObservation: j.LastObservation, Outcome: j.Outcome, Receipts: j.Receipts, Note: j.Note,
		Labels: j.Labels, Stable: j.Stable, MaxPolls: j.MaxPolls, MaxErrors: j.MaxErrors, Standing: j.Standing,
		Deliver: j.Deliver, AnsweredAtCreation: j.AnsweredAtCreation, Existing: j.Existing, AskedDeliver: j.AskedDeliver,
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
