package engine_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/vigil-run/vigil"
	"github.com/vigil-run/vigil/engine"
	"github.com/vigil-run/vigil/scheduler"
	"github.com/vigil-run/vigil/store/memstore"
	"github.com/vigil-run/vigil/watcher"
	"github.com/vigil-run/vigil/watcher/timer"
	"github.com/vigil-run/vigil/watcher/watchertest"
)

func TestDeliverAndCheckHooks(t *testing.T) {
	t.Parallel()
	c := &clock{t: t0}
	var mu sync.Mutex
	var delivered []string
	fake := watchertest.NeverSettles(vigil.KindHTTP)
	e := engine.New(engine.Config{
		Store: memstore.New(), Watchers: watcher.NewRegistry(timer.New(timer.Config{}), fake), NowFunc: c.Now,
		DeliverFunc: func(w *vigil.Watch, m *vigil.Message) {
			mu.Lock()
			defer mu.Unlock()
			if m == nil || m.Seq == 0 || w.State != vigil.StateFired {
				t.Errorf("delivered %+v with message %+v: want a fired watch with its committed message", w, m)
			}
			delivered = append(delivered, w.ID)
		},
		CheckFunc: func(ctx context.Context, w *vigil.Watch) error {
			if w.Labels["token"] == "revoked" {
				return &scheduler.StopError{Reason: "revoked", Sentence: "The token that made this watch was revoked."}
			}
			return nil
		},
	})
	ctx := context.Background()
	if err := e.Prime(ctx); err != nil {
		t.Fatal(err)
	}
	tm, err := e.Register(ctx, vigil.RegisterRequest{Kind: vigil.KindTimer, Recipient: "r", Predicate: obj(`{"in":"1m"}`)})
	if err != nil {
		t.Fatal(err)
	}
	rv, err := e.Register(ctx, vigil.RegisterRequest{Kind: vigil.KindHTTP, Recipient: "r", Predicate: obj(`{}`), Labels: map[string]string{"token": "revoked"}})
	if err != nil {
		t.Fatal(err)
	}
	c.Set(t0.Add(time.Minute))
	e.Scheduler().Tick(ctx, t0.Add(time.Minute))
	if len(delivered) != 1 || delivered[0] != tm.ID {
		t.Fatalf("delivered %v, want only the timer %s", delivered, tm.ID)
	}
	got, _ := e.Watch(ctx, rv.ID)
	if got.State != vigil.StateCancelled || got.Outcome.Reason != "revoked" || fake.Probes(rv.ID) != 0 {
		t.Fatalf("revoked watch: %s %+v after %d probes; want cancelled before any probe", got.State, got.Outcome, fake.Probes(rv.ID))
	}
	p, _ := e.Messages(ctx, vigil.MessagesRequest{Recipient: "r"})
	if len(p.Messages) != 1 {
		t.Fatalf("mailbox %+v: a revocation must be silent", p.Messages)
	}
}
