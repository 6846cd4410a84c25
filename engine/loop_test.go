package engine_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/goleak"

	"github.com/vigil-run/vigil"
	"github.com/vigil-run/vigil/store/memstore"
	"github.com/vigil-run/vigil/watcher"
	"github.com/vigil-run/vigil/watcher/watchertest"
)

func newWatch(id string, every time.Duration, now time.Time) *vigil.Watch {
	return &vigil.Watch{ID: id, Kind: vigil.KindHTTP, Predicate: json.RawMessage(`{}`), Recipient: "r", State: vigil.StatePending,
		Mode: vigil.ModeUntil, Every: every, Deadline: now.Add(time.Hour), CreatedAt: now, Identity: id}
}

func create(t testing.TB, st vigil.Store, w *vigil.Watch) {
	t.Helper()
	if _, err := st.WatchCreate(context.Background(), vigil.WatchCreateParams{Watch: w}); err != nil {
		t.Fatal(err)
	}
}

// TestLoopIdleAndWake runs the real loop in a synctest bubble: with nothing
// due it blocks with no timer; a registration wakes it at once; the probes
// keep their cadence; shutdown leaves no goroutine behind.
func TestLoopIdleAndWake(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := memstore.New()
		fake := watchertest.NeverSettles(vigil.KindHTTP)
		s := newSched(schedConfig{Store: st, Watchers: watcher.NewRegistry(fake)})
		ctx, cancel := context.WithCancel(context.Background())
		if err := s.Prime(ctx); err != nil {
			t.Fatal(err)
		}
		done := make(chan error)
		go func() { done <- s.Run(ctx) }()

		synctest.Wait()
		start := time.Now()
		if _, ok := s.NextDue(); ok {
			t.Fatal("an idle scheduler has something due")
		}
		// An hour of nothing: the loop never wakes (no timer exists), so no
		// probe can run and fake time passes untouched.
		time.Sleep(time.Hour)
		if fake.Total() != 0 {
			t.Fatal("an empty scheduler probed")
		}

		now := time.Now()
		w := newWatch("w1", 30*time.Second, now)
		create(t, st, w)
		s.Add(w, nil)
		synctest.Wait()
		if got := fake.Probes("w1"); got != 1 || !time.Now().Equal(now) {
			t.Fatalf("a due registration: %d probes after %v; want 1 at once", got, time.Since(now))
		}
		time.Sleep(10*time.Minute - time.Millisecond)
		synctest.Wait()
		if got := fake.Probes("w1"); got != 20 {
			t.Fatalf("loop probed a 30 s watch %d times in 10 min, want 20", got)
		}
		_ = start
		cancel()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	})
}

func TestRunShutdownLeaksNothing(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	st := memstore.New()
	block := make(chan struct{})
	fake := watchertest.Func(vigil.KindHTTP, func(ctx context.Context, p watcher.Probe) (vigil.Observation, error) {
		close(block)
		<-ctx.Done() // an in-flight probe is cancelled by shutdown
		return vigil.Observation{}, ctx.Err()
	})
	s := newSched(schedConfig{Store: st, Watchers: watcher.NewRegistry(fake), Workers: 2})
	ctx, cancel := context.WithCancel(context.Background())
	if err := s.Prime(ctx); err != nil {
		t.Fatal(err)
	}
	done := make(chan error)
	go func() { done <- s.Run(ctx) }()
	w := newWatch("w1", 30*time.Second, time.Now().UTC())
	create(t, st, w)
	s.Add(w, nil)
	<-block
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	got, _ := st.WatchGet(context.Background(), "w1")
	if got.State != vigil.StatePending || got.LastObservation != nil {
		t.Fatalf("a probe cut short by shutdown wrote %+v", got)
	}
}

func TestPokeMakesAWatchDueNow(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := memstore.New()
		fake := watchertest.NeverSettles(vigil.KindHTTP)
		s := newSched(schedConfig{Store: st, Watchers: watcher.NewRegistry(fake)})
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		if err := s.Prime(ctx); err != nil {
			t.Fatal(err)
		}
		done := make(chan error)
		go func() { done <- s.Run(ctx) }()
		w := newWatch("w1", 30*time.Minute, time.Now())
		create(t, st, w)
		s.Add(w, nil)
		synctest.Wait()
		time.Sleep(time.Minute)
		s.Poke("w1")
		s.Poke("nope")
		synctest.Wait()
		if got := fake.Probes("w1"); got != 2 {
			t.Fatalf("after a poke the watch was probed %d times, want 2 (once at creation, once poked)", got)
		}
		next, _ := s.NextDue()
		if want := w.CreatedAt.Add(time.Minute + 30*time.Minute); !next.Equal(want) {
			t.Fatalf("after a poke the next due is %v, want the grid from the poke, %v", next, want)
		}
		cancel()
		<-done
	})
}

// TestPokeDuringProbesIsRaceFree pokes watches while their probes run on
// the real loop; run with -race.
func TestPokeDuringProbesIsRaceFree(t *testing.T) {
	t.Parallel()
	st := memstore.New()
	fake := watchertest.NeverSettles(vigil.KindHTTP)
	s := newSched(schedConfig{Store: st, Watchers: watcher.NewRegistry(fake), Workers: 4})
	ctx, cancel := context.WithCancel(context.Background())
	if err := s.Prime(ctx); err != nil {
		t.Fatal(err)
	}
	done := make(chan error)
	go func() { done <- s.Run(ctx) }()
	now := time.Now().UTC()
	for i := range 8 {
		w := newWatch(fmt.Sprintf("w%d", i), time.Hour, now)
		create(t, st, w)
		s.Add(w, nil)
	}
	for n := 0; fake.Total() < 200 && n < 100_000; n++ {
		s.Poke(fmt.Sprintf("w%d", n%8))
		if n%64 == 0 {
			time.Sleep(time.Millisecond) // let probes run; not a schedule wait
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if fake.Total() < 16 {
		t.Fatalf("only %d probes ran under pokes", fake.Total())
	}
}

// TestIDsByKind: IDs lists the held watches of one kind, primed or added.
func TestIDsByKind(t *testing.T) {
	st := memstore.New()
	now := time.Now()
	primed := newWatch("h1", time.Minute, now)
	create(t, st, primed)
	s := newSched(schedConfig{Store: st, Watchers: watcher.NewRegistry(
		watchertest.NeverSettles(vigil.KindHTTP), watchertest.NeverSettles(vigil.KindTCP))})
	if err := s.Prime(context.Background()); err != nil {
		t.Fatal(err)
	}
	added := newWatch("h2", time.Minute, now)
	create(t, st, added)
	s.Add(added, nil)
	other := newWatch("t1", time.Minute, now)
	other.Kind, other.Identity = vigil.KindTCP, "t1"
	create(t, st, other)
	s.Add(other, nil)

	got := s.IDs(vigil.KindHTTP)
	slices.Sort(got)
	if !slices.Equal(got, []string{"h1", "h2"}) {
		t.Errorf("IDs(http) = %v, want [h1 h2]", got)
	}
	if got := s.IDs(vigil.KindFolder); len(got) != 0 {
		t.Errorf("IDs(folder) = %v, want none", got)
	}
}
