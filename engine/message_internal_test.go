package engine

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/vigil-run/vigil"
)

// TestMessageDataMarshal: an outcome message's data is what json.Marshal
// writes for messageData, byte for byte, whatever its strings hold (HTML
// characters, escapes, text outside ASCII, invalid UTF-8), its facts, its
// labels and its predicate; a predicate that is not JSON gives no data,
// as it did.
func TestMessageDataMarshal(t *testing.T) {
	at := time.Date(2026, 12, 6, 10, 0, 0, 0, time.UTC)
	obs := &vigil.Observation{Verdict: vigil.VerdictSatisfied, At: at, Summary: "reached <b>\"here\"</b> & \u00e9t\u00e9 \xff",
		Facts: map[string]any{"at": "2026-12-06T10:00:00.000Z", "z<": "a&b"}}
	mixed := &vigil.Observation{Verdict: vigil.VerdictFailed, Summary: "exit 1", Reason: "tab\there",
		Facts: map[string]any{"code": 1, "ok": false, "list": []any{"x", 2.5}, "nil": nil}, Permanent: true}
	cases := []messageData{
		{Kind: vigil.KindTimer, State: vigil.StateFired, Predicate: json.RawMessage(`{"at":"2026-12-06T10:00:00.000Z"}`),
			Outcome: &vigil.Outcome{State: vigil.StateFired, Sentence: "The timer went off.", Reason: "satisfied", Observation: obs}},
		{Kind: vigil.KindHTTP, State: vigil.StateFailed, Note: "deploy <prod> & \"canary\"\n\u2028",
			Labels:    map[string]string{"b": "2", "a": "<1>", "\u00e9": "\xfe", "": "empty"},
			Predicate: json.RawMessage("{ \"url\" : \"http://x/?a=1&b=<2>\",\n \"n\": [1, 2.50, 1e3] }"),
			Outcome:   &vigil.Outcome{State: vigil.StateFailed, Sentence: "It failed.", Reason: "failed", Held: true, Attention: true, Observation: mixed}},
		{Kind: vigil.KindFolder, State: vigil.StatePending, Observation: obs, Labels: map[string]string{}, Predicate: json.RawMessage(`{"path":"/tmp"}`)},
		{Kind: vigil.KindCommand, State: vigil.StateExpired, Outcome: &vigil.Outcome{State: vigil.StateExpired, Reason: "deadline"}},
		{Kind: vigil.KindTimer, State: vigil.StateFired, Predicate: json.RawMessage(`{"at":`)},
	}
	for i, d := range cases {
		want, err := json.Marshal(d)
		if err != nil {
			want = nil
		}
		if got := d.marshal(); string(got) != string(want) {
			t.Errorf("case %d: marshal() =\n%s\nwant (json.Marshal)\n%s", i, got, want)
		}
	}
}

// BenchmarkOutcomeMessage builds a timer's outcome message, as each
// watch of a storm has one built.
func BenchmarkOutcomeMessage(b *testing.B) {
	at := time.Date(2026, 12, 6, 10, 0, 0, 0, time.UTC)
	w := &vigil.Watch{ID: "01JWATCH", Kind: vigil.KindTimer, Recipient: "r1", Note: "12",
		Predicate: json.RawMessage(`{"at":"2026-12-06T10:00:00.000Z"}`)}
	out := &vigil.Outcome{State: vigil.StateFired, Sentence: "The timer set for 10:00 went off: 12", Reason: "satisfied",
		Observation: &vigil.Observation{Verdict: vigil.VerdictSatisfied, At: at, Summary: "reached 2026-12-06T10:00:00.000Z",
			Facts: map[string]any{"at": "2026-12-06T10:00:00.000Z"}}}
	b.ReportAllocs()
	for b.Loop() {
		OutcomeMessage("01JMSG", w, out, at)
	}
}
