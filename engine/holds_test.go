package engine_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vigil-run/vigil"
	"github.com/vigil-run/vigil/store/memstore"
	"github.com/vigil-run/vigil/watcher"
	"github.com/vigil-run/vigil/watcher/watchertest"
)

// TestNothingRunsForAShardLost: on a replica, a watch armed while its
// shard was held is not probed once the shard is lost (its entry is
// dropped at its turn, and its watcher, which for a run watch starts a
// program, never runs here), and the rows of a shard lost while they
// were read arm nothing.
func TestNothingRunsForAShardLost(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	now := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	st := memstore.New()
	fake := watchertest.NeverSettles(vigil.KindHTTP)
	var held atomic.Bool
	held.Store(true)
	r := newSched(schedConfig{Store: st, Watchers: watcher.NewRegistry(fake), NowFunc: func() time.Time { return now },
		HoldsFunc: func(string) bool { return held.Load() }})
	if err := r.Prime(ctx); err != nil {
		t.Fatal(err)
	}
	e, sched := r.eng, r.Scheduler
	w := newWatch("w1", 30*time.Second, now)
	create(t, st, w)
	e.Arm(w, nil)
	if _, ok := sched.Live("w1"); !ok {
		t.Fatalf("w1 is not scheduled while its shard is held")
	}
	held.Store(false)
	e.Tick(ctx, now)
	if n := fake.Probes("w1"); n != 0 {
		t.Fatalf("w1 was probed %d times after its shard was lost, want never", n)
	}
	if _, ok := sched.Live("w1"); ok {
		t.Fatalf("w1 is still scheduled after its turn came with its shard lost")
	}
	if err := e.Adopt(ctx, []vigil.ScheduleEntry{{ID: "w1", Kind: vigil.KindHTTP, Every: 30 * time.Second, Deadline: w.Deadline}}); err != nil {
		t.Fatal(err)
	}
	if _, ok := sched.Live("w1"); ok {
		t.Fatalf("w1 was armed from the rows of a shard lost while they were read")
	}
	held.Store(true)
	if err := e.Adopt(ctx, []vigil.ScheduleEntry{{ID: "w1", Kind: vigil.KindHTTP, Every: 30 * time.Second, Deadline: w.Deadline}}); err != nil {
		t.Fatal(err)
	}
	e.Tick(ctx, now.Add(time.Minute))
	if n := fake.Probes("w1"); n != 1 {
		t.Fatalf("w1 was probed %d times once its shard was held again, want once", n)
	}
}
