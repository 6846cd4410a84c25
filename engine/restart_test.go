package engine_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/vigil-run/vigil"
	"github.com/vigil-run/vigil/store/memstore"
	"github.com/vigil-run/vigil/watcher"
	"github.com/vigil-run/vigil/watcher/watchertest"
)

// partedStore hands its pending watches over part rows at a time, as
// store/sqlite does a read of many (WatchListPendingFunc): priming loads
// each part while the store reads the next.
type partedStore struct {
	vigil.Store
	part  int
	parts int // how many it handed over, for the test
}

func (s *partedStore) WatchListPendingFunc(ctx context.Context, fn func(rows []vigil.ScheduleEntry, total int) error) error {
	rows, err := s.WatchListPending(ctx)
	if err != nil {
		return err
	}
	for len(rows) > 0 {
		n := min(s.part, len(rows))
		s.parts++
		if err := fn(slices.Clone(rows[:n]), len(rows)); err != nil {
			return err
		}
		rows = rows[n:]
	}
	return nil
}

func TestRestartRearmsWithJitterAndExpiresOverdue(t *testing.T) {
	t.Parallel()
	t.Run("one read", func(t *testing.T) { restartRearms(t, memstore.New()) })
	t.Run("in parts", func(t *testing.T) {
		st := &partedStore{Store: memstore.New(), part: 3}
		restartRearms(t, st)
		if st.parts < 2 {
			t.Errorf("the store handed its watches over in %d parts, want many", st.parts)
		}
	})
}

func restartRearms(t *testing.T, st vigil.Store) {
	t.Parallel()
	fake := watchertest.NeverSettles(vigil.KindHTTP)
	v := newEnv(t, envOpts{store: st, watchers: []watcher.Watcher{fake}})
	var ids []string
	for i := range 40 {
		ids = append(ids, v.register(vigil.RegisterRequest{Kind: vigil.KindHTTP, Predicate: obj(fmt.Sprintf(`{"n":%d}`, i)), Every: "30s", Deadline: "1h"}).ID)
	}
	short := make([]string, 5)
	for i := range short {
		short[i] = v.register(vigil.RegisterRequest{Kind: vigil.KindHTTP, Predicate: obj(fmt.Sprintf(`{"short":%d}`, i)), Every: "30s", Deadline: "2m"}).ID
	}
	v.tick(t0)

	// The daemon is down for 10 minutes; it comes back on the same store.
	rng := rand.New(rand.NewPCG(1, 2))
	restart := t0.Add(10 * time.Minute)
	v2 := newEnvAt(t, envOpts{store: st, watchers: []watcher.Watcher{fake},
		jitter: func(n time.Duration) time.Duration { return time.Duration(rng.Int64N(int64(n))) }}, restart)

	dues := map[time.Time]bool{}
	for _, id := range ids {
		next, _, ok := v2.sched.Info(id)
		if !ok {
			t.Fatalf("watch %s not re-armed", id)
		}
		if next.Before(restart) || !next.Before(restart.Add(30*time.Second)) {
			t.Fatalf("watch %s re-armed at %v, outside its own interval after the restart at %v", id, next, restart)
		}
		dues[next] = true
	}
	if len(dues) < 2 {
		t.Fatalf("40 recovered watches re-armed at %d distinct instants, want a spread", len(dues))
	}
	for _, id := range short {
		if w := v2.get(id); w.State != vigil.StateExpired || w.Outcome.Reason != "down_past_deadline" {
			t.Fatalf("overdue watch %s: %s %+v, want expired at once", id, w.State, w.Outcome)
		}
	}
	// A third start mails nothing again.
	newEnvAt(t, envOpts{store: st, watchers: []watcher.Watcher{fake}}, restart.Add(time.Minute))
	msgs := v2.messages("agent-1")
	if len(msgs) != len(short) {
		t.Fatalf("%d messages after two restarts, want exactly %d (one per overdue watch)", len(msgs), len(short))
	}
}
