package engine_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/vigil-run/vigil"
	"github.com/vigil-run/vigil/store/memstore"
	"github.com/vigil-run/vigil/watcher"
	"github.com/vigil-run/vigil/watcher/watchertest"
)

// flakyStore fails the next failSettles settlements and counts prunes.
type flakyStore struct {
	vigil.Store
	mu          sync.Mutex
	failSettles int
	prunes      int
}

var errDisk = errors.New("disk I/O error")

func (s *flakyStore) WatchSettle(ctx context.Context, ps []vigil.WatchSettleParams) ([]bool, error) {
	s.mu.Lock()
	fail := s.failSettles > 0
	if fail {
		s.failSettles--
	}
	s.mu.Unlock()
	if fail {
		return nil, errDisk
	}
	return s.Store.WatchSettle(ctx, ps)
}

func (s *flakyStore) Prune(ctx context.Context, p vigil.PruneParams) (vigil.PruneResult, error) {
	s.mu.Lock()
	s.prunes++
	s.mu.Unlock()
	return s.Store.Prune(ctx, p)
}

func (s *flakyStore) pruneCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.prunes
}

// overdue stores a 30-second watch whose deadline passed an hour before
// now, as a daemon down for that hour finds it.
func overdue(t *testing.T, st vigil.Store, now time.Time) {
	t.Helper()
	w := newWatch("w1", 30*time.Second, now.Add(-2*time.Hour))
	create(t, st, w)
}

// TestPrimeFailsWhenOverdueExpiryFails: a store that cannot settle the
// watches found past their deadline at start makes Prime fail (the daemon
// does not become ready), and nothing of the watch is left scheduled; the
// next start expires it.
func TestPrimeFailsWhenOverdueExpiryFails(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	now := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	st := &flakyStore{Store: memstore.New(), failSettles: 1}
	overdue(t, st, now)
	fake := watchertest.NeverSettles(vigil.KindHTTP)
	newScheduler := func() *schedRig {
		return newSched(schedConfig{Store: st, Watchers: watcher.NewRegistry(fake), NowFunc: func() time.Time { return now }})
	}
	s := newScheduler()
	if err := s.Prime(ctx); !errors.Is(err, errDisk) {
		t.Fatalf("Prime with a failing settlement = %v, want the store's error", err)
	}
	if next, ok := s.NextDue(); ok {
		t.Errorf("after the failed Prime something is due at %v, want nothing scheduled", next)
	}
	if n := s.Tick(ctx, now.Add(time.Hour)); n != 0 || fake.Probes("w1") != 0 {
		t.Errorf("after the failed Prime a tick evaluated %d watches and probed w1 %d times, want none", n, fake.Probes("w1"))
	}
	if got, _ := st.WatchGet(ctx, "w1"); got.State != vigil.StatePending {
		t.Fatalf("w1 = %s after the failed expiry, want still pending", got.State)
	}

	s = newScheduler() // the next start
	if err := s.Prime(ctx); err != nil {
		t.Fatal(err)
	}
	if got, _ := st.WatchGet(ctx, "w1"); got.State != vigil.StateExpired || got.Outcome.Reason != "down_past_deadline" {
		t.Errorf("w1 after the next start = %s %+v, want expired down_past_deadline", got.State, got.Outcome)
	}
}

// TestOnePruneAfterOverdueExpiry: a start that expired overdue watches
// arms one retention entry, not two: a tick at the retention instant runs
// one prune.
func TestOnePruneAfterOverdueExpiry(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	now := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	st := &flakyStore{Store: memstore.New()}
	overdue(t, st, now)
	s := newSched(schedConfig{Store: st, Watchers: watcher.NewRegistry(watchertest.NeverSettles(vigil.KindHTTP)),
		NowFunc: func() time.Time { return now }})
	if err := s.Prime(ctx); err != nil {
		t.Fatal(err)
	}
	if got, _ := st.WatchGet(ctx, "w1"); got.State != vigil.StateExpired {
		t.Fatalf("w1 = %s after Prime, want expired", got.State)
	}
	before := st.pruneCount()
	next, ok := s.NextDue()
	if want := now.Add(vigil.DefaultLimits().RetentionWatches); !ok || !next.Equal(want) {
		t.Fatalf("NextDue() = %v, %t; want the retention instant %v", next, ok, want)
	}
	s.Tick(ctx, next)
	if n := st.pruneCount() - before; n != 1 {
		t.Errorf("a tick at the retention instant ran %d prunes, want 1", n)
	}
}
