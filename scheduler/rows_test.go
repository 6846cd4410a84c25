package scheduler_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/vigil-run/vigil"
	"github.com/vigil-run/vigil/scheduler"
	"github.com/vigil-run/vigil/store/memstore"
	"github.com/vigil-run/vigil/watcher"
	"github.com/vigil-run/vigil/watcher/watchertest"
)

var r0 = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

// TestWrongKindSettlesErrored: a predicate routed to the wrong watcher is
// a bug that no later probe will fix: the watch settles errored at its
// first probe, with the reason in its outcome, instead of staying pending
// as "unavailable: internal error".
func TestWrongKindSettlesErrored(t *testing.T) {
	t.Parallel()
	// A probed kind runs alone; an instant kind (timer) in a batch.
	for _, kind := range []vigil.Kind{vigil.KindHTTP, vigil.KindTimer} {
		t.Run(string(kind), func(t *testing.T) {
			t.Parallel()
			st := memstore.New()
			wrong := watchertest.Func(kind, func(_ context.Context, p watcher.Probe) (vigil.Observation, error) {
				return vigil.Observation{}, watcher.CheckKind(p, vigil.KindTCP)
			})
			s := scheduler.New(scheduler.Config{Store: st, Watchers: watcher.NewRegistry(wrong), NowFunc: func() time.Time { return r0 }})
			ctx := context.Background()
			if err := s.Prime(ctx); err != nil {
				t.Fatal(err)
			}
			w := newWatch("w1", time.Minute, r0)
			w.Kind = kind
			create(t, st, w)
			s.Add(w, nil)
			s.Tick(ctx, r0)
			got, err := st.WatchGet(ctx, "w1")
			if err != nil {
				t.Fatal(err)
			}
			if got.State != vigil.StateErrored || got.Outcome == nil || !strings.Contains(got.Outcome.Sentence, "wrong kind") {
				t.Fatalf("after one probe routed to the wrong watcher: %s %+v; want errored saying why", got.State, got.Outcome)
			}
			if _, _, ok := s.Info("w1"); ok {
				t.Error("the errored watch is still scheduled")
			}
		})
	}
}
