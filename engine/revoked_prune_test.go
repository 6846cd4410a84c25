package engine_test

import (
	"context"
	"testing"
	"time"

	"github.com/vigil-run/vigil"
	"github.com/vigil-run/vigil/engine"
	"github.com/vigil-run/vigil/scheduler"
	"github.com/vigil-run/vigil/store/memstore"
	"github.com/vigil-run/vigil/watcher"
	"github.com/vigil-run/vigil/watcher/watchertest"
)

// TestRevokedCancelArmsPrune: a watch cancelled because its token was
// revoked is a settled watch like any other: the retention entry must be
// armed for it, or it is kept past retention (until the next restart or
// another settlement).
func TestRevokedCancelArmsPrune(t *testing.T) {
	t.Parallel()
	c := &clock{t: t0}
	s := scheduler.New(scheduler.Config{NowFunc: c.Now})
	e := engine.New(engine.Config{
		Store: memstore.New(), Watchers: watcher.NewRegistry(watchertest.NeverSettles(vigil.KindHTTP)), NowFunc: c.Now,
		Scheduler: s,
		CheckFunc: func(ctx context.Context, w *vigil.Watch) error {
			return &vigil.StopError{Reason: "revoked", Sentence: "The token that made this watch was revoked."}
		},
	})
	ctx := context.Background()
	if err := e.Prime(ctx); err != nil {
		t.Fatal(err)
	}
	w, err := e.Register(ctx, vigil.RegisterRequest{Kind: vigil.KindHTTP, Recipient: "r", Predicate: obj(`{}`), Every: "1m"})
	if err != nil {
		t.Fatal(err)
	}
	c.Set(t0.Add(time.Minute))
	e.Tick(ctx, t0.Add(time.Minute))
	got, _ := e.Watch(ctx, w.ID)
	if got.State != vigil.StateCancelled {
		t.Fatalf("watch %s, want cancelled", got.State)
	}
	if next, ok := s.NextDue(); !ok {
		t.Fatalf("nothing armed after a revoked watch settled (next %v): it is never pruned", next)
	}
}
