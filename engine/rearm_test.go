package engine_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/vigil-run/vigil"
	"github.com/vigil-run/vigil/store/memstore"
	"github.com/vigil-run/vigil/watcher"
	"github.com/vigil-run/vigil/watcher/watchertest"
)

// TestShardRetakenWhileProbing: a replica that loses a watch's shard while
// the watch's probe runs (a long command), and takes the shard back
// before that probe ends, does not start a second probe of the watch
// beside the first: the watch, armed again by the shard's priming (Adopt),
// waits for the first probe, and is probed once it ended, once. The
// hand-over is driven as daemon/shards.go drives it: the scheduler
// forgets the shard's watches (RemoveIf), and the engine adopts the
// shard's pending rows.
func TestShardRetakenWhileProbing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		st := memstore.New()
		release := make(chan struct{})
		var (
			mu              sync.Mutex
			in, most, total int
		)
		fake := watchertest.Func(vigil.KindHTTP, func(ctx context.Context, p watcher.Probe) (vigil.Observation, error) {
			mu.Lock()
			in++
			total++
			most = max(most, in)
			first := total == 1
			mu.Unlock()
			defer func() { mu.Lock(); in--; mu.Unlock() }()
			if first {
				select { // the first probe runs until released
				case <-release:
				case <-ctx.Done():
				}
			}
			return vigil.Observation{Verdict: vigil.VerdictPending, Summary: "not yet"}, nil
		})
		probes := func() (running, atOnce, started int) {
			mu.Lock()
			defer mu.Unlock()
			return in, most, total
		}
		var held atomic.Bool
		held.Store(true)
		r := newSched(schedConfig{Store: st, Watchers: watcher.NewRegistry(fake), HoldsFunc: func(string) bool { return held.Load() },
			JitterFunc: func(time.Duration) time.Duration { return 0 }})
		if err := r.Prime(ctx); err != nil {
			t.Fatal(err)
		}
		done := make(chan error)
		go func() { done <- r.Run(ctx) }()
		defer func() {
			cancel()
			if err := <-done; err != nil {
				t.Error(err)
			}
		}()

		w := newWatch("w1", 30*time.Second, time.Now())
		create(t, st, w)
		r.Add(w, nil)
		synctest.Wait()
		if in, _, _ := probes(); in != 1 {
			t.Fatalf("%d probes of w1 running, want its first", in)
		}

		// The shard is lost (daemon/shards.go's lose) and taken back
		// (its prime) while the probe runs.
		held.Store(false)
		if n := r.RemoveIf(func(string) bool { return true }); n != 1 {
			t.Fatalf("RemoveIf forgot %d watches, want w1", n)
		}
		held.Store(true)
		rows, err := st.WatchListPending(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := r.eng.Adopt(ctx, rows); err != nil {
			t.Fatal(err)
		}
		if _, ok := r.Live("w1"); !ok {
			t.Fatal("w1 is not armed again by the shard's priming")
		}
		synctest.Wait()
		if in, most, total := probes(); in != 1 || most != 1 || total != 1 {
			t.Fatalf("w1 armed again while its probe runs: %d probes of it running (at most %d at once, %d started), want the first alone", in, most, total)
		}
		time.Sleep(time.Minute) // due, and more, while the first probe runs
		synctest.Wait()
		if _, most, total := probes(); most != 1 || total != 1 {
			t.Fatalf("a minute on: at most %d probes of w1 at once, %d started; want the first alone", most, total)
		}

		close(release)
		synctest.Wait()
		// The new entry was due (the shard's priming armed it at once,
		// jitter 0): probed as soon as the first probe ended, alone.
		if in, most, total := probes(); in != 0 || most != 1 || total != 2 {
			t.Fatalf("after the first probe: %d running, at most %d at once, %d started; want one more probe, never two at once", in, most, total)
		}
		if n := fake.Probes("w1"); n != 2 {
			t.Fatalf("w1 probed %d times, want 2", n)
		}
	})
}
