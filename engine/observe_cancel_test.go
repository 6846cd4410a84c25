package engine_test

import (
	"testing"
	"testing/synctest"

	"github.com/vigil-run/vigil"
	"github.com/vigil-run/vigil/watcher"
	"github.com/vigil-run/vigil/watcher/watchertest"
)

// A registration waiting for its first observation hears at once of a
// cancel that came before that probe ran, and answers with the watch as it
// is (cancelled), not, after the whole observe wait, as it was created
// (pending).
func TestObserveAnsweredByCancelBeforeFirstProbe(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		v := newEnv(t, envOpts{watchers: []watcher.Watcher{watchertest.NeverSettles(vigil.KindHTTP)}})
		type answer struct {
			w   *vigil.Watch
			err error
		}
		c := make(chan answer, 1)
		go func() {
			w, err := v.eng.Register(v.ctx, vigil.RegisterRequest{Kind: vigil.KindHTTP, Recipient: "agent-1", Predicate: obj(`{}`),
				Every: "1m", Deadline: "1h", Observe: true})
			c <- answer{w, err}
		}()
		synctest.Wait() // registered; waiting for a probe the engine does not run
		p, err := v.eng.Watches(v.ctx, vigil.ListRequest{})
		if err != nil || len(p.Watches) != 1 {
			t.Fatalf("Watches = %+v, %v", p, err)
		}
		if _, err := v.eng.Cancel(v.ctx, p.Watches[0].ID); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		select {
		case a := <-c:
			if a.err != nil || a.w.State != vigil.StateCancelled {
				t.Fatalf("Register = %+v, %v; want the cancelled watch", a.w, a.err)
			}
		default:
			t.Fatal("Register still waits for an observation of a cancelled watch")
		}
	})
}
