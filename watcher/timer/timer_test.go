package timer_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/vigil-run/vigil"
	"github.com/vigil-run/vigil/watcher"
	"github.com/vigil-run/vigil/watcher/timer"
)

var now = time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)

func TestCanonicalize(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in   string
		want string
	}{
		{`{"at":"2026-03-01T10:00:00+01:00"}`, `{"at":"2026-03-01T09:00:00.000Z"}`},
		// A finer instant is rounded up to the millisecond: never early.
		{`{"at":"2026-03-01T09:00:00.000123Z"}`, `{"at":"2026-03-01T09:00:00.001Z"}`},
		{`{"at":"2026-03-01T09:00:00.999999999Z"}`, `{"at":"2026-03-01T09:00:01.000Z"}`},
		{`{"in":"1500us"}`, `{"at":"2026-03-01T09:00:00.002Z"}`},
		{`{"in":"90m"}`, `{"at":"2026-03-01T10:30:00.000Z"}`},
		{`{"in":"1d"}`, `{"at":"2026-03-02T09:00:00.000Z"}`},
		{`{"at":"2026-02-28T09:00:00Z"}`, `{"at":"2026-02-28T09:00:00.000Z"}`},
	}
	w := timer.New(timer.Config{})
	for _, tt := range tests {
		c, err := w.Canonicalize(context.Background(), json.RawMessage(tt.in), now)
		if err != nil {
			t.Errorf("Canonicalize(%s) = %v", tt.in, err)
			continue
		}
		if string(c.Predicate) != tt.want {
			t.Errorf("Canonicalize(%s) = %s, want %s", tt.in, c.Predicate, tt.want)
		}
		var p struct{ At string }
		_ = json.Unmarshal(c.Predicate, &p)
		if vigil.FormatTime(c.StartAt) != p.At {
			t.Errorf("Canonicalize(%s).StartAt = %v, want the canonical instant %s", tt.in, c.StartAt, p.At)
		}
	}
}

func TestCanonicalizeRefusals(t *testing.T) {
	t.Parallel()
	tests := []struct{ in, field string }{
		{`{}`, "predicate"},
		{`{"at":"2026-03-01T10:00:00Z","in":"1h"}`, "predicate"},
		{`{"at":"tomorrow"}`, "predicate.at"},
		{`{"at":"2029-03-01T10:00:00Z"}`, "predicate.at"},
		{`{"in":"0s"}`, "predicate.in"},
		{`{"in":"-5m"}`, "predicate.in"},
		{`{"in":"400d"}`, "predicate.in"},
		{`{"in":"5m","every":"1s"}`, "predicate.every"},
	}
	w := timer.New(timer.Config{})
	for _, tt := range tests {
		_, err := w.Canonicalize(context.Background(), json.RawMessage(tt.in), now)
		if vigil.ErrorCode(err) != vigil.CodeInvalidPredicate || vigil.ErrorField(err) != tt.field {
			t.Errorf("Canonicalize(%s) = %v (field %q), want invalid_predicate on %s", tt.in, err, vigil.ErrorField(err), tt.field)
		}
	}
}

func TestProbe(t *testing.T) {
	t.Parallel()
	w := timer.New(timer.Config{})
	c, err := w.Canonicalize(context.Background(), json.RawMessage(`{"in":"10m"}`), now)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		at   time.Time
		want vigil.Observation
	}{
		{now, vigil.Observation{Verdict: vigil.VerdictPending, Summary: "waiting until 2026-03-01T09:10:00.000Z",
			Facts: map[string]any{"at": "2026-03-01T09:10:00.000Z"}}},
		{now.Add(10*time.Minute - time.Millisecond), vigil.Observation{Verdict: vigil.VerdictPending, Summary: "waiting until 2026-03-01T09:10:00.000Z",
			Facts: map[string]any{"at": "2026-03-01T09:10:00.000Z"}}},
		{now.Add(10 * time.Minute), vigil.Observation{Verdict: vigil.VerdictSatisfied, Summary: "reached 2026-03-01T09:10:00.000Z",
			Facts: map[string]any{"at": "2026-03-01T09:10:00.000Z"}}},
		{now.Add(time.Hour), vigil.Observation{Verdict: vigil.VerdictSatisfied, Summary: "reached 2026-03-01T09:10:00.000Z",
			Facts: map[string]any{"at": "2026-03-01T09:10:00.000Z"}}},
	}
	for _, tt := range tests {
		got, err := w.Probe(context.Background(), watcher.Probe{WatchID: "w", Kind: vigil.KindTimer, Predicate: c.Predicate, Now: tt.at})
		if err != nil {
			t.Fatalf("Probe(at %v) = %v", tt.at, err)
		}
		if diff := cmp.Diff(tt.want, got); diff != "" {
			t.Errorf("Probe(at %v) (-want +got):\n%s", tt.at, diff)
		}
	}
	if _, err := w.Probe(context.Background(), watcher.Probe{Kind: vigil.KindHTTP, Predicate: c.Predicate, Now: now}); !errors.Is(err, watcher.ErrWrongKind) {
		t.Errorf("Probe(http predicate) = %v, want ErrWrongKind", err)
	}
}

