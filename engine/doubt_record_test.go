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

// heldSettleStore fails the first settlement without saying whether it was
// written; it was (a COMMIT still on its way), and becomes visible just
// before the next write of any kind, an observation's included.
type heldSettleStore struct {
	vigil.Store
	mu     sync.Mutex
	failed bool
	held   []vigil.WatchSettleParams
}

func (s *heldSettleStore) flush(ctx context.Context) {
	if s.held != nil {
		_, _ = s.Store.WatchSettle(ctx, s.held)
		s.held = nil
	}
}

func (s *heldSettleStore) WatchSettle(ctx context.Context, ps []vigil.WatchSettleParams) ([]bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.flush(ctx)
	if !s.failed {
		s.failed = true
		s.held = ps
		return nil, errLostReply
	}
	return s.Store.WatchSettle(ctx, ps)
}

func (s *heldSettleStore) WatchObserve(ctx context.Context, p vigil.WatchObserveParams) (bool, error) {
	s.mu.Lock()
	s.flush(ctx)
	s.mu.Unlock()
	return s.Store.WatchObserve(ctx, p)
}

// TestDoubtResolvedWhenAnObservationLoses: a settlement whose commit failed
// but was written is handed on once even when the next probe does not
// settle (the condition flapped) and finds the watch settled only as it
// records its observation.
func TestDoubtResolvedWhenAnObservationLoses(t *testing.T) {
	var d delivered
	n := 0
	flap := watchertest.Func(vigil.KindHTTP, func(_ context.Context, p watcher.Probe) (vigil.Observation, error) {
		n++
		if n == 1 {
			return vigil.Observation{Verdict: vigil.VerdictSatisfied, At: p.Now, Summary: "up"}, nil
		}
		return vigil.Observation{Verdict: vigil.VerdictPending, At: p.Now, Summary: "down"}, nil
	})
	st := &heldSettleStore{Store: memstore.New()}
	v := newEnv(t, envOpts{store: st, deliver: d.deliver, watchers: []watcher.Watcher{flap}})
	var mu sync.Mutex
	settled := 0
	v.eng.HookEvents(func(ev vigil.Event) {
		if ev.Type == vigil.EventWatchSettled {
			mu.Lock()
			settled++
			mu.Unlock()
		}
	})
	w := v.register(vigil.RegisterRequest{Kind: vigil.KindHTTP, Predicate: obj(`{}`), Every: "1m", Deadline: "1h",
		Deliver: obj(`{"webhook":{"url":"https://hooks.example/in"}}`)})
	v.tick(t0)                                     // satisfied: the commit fails, written after all
	v.tickEach(time.Second, t0.Add(5*time.Minute)) // the retry: pending, and finds it settled as it records
	if s := v.get(w.ID).State; s != vigil.StateFired {
		t.Fatalf("state %s, want fired (the settlement in doubt was written)", s)
	}
	msgs := v.messages(w.Recipient)
	if len(msgs) != 1 {
		t.Fatalf("%d messages, want 1", len(msgs))
	}
	mu.Lock()
	defer mu.Unlock()
	if got := d.list(); len(got) != 1 || settled != 1 {
		t.Fatalf("handed on %v and watch.settled published %d times; want the settlement written handed on once", got, settled)
	}
}
