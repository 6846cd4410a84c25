package engine_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vigil-run/vigil"
	"github.com/vigil-run/vigil/store/memstore"
	"github.com/vigil-run/vigil/watcher"
	"github.com/vigil-run/vigil/watcher/token"
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

// TestFailedFinalSettlementRunsNoProgramAgain: a command watch's final
// probe (at its deadline, or a probe that ran past it) runs the user's
// program once. When the settlement's commit fails, the retry writes the
// answer that probe obtained; it ran the program again, and settled on
// what that second run, past the deadline, said.
func TestFailedFinalSettlementRunsNoProgramAgain(t *testing.T) {
	t.Parallel()
	deadline := t0.Add(time.Minute)
	for _, c := range []struct {
		name string
		slot time.Time     // the probe that settles
		took time.Duration // how long it runs
	}{
		{"at the deadline", deadline, 0},
		{"running past the deadline", t0.Add(30 * time.Second), 45 * time.Second},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			var runs atomic.Int64
			var v *env
			cmd := watchertest.Func(vigil.KindCommand, func(_ context.Context, p watcher.Probe) (vigil.Observation, error) {
				runs.Add(1)
				if p.Now.Equal(c.slot) {
					v.clock.Add(c.took)
					return vigil.Observation{Verdict: vigil.VerdictFailed, Summary: "exit 1"}, nil
				}
				if p.Now.After(c.slot) {
					return vigil.Observation{Verdict: vigil.VerdictSatisfied, Summary: "exit 0"}, nil
				}
				return vigil.Observation{Verdict: vigil.VerdictPending, Summary: "not yet"}, nil
			})
			st := &stumblingStore{Store: memstore.New()}
			v = newEnv(t, envOpts{store: st, watchers: []watcher.Watcher{cmd}})
			w := v.register(vigil.RegisterRequest{Kind: vigil.KindCommand, Predicate: obj(`{"argv":["make","check"]}`),
				Every: "30s", Deadline: "1m"})
			v.tick(t0)
			if c.slot != deadline {
				st.failSettle.Store(true)
			}
			v.tick(t0.Add(30 * time.Second))
			if c.slot == deadline {
				st.failSettle.Store(true)
				v.tick(deadline)
			}
			before := runs.Load()
			if got := v.get(w.ID); got.State != vigil.StatePending {
				t.Fatalf("after the final probe's failed commit: %s, want pending", got.State)
			}
			// The retry's commit fails too: tried again later, not at once.
			st.failSettle.Store(true)
			retry := v.clock.Now().Add(time.Minute)
			v.tick(retry)
			if got := v.get(w.ID); got.State != vigil.StatePending || !got.NextDue.After(retry) {
				t.Fatalf("after the retry's failed commit: %s, next due %s; want pending, due after %s", got.State, got.NextDue, retry)
			}
			v.tick(retry.Add(time.Minute))
			got := v.get(w.ID)
			if n := runs.Load(); n != before {
				t.Errorf("the program ran %d times after the final probe whose commit failed, want none", n-before)
			}
			if got.State != vigil.StateFailed {
				t.Fatalf("after the retry: %s %+v, want failed, as the final probe answered", got.State, got.Outcome)
			}
			if msgs := v.messages("agent-1"); len(msgs) != 1 {
				t.Fatalf("mailbox = %+v, want one outcome", msgs)
			}
		})
	}
}

// TestCompletionNotWrittenIsUnavailable: a completion whose settlement the
// store could not write is answered unavailable, which callers try again
// (the CLI does), and the retry completes the watch. It was an internal
// error, which they do not.
func TestCompletionNotWrittenIsUnavailable(t *testing.T) {
	t.Parallel()
	st := &stumblingStore{Store: memstore.New()}
	v := newEnv(t, envOpts{store: st, watchers: []watcher.Watcher{token.New(token.Config{})}})
	w := v.register(vigil.RegisterRequest{Kind: vigil.KindToken})
	st.failSettle.Store(true)
	_, err := v.eng.Complete(v.ctx, vigil.CompleteRequest{Token: w.CompletionToken, Status: "success"})
	if vigil.ErrorCode(err) != vigil.CodeUnavailable || !strings.Contains(vigil.ErrorMessage(err), "try again") {
		t.Fatalf("Complete with the settlement not written = %v (code %s), want unavailable saying to try again", err, vigil.ErrorCode(err))
	}
	got, err := v.eng.Complete(v.ctx, vigil.CompleteRequest{Token: w.CompletionToken, Status: "success"})
	if err != nil || got.State != vigil.StateFired {
		t.Fatalf("the retry = %+v, %v; want the watch fired", got, err)
	}
}
