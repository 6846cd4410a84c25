package engine_test

import (
	"context"
	"sync"
	"testing"

	"github.com/vigil-run/vigil"
	"github.com/vigil-run/vigil/internal/pgtest"
	"github.com/vigil-run/vigil/store/postgres"
	"github.com/vigil-run/vigil/watcher"
	"github.com/vigil-run/vigil/watcher/watchertest"
)

// Two replicas on one PostgreSQL database: a registration waiting for its
// watch's first observation on the replica holding the watch's shard, and
// a second registration of the same condition on the other replica while
// that observation runs, answered existing and pending. The observation
// settles the watch, answered at creation for the first: the second is
// not on the replica holding the first's observer, so only the database
// can tell the settling write that it waits for the outcome in the
// mailbox. The recipient gets the outcome exactly once, and the replica
// that settled pushes it (a settlement answered at creation is not
// pushed).
func TestObservedAnswerReachesARegistrationOnAnotherReplica(t *testing.T) {
	u := pgtest.Schema(t, "vigil_engine")
	openStore := func() *postgres.Store {
		s, err := postgres.Open(context.Background(), u, &postgres.Options{MaxConns: 4})
		if err != nil {
			t.Fatalf("Open: %v", err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	}
	started, release := make(chan struct{}), make(chan struct{})
	probe := watchertest.Func(vigil.KindHTTP, func(ctx context.Context, _ watcher.Probe) (vigil.Observation, error) {
		close(started)
		<-release
		return vigil.Observation{Verdict: vigil.VerdictSatisfied, Summary: "ready"}, nil
	})
	var (
		mu     sync.Mutex
		pushed []*vigil.Message
	)
	// a holds every shard, b none: b's registrations are probed by a.
	a := newEnv(t, envOpts{store: openStore(), watchers: []watcher.Watcher{probe}, holds: func(string) bool { return true },
		deliver: func(w *vigil.Watch, m *vigil.Message) {
			mu.Lock()
			defer mu.Unlock()
			if !w.AnsweredAtCreation && m != nil {
				pushed = append(pushed, m)
			}
		}})
	b := newEnv(t, envOpts{store: openStore(), watchers: []watcher.Watcher{probe}, holds: func(string) bool { return false }})
	var stopOnce sync.Once
	stop := runEngine(a)
	stopA := func() { stopOnce.Do(stop) }
	defer stopA()

	req := vigil.RegisterRequest{Kind: vigil.KindHTTP, Predicate: obj(`{"u":1}`), Recipient: "agent-1"}
	first := registerObserving(t, a, req)
	<-started // the first registration waits on a for this observation

	req.Observe = true
	second, err := b.eng.Register(b.ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if !second.Existing || second.State != vigil.StatePending {
		t.Fatalf("second registration, on b: existing=%v state=%s, want the existing pending watch", second.Existing, second.State)
	}
	close(release)
	w1 := <-first
	if w1 == nil || w1.State != vigil.StateFired {
		t.Fatalf("first registration, on a: %+v, want the fired watch", w1)
	}
	msgs := b.messages("agent-1")
	if len(msgs) != 1 || msgs[0].WatchID != second.ID || msgs[0].Type != vigil.MessageFired {
		t.Fatalf("the recipient's mailbox, read on b, holds %d messages (%+v); want the outcome, once", len(msgs), msgs)
	}
	if w1.AnsweredAtCreation {
		t.Error("the first registration's watch says answered at creation (nothing mailed), and its outcome was mailed")
	}
	// The settlement answers the observer before it pushes: once a's
	// engine has stopped, the settling probe has returned, push and all.
	stopA()
	mu.Lock()
	defer mu.Unlock()
	if len(pushed) != 1 || pushed[0].Seq != msgs[0].Seq {
		t.Errorf("a pushed %d messages (%+v), want the outcome message, seq %d", len(pushed), pushed, msgs[0].Seq)
	}
}
