package wording

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/vigil-run/vigil"
)

// TestPredicateReadsAsUnmarshal: predicate reads every text as
// json.Unmarshal reads it into a map[string]any, whether its fast path
// takes it (an object of plain strings) or leaves it to the decoder.
func TestPredicateReadsAsUnmarshal(t *testing.T) {
	for _, raw := range []string{
		`{"at":"2026-12-06T10:00:00.000Z"}`,
		`{ "path" : "/tmp/x", "glob": "**/*.go" }`,
		`{"a":"1","a":"2"}`,
		`{}`,
		`{"url":"https://x/\u003c"}`,
		`{"s":"\u00e9t\u00e9 été"}`,
		"{\"s\":\"\xff\"}",
		`{"n":1,"s":"x"}`,
		`{"nested":{"a":"b"},"list":["x"]}`,
		`{"b":true,"z":null}`,
		`{"at":"x"} trailing`,
		`{"at":"x"`,
		`["at"]`,
		`"at"`,
		`null`,
		``,
	} {
		var want map[string]any
		_ = json.Unmarshal([]byte(raw), &want)
		if got := predicate([]byte(raw)); !cmp.Equal(got, want) {
			t.Errorf("predicate(%q) = %#v, want (json.Unmarshal) %#v", raw, got, want)
		}
	}
}

// TestTimerSubjectAllocs: a timer's sentence reads its predicate without
// the JSON decoder.
func TestTimerSubjectAllocs(t *testing.T) {
	w := &vigil.Watch{ID: "w", Kind: vigil.KindTimer, Predicate: json.RawMessage(`{"at":"2026-12-06T10:00:00.000Z"}`)}
	if got := Subject(w); got != "the timer set for 2026-12-06 10:00:00 UTC" {
		t.Fatalf("Subject = %q", got)
	}
	if allocs := testing.AllocsPerRun(100, func() { Subject(w) }); allocs > 8 {
		t.Errorf("Subject of a timer allocates %.0f times, want at most 8 (with the JSON decoder: 12)", allocs)
	}
}

// BenchmarkTimerOutcome words a timer's settlement, as each watch of a
// storm has its sentence written.
func BenchmarkTimerOutcome(b *testing.B) {
	at := time.Date(2026, 12, 6, 10, 0, 0, 0, time.UTC)
	w := &vigil.Watch{ID: "w", Kind: vigil.KindTimer, Note: "12", Predicate: json.RawMessage(`{"at":"2026-12-06T10:00:00.000Z"}`)}
	out := &vigil.Outcome{State: vigil.StateFired, Reason: "satisfied", Observation: &vigil.Observation{Verdict: vigil.VerdictSatisfied, At: at}}
	b.ReportAllocs()
	for b.Loop() {
		Outcome(w, out)
	}
}
