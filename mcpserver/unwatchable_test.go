package mcpserver_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/vigil-run/vigil"
	"github.com/vigil-run/vigil/engine"
	"github.com/vigil-run/vigil/mcpserver"
	"github.com/vigil-run/vigil/store/memstore"
	"github.com/vigil-run/vigil/watcher"
	"github.com/vigil-run/vigil/watcher/timer"
	"github.com/vigil-run/vigil/watcher/watchertest"
)

// TestWaitOnUnwatchableIsNotSettled: watch_wait on a watch of a kind this
// build has no watcher for (unwatchable) answers settled false, saying
// why and when it can change (its deadline, when it expires): it has not
// settled (SPEC §1.2). It answered settled true, with no outcome.
func TestWaitOnUnwatchableIsNotSettled(t *testing.T) {
	t.Parallel()
	st := memstore.New()
	newer := engine.New(engine.Config{Store: st, Watchers: watcher.NewRegistry(watchertest.NeverSettles(vigil.KindTCP))})
	w, err := newer.Register(t.Context(), vigil.RegisterRequest{Kind: vigil.KindTCP, Predicate: json.RawMessage(`{"address":"db:5432"}`),
		Recipient: "agent-1", Deadline: "1h"})
	if err != nil {
		t.Fatalf("Register: %v", err)
	}
	e := engine.New(engine.Config{Store: st, Watchers: watcher.NewRegistry(timer.New(timer.Config{}))}) // no tcp watcher
	if err := e.Prime(t.Context()); err != nil {
		t.Fatalf("Prime: %v", err)
	}
	cs := connect(t, mcpserver.New(e, &mcpserver.Options{DefaultRecipient: "agent-1"}), nil)
	got := callOK[watchResult](t, cs, "watch_wait", map[string]any{"id": w.ID})
	if got.Settled || got.Watch.State != vigil.StateUnwatchable {
		t.Errorf("watch_wait on an unwatchable watch = settled %v, state %s; want not settled, unwatchable", got.Settled, got.Watch.State)
	}
	if !strings.HasPrefix(got.Hint, "Not settled: ") || !strings.Contains(got.Hint, "no watcher for kind") {
		t.Errorf("hint = %q, want it to say it has not settled, and why", got.Hint)
	}
	if got.RetryAfter < 3500 || got.RetryAfter > 3601 {
		t.Errorf("retry_after = %d, want about 3600, the seconds until its deadline", got.RetryAfter)
	}
}
