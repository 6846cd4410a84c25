package engine_test

import (
	"context"
	"errors"
	"testing"

	"github.com/vigil-run/vigil"
	"github.com/vigil-run/vigil/engine"
	"github.com/vigil-run/vigil/store/memstore"
	"github.com/vigil-run/vigil/watcher"
	"github.com/vigil-run/vigil/watcher/watchertest"
)

// TestScopeHidesOtherRecipientsWatch: a scoped caller gets not_found from
// the engine itself for a watch of a recipient outside its scope, on every
// call that names the watch, and a cancel or delete it asks for changes
// nothing; a caller whose scope holds the recipient sees it.
func TestScopeHidesOtherRecipientsWatch(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := memstore.New()
	e := engine.New(engine.Config{Store: st, NowFunc: (&clock{t: t0}).Now,
		Watchers: watcher.NewRegistry(watchertest.NeverSettles(vigil.KindHTTP))})
	if err := e.Prime(ctx); err != nil {
		t.Fatal(err)
	}
	w, err := e.Register(ctx, vigil.RegisterRequest{Kind: vigil.KindHTTP, Recipient: "b", Predicate: obj(`{}`)})
	if err != nil {
		t.Fatal(err)
	}
	other := vigil.WithScope(ctx, vigil.Scope{Recipients: []string{"a", "c"}, TokenID: "tok_a"})
	for _, c := range []struct {
		name string
		call func() error
	}{
		{"Watch", func() error { _, err := e.Watch(other, w.ID); return err }},
		{"Wait", func() error { _, err := e.Wait(other, w.ID, 0); return err }},
		{"Subscribe", func() error {
			sctx, cancel := context.WithCancel(other)
			defer cancel()
			_, err := e.Subscribe(sctx, vigil.EventFilter{WatchID: w.ID})
			return err
		}},
		{"Cancel", func() error { _, err := e.Cancel(other, w.ID); return err }},
		{"Delete", func() error { return e.Delete(other, w.ID) }},
	} {
		if err := c.call(); !errors.Is(err, vigil.ErrNotFound) {
			t.Errorf("%s of another recipient's watch = %v, want not_found", c.name, err)
		}
	}
	got, err := st.WatchGet(ctx, w.ID)
	if err != nil || got.State != vigil.StatePending {
		t.Fatalf("the watch after the refused calls = %+v, %v; want it still pending", got, err)
	}
	mine := vigil.WithScope(ctx, vigil.Scope{Recipients: []string{"b"}, TokenID: "tok_b"})
	if got, err := e.Watch(mine, w.ID); err != nil || got.ID != w.ID {
		t.Errorf("Watch in scope = %v, %v; want the watch", got, err)
	}
}
