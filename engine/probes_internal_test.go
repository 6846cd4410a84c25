package engine

import (
	"fmt"
	"testing"
	"time"

	"github.com/vigil-run/vigil"
)

// TestProbeLogOrdersByStart: probes are listed in the order they started,
// whatever order they are recorded in (a registration's first probe is
// recorded after its caller is answered, so a Check's probe can be
// recorded first), and a probe older than all of a full ring is dropped.
func TestProbeLogOrdersByStart(t *testing.T) {
	l := newProbeLog()
	at := time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC) // one instant for all: order is not the clock's
	rec := func(summary string, ticket uint64) {
		l.record("w", &vigil.Observation{Verdict: vigil.VerdictPending, Summary: summary}, at, ticket)
	}
	first, second, third := l.start("w"), l.start("w"), l.start("w")
	rec("second", second)
	rec("third", third)
	rec("first", first)
	rec("unknown", 0) // no ticket: the newest
	want := []string{"unknown", "third", "second", "first"}
	if got := summaries(l.recent("w")); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("recent = %v; want %v", got, want)
	}

	l = newProbeLog()
	old := l.start("w")
	for i := range ProbesPerWatch {
		rec(fmt.Sprint(i), l.start("w"))
	}
	rec("old", old)
	got := summaries(l.recent("w"))
	if len(got) != ProbesPerWatch || got[0] != fmt.Sprint(ProbesPerWatch-1) || got[ProbesPerWatch-1] != "0" {
		t.Errorf("full ring after an older probe = %v; want 19 … 0, the older one dropped", got)
	}
}

func summaries(ps []Probe) []string {
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = p.Summary
	}
	return out
}

// TestProbeLogForgetsOldest: past probeWatches watches, the watch first
// remembered is forgotten first, and its ring serves the new watch without
// any of its probes; once full, remembering a new watch allocates no ring
// (a storm of timers records thousands of watches once each).
func TestProbeLogForgetsOldest(t *testing.T) {
	l := newProbeLog()
	at := time.Date(2026, 12, 6, 10, 0, 0, 0, time.UTC)
	rec := func(id string) {
		l.record(id, &vigil.Observation{Verdict: vigil.VerdictSatisfied, Summary: "of " + id}, at, l.start(id))
	}
	const extra = 10
	for i := range probeWatches + extra {
		rec(fmt.Sprint("w", i))
		if i < 2*extra {
			rec(fmt.Sprint("w", i)) // two probes for the first ones
		}
	}
	if l.rings.Len() != probeWatches {
		t.Fatalf("%d watches remembered, want %d", l.rings.Len(), probeWatches)
	}
	for i := range probeWatches + extra {
		got := summaries(l.recent(fmt.Sprint("w", i)))
		want := []string{fmt.Sprint("of w", i)}
		switch {
		case i < extra:
			want = []string{}
		case i < 2*extra:
			want = append(want, want[0])
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("recent(w%d) = %v, want %v", i, got, want)
		}
	}
	obs := &vigil.Observation{Verdict: vigil.VerdictSatisfied, Summary: "reached"}
	ids := make([]string, 1000)
	for i := range ids {
		ids[i] = fmt.Sprint("new", i)
	}
	n := 0
	allocs := testing.AllocsPerRun(len(ids)-1, func() {
		l.record(ids[n], obs, at, l.start(ids[n]))
		n++
	})
	if allocs >= 1 {
		t.Errorf("recording a new watch in a full log allocates %.2f times, want none (its ring reused)", allocs)
	}
}
