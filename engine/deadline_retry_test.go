package engine_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vigil-run/vigil"
	"github.com/vigil-run/vigil/store/memstore"
	"github.com/vigil-run/vigil/watcher"
	"github.com/vigil-run/vigil/watcher/watchertest"
)

// stumblingStore fails the next read of a watch (WatchGet) or the next
// settlement (WatchSettle) when asked to, writing nothing: a store that
// is busy for a moment.
type stumblingStore struct {
	vigil.Store
	failGet, failSettle atomic.Bool
}

var errStumble = errors.New("the store is busy for a moment")

func (s *stumblingStore) WatchGet(ctx context.Context, id string) (*vigil.Watch, error) {
	if s.failGet.CompareAndSwap(true, false) {
		return nil, errStumble
	}
	return s.Store.WatchGet(ctx, id)
}

func (s *stumblingStore) WatchSettle(ctx context.Context, ps []vigil.WatchSettleParams) ([]bool, error) {
	if s.failSettle.CompareAndSwap(true, false) {
		return nil, errStumble
	}
	return s.Store.WatchSettle(ctx, ps)
}

// TestFailedReadRetriesNoLaterThanTheDeadline: a probe turn whose read of
// the watch fails is tried again an interval on, but never past the
// watch's deadline. It was tried again a whole interval on: the final
// probe ran long after the deadline, and fired the watch on a condition
// that came true only after its deadline, which should have expired it.
func TestFailedReadRetriesNoLaterThanTheDeadline(t *testing.T) {
	t.Parallel()
	late := t0.Add(35 * time.Minute) // the condition comes true after the deadline
	fake := watchertest.Func(vigil.KindHTTP, func(_ context.Context, p watcher.Probe) (vigil.Observation, error) {
		if p.Now.Before(late) {
			return vigil.Observation{Verdict: vigil.VerdictPending, Summary: "not yet"}, nil
		}
		return vigil.Observation{Verdict: vigil.VerdictSatisfied, Summary: "done"}, nil
	})
	st := &stumblingStore{Store: memstore.New()}
	v := newEnv(t, envOpts{store: st, watchers: []watcher.Watcher{fake}})
	w := v.register(vigil.RegisterRequest{Kind: vigil.KindHTTP, Predicate: obj(`{}`), Every: "20m", Deadline: "30m"})
	v.tick(t0)
	st.failGet.Store(true)
	v.tick(t0.Add(20 * time.Minute)) // the read fails
	v.tick(t0.Add(30 * time.Minute)) // the deadline: its final probe
	v.tick(t0.Add(40 * time.Minute))
	got := v.get(w.ID)
	if got.State != vigil.StateExpired || got.Outcome == nil || got.Outcome.Reason != "deadline" {
		t.Fatalf("deadline at 30m, condition true from 35m, a read failed at 20m: %s %+v, want expired at the deadline", got.State, got.Outcome)
	}
	if !got.SettledAt.Equal(t0.Add(30 * time.Minute)) {
		t.Errorf("settled at %s, want at the deadline, %s", got.SettledAt, t0.Add(30*time.Minute))
	}
}

// TestFailedSettlementAtTheDeadlineRetriesSoon: the expiry of a watch
// whose commit at the deadline failed is tried again within seconds, not
// a whole interval later (an hour, for an hourly watch).
func TestFailedSettlementAtTheDeadlineRetriesSoon(t *testing.T) {
	t.Parallel()
	st := &stumblingStore{Store: memstore.New()}
	v := newEnv(t, envOpts{store: st, watchers: []watcher.Watcher{watchertest.NeverSettles(vigil.KindHTTP)}})
	w := v.register(vigil.RegisterRequest{Kind: vigil.KindHTTP, Predicate: obj(`{}`), Every: "1h", Deadline: "1h"})
	v.tick(t0)
	deadline := t0.Add(time.Hour)
	st.failSettle.Store(true)
	v.tick(deadline) // the expiry's commit fails
	if got := v.get(w.ID); got.State != vigil.StatePending {
		t.Fatalf("after a failed commit: %s, want pending", got.State)
	}
	if nd := v.get(w.ID).NextDue; nd.After(deadline.Add(time.Minute)) {
		t.Fatalf("after a failed commit at the deadline, the expiry is tried again at %s, %s after it", nd, nd.Sub(deadline))
	}
	v.tick(deadline.Add(time.Minute))
	if got := v.get(w.ID); got.State != vigil.StateExpired {
		t.Fatalf("a minute after the deadline whose commit failed: %s, want expired", got.State)
	}
}