// The canonical predicate is what watcher.Encode writes for {"at": …}, for
// instants of any year, offset and precision given.
func TestCanonicalIsEncoded(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	w := timer.New(timer.Config{})
	for _, at := range []string{"2026-12-01T12:00:00Z", "2026-12-01T13:00:00.123456789+01:00", "2027-01-01T00:00:00.5-08:00", "2026-12-24T23:59:59.999Z"} {
		c, err := w.Canonicalize(context.Background(), json.RawMessage(`{"at":"`+at+`"}`), now)
		if err != nil {
			t.Fatalf("Canonicalize(%s) error = %v", at, err)
		}
		want, err := watcher.Encode(struct {
			At string `json:"at"`
		}{vigil.FormatTime(c.StartAt)})
		if err != nil {
			t.Fatal(err)
		}
		if string(c.Predicate) != string(want) {
			t.Errorf("Canonicalize(%s) = %s, want %s", at, c.Predicate, want)
		}
		// The first whole millisecond at or after the instant given.
		if t0, _ := vigil.ParseTime(at); c.StartAt.Before(t0) || !c.StartAt.Before(t0.Add(time.Millisecond)) || c.StartAt.Nanosecond()%1e6 != 0 {
			t.Errorf("Canonicalize(%s) instant = %v", at, c.StartAt)
		}
	}
}

// TestCanonicalizeSimpleAllocs: the spelling clients send, {"at":"…"} or
// {"in":"…"}, is read without the JSON decoder (its allocations were most
// of a batched timer's Canonicalize); what it gives is TestCanonicalize's.
func TestCanonicalizeSimpleAllocs(t *testing.T) {
	w := timer.New(timer.Config{})
	for _, raw := range []string{`{"at":"2026-03-01T10:00:00Z"}`, `{"in":"90m"}`} {
		allocs := testing.AllocsPerRun(100, func() {
			if _, err := w.Canonicalize(context.Background(), json.RawMessage(raw), now); err != nil {
				t.Fatal(err)
			}
		})
		if allocs > 6 {
			t.Errorf("Canonicalize(%s) allocates %.0f times, want at most 6 (no JSON decoder)", raw, allocs)
		}
	}
}

// TestProbeSimpleAllocs: a stored predicate, canonical, is read without
// the JSON decoder (a storm probes each of its timers once); a predicate
// spelled otherwise is still read, by the decoder.
func TestProbeSimpleAllocs(t *testing.T) {
	w := timer.New(timer.Config{})
	for _, raw := range []string{`{"at":"2026-03-01T09:10:00.000Z"}`, `{ "at" : "2026-03-01T09:10:00.000Z" }`, `{"At":"2026-03-01T09:10:00.000Z"}`} {
		p := watcher.Probe{WatchID: "w", Kind: vigil.KindTimer, Predicate: json.RawMessage(raw), Now: now.Add(time.Hour)}
		got, err := w.Probe(context.Background(), p)
		if err != nil {
			t.Fatalf("Probe(%s) = %v", raw, err)
		}
		want := vigil.Observation{Verdict: vigil.VerdictSatisfied, Summary: "reached 2026-03-01T09:10:00.000Z",
			Facts: map[string]any{"at": "2026-03-01T09:10:00.000Z"}}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("Probe(%s) (-want +got):\n%s", raw, diff)
		}
	}
	p := watcher.Probe{WatchID: "w", Kind: vigil.KindTimer, Predicate: json.RawMessage(`{"at":"2026-03-01T09:10:00.000Z"}`), Now: now}
	allocs := testing.AllocsPerRun(100, func() {
		if _, err := w.Probe(context.Background(), p); err != nil {
			t.Fatal(err)
		}
	})
	if allocs > 6 {
		t.Errorf("Probe allocates %.0f times, want at most 6 (no JSON decoder)", allocs)
	}
}

// TestNeverEarly: a timer given an instant finer than the millisecond is
// pending at the millisecond it falls in, satisfied at the next one.
func TestNeverEarly(t *testing.T) {
	w := timer.New(timer.Config{})
	at := time.Date(2026, 3, 1, 10, 0, 0, 500_000, time.UTC)
	c, err := w.Canonicalize(context.Background(), json.RawMessage(`{"at":"2026-03-01T10:00:00.0005Z"}`), now)
	if err != nil {
		t.Fatal(err)
	}
	if c.StartAt.Before(at) {
		t.Errorf("StartAt %v is before the instant given, %v", c.StartAt, at)
	}
	for _, tc := range []struct {
		now  time.Time
		want vigil.Verdict
	}{
		{at.Truncate(time.Millisecond), vigil.VerdictPending},
		{at.Truncate(time.Millisecond).Add(time.Millisecond), vigil.VerdictSatisfied},
	} {
		obs, err := w.Probe(context.Background(), watcher.Probe{Kind: vigil.KindTimer, Predicate: c.Predicate, Now: tc.now})
		if err != nil || obs.Verdict != tc.want {
			t.Errorf("Probe at %v = %v %v, want %v", tc.now, obs.Verdict, err, tc.want)
		}
	}
}
