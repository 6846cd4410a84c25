package engine_test

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/vigil-run/vigil"
	"github.com/vigil-run/vigil/store/memstore"
	"github.com/vigil-run/vigil/watcher"
	"github.com/vigil-run/vigil/watcher/watchertest"
)

// TestWaitOnUnwatchableWaitsForItsSettlement: a wait (the HTTP long-poll,
// vigil wait, MCP watch_wait) on a watch shown unwatchable (a kind this
// build has no watcher for) waits for it to settle, as on a pending
// watch: it has not settled (it expires at its deadline, and a cancel
// or a replica that has the watcher may settle it sooner). The wait
// answered at once, as if it had settled.
func TestWaitOnUnwatchableWaitsForItsSettlement(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := memstore.New()
		old := newEnv(t, envOpts{store: st, watchers: []watcher.Watcher{watchertest.NeverSettles(vigil.KindTCP)}})
		w := old.register(vigil.RegisterRequest{Kind: vigil.KindTCP, Predicate: obj(`{"address":"db:5432"}`)})
		v := newEnv(t, envOpts{store: st}) // a build without the tcp watcher
		if got := v.get(w.ID).State; got != vigil.StateUnwatchable {
			t.Fatalf("the watch is %s in a build without its watcher, want unwatchable", got)
		}
		answered := make(chan *vigil.Watch, 1)
		go func() {
			got, err := v.eng.Wait(v.ctx, w.ID, 30*time.Second)
			if err != nil {
				t.Error(err)
			}
			answered <- got
		}()
		synctest.Wait()
		select {
		case got := <-answered:
			t.Fatalf("Wait on an unwatchable watch answered at once: %s, want it to wait for its settlement", got.State)
		default:
		}
		if _, err := v.eng.Cancel(v.ctx, w.ID); err != nil {
			t.Fatalf("Cancel: %v", err)
		}
		if got := <-answered; got == nil || got.State != vigil.StateCancelled {
			t.Fatalf("Wait = %+v, want the watch cancelled", got)
		}
	})
}
