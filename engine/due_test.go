package engine_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/vigil-run/vigil"
	"github.com/vigil-run/vigil/store/memstore"
	"github.com/vigil-run/vigil/watcher"
	"github.com/vigil-run/vigil/watcher/watchertest"
)

// TestAddTwiceProbesOnce: adding a watch the scheduler already holds makes
// no second entry: one tick, one probe.
func TestAddTwiceProbesOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	now := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	st := memstore.New()
	fake := watchertest.NeverSettles(vigil.KindHTTP)
	s := newSched(schedConfig{Store: st, Watchers: watcher.NewRegistry(fake), NowFunc: func() time.Time { return now }})
	if err := s.Prime(ctx); err != nil {
		t.Fatal(err)
	}
	w := newWatch("w1", 30*time.Second, now)
	create(t, st, w)
	s.Add(w, nil)
	s.Add(w, nil)
	if n := s.Len(); n != 1 {
		t.Errorf("Len() = %d after adding one watch twice, want 1", n)
	}
	if n := s.Tick(ctx, now); n != 1 || fake.Probes("w1") != 1 {
		t.Errorf("Tick evaluated %d and probed w1 %d times, want 1 and 1", n, fake.Probes("w1"))
	}
}

// TestProbeAtDeadlineIsFinal: the probe that runs exactly at the deadline
// is the final one, and a watch still pending then expires there, whether
// it is probed on an interval or wakes only at its deadline.
func TestProbeAtDeadlineIsFinal(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		kind  vigil.Kind
		every time.Duration
	}{{vigil.KindHTTP, 10 * time.Second}, {vigil.KindToken, 0}} {
		t.Run(string(c.kind), func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			now := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
			deadline := now.Add(30 * time.Second)
			var (
				mu     sync.Mutex
				finals []bool
			)
			fake := watchertest.Func(c.kind, func(_ context.Context, p watcher.Probe) (vigil.Observation, error) {
				mu.Lock()
				finals = append(finals, p.Final)
				mu.Unlock()
				return vigil.Observation{Verdict: vigil.VerdictPending, Summary: "not yet"}, nil
			})
			st := memstore.New()
			s := newSched(schedConfig{Store: st, Watchers: watcher.NewRegistry(fake), NowFunc: func() time.Time { return now }})
			if err := s.Prime(ctx); err != nil {
				t.Fatal(err)
			}
			w := newWatch("w1", c.every, now)
			w.Kind, w.Deadline = c.kind, deadline
			create(t, st, w)
			s.Add(w, nil)
			for range 100 { // a probe at the deadline that is not final comes back at it
				next, ok := s.NextDue()
				if !ok || next.After(deadline) {
					break
				}
				s.Tick(ctx, next)
			}
			mu.Lock()
			defer mu.Unlock()
			if len(finals) == 0 || !finals[len(finals)-1] {
				t.Fatalf("%d probes, the last one Final = %t; want the last one (at the deadline) final", len(finals), len(finals) > 0 && finals[len(finals)-1])
			}
			for i, f := range finals[:len(finals)-1] {
				if f {
					t.Errorf("probe %d before the deadline was final", i+1)
				}
			}
			got, err := st.WatchGet(ctx, "w1")
			if err != nil {
				t.Fatal(err)
			}
			if got.State != vigil.StateExpired || !got.SettledAt.Equal(deadline) {
				t.Errorf("w1 = %s at %v, want expired at the deadline %v", got.State, got.SettledAt, deadline)
			}
			if n := s.Len(); n != 0 {
				t.Errorf("Len() = %d after the final probe, want 0", n)
			}
		})
	}
}
