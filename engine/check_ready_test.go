package engine_test

import (
	"context"
	"strconv"
	"testing"
	"testing/synctest"

	"github.com/vigil-run/vigil"
	"github.com/vigil-run/vigil/engine"
	"github.com/vigil-run/vigil/scheduler"
	"github.com/vigil-run/vigil/store/memstore"
	"github.com/vigil-run/vigil/watcher"
	"github.com/vigil-run/vigil/watcher/timer"
	"github.com/vigil-run/vigil/watcher/watchertest"
)

// A Check of a watch that is due and waits for a free worker is answered by
// the probe that then runs, and makes no probe more.
func TestCheckOfAWatchWaitingForAWorker(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := &clock{t: t0}
		let := make(chan struct{})
		const slowID = "w1"
		f := watchertest.Func(vigil.KindHTTP, func(ctx context.Context, p watcher.Probe) (vigil.Observation, error) {
			if p.WatchID == slowID {
				select {
				case <-let:
				case <-ctx.Done():
				}
			}
			return vigil.Observation{Verdict: vigil.VerdictPending, At: p.Now, Summary: "not yet"}, nil
		})
		reg := watcher.NewRegistry(timer.New(timer.Config{}), f)
		sched := scheduler.New(scheduler.Config{NowFunc: c.Now, Workers: 1})
		n := 0
		eng := engine.New(engine.Config{Store: memstore.New(), Watchers: reg, Scheduler: sched, NowFunc: c.Now,
			NewIDFunc: func() string { n++; return "w" + strconv.Itoa(n) }})
		ctx, cancel := context.WithCancel(context.Background())
		if err := eng.Prime(ctx); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- eng.Run(ctx) }()
		defer func() { cancel(); <-done }()

		slow, err := eng.Register(ctx, vigil.RegisterRequest{Kind: vigil.KindHTTP, Recipient: "r1", Predicate: obj(`{"a":1}`), Every: "1h", Deadline: "24h"})
		if err != nil || slow.ID != slowID {
			t.Fatal(slow, err)
		}
		synctest.Wait() // the one worker is held by the slow probe
		if f.Probes(slowID) != 1 {
			t.Fatalf("the slow watch was probed %d times", f.Probes(slowID))
		}
		w, err := eng.Register(ctx, vigil.RegisterRequest{Kind: vigil.KindHTTP, Recipient: "r2", Predicate: obj(`{"b":1}`), Every: "1h", Deadline: "24h"})
		if err != nil {
			t.Fatal(err)
		}
		synctest.Wait() // due, waiting for the worker
		checked := make(chan error, 1)
		go func() { _, err := eng.Check(ctx, w.ID); checked <- err }()
		synctest.Wait() // the check waits for a probe
		close(let)
		if err := <-checked; err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		if n := f.Probes(w.ID); n != 1 {
			t.Fatalf("%d probes of the watch; want 1", n)
		}
	})
}
