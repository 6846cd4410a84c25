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
