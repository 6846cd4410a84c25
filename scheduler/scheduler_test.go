package scheduler_test

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/vigil-run/vigil"
	"github.com/vigil-run/vigil/scheduler"
)

// fakeProber decides nothing: each probe waits for release (when set),
// counts, and hands the entry back due every later; each instant batch is
// recorded and dropped; each prune answers pruneNext.
type fakeProber struct {
	s         *scheduler.Scheduler
	recipient string
	release   chan struct{}

	mu        sync.Mutex
	probes    map[string]int
	running   int
	most      int
	batches   []int
	prunes    []time.Time
	pruneNext time.Duration
}

func newFake(s *scheduler.Scheduler) *fakeProber {
	return &fakeProber{s: s, recipient: "r", probes: map[string]int{}}
}

func (f *fakeProber) Probe(_ context.Context, e *scheduler.Entry, now time.Time, turn func(string) bool) {
	if !turn(f.recipient) {
		return
	}
	f.mu.Lock()
	f.running++
	f.most = max(f.most, f.running)
	f.mu.Unlock()
	if f.release != nil {
		<-f.release
	}
	f.mu.Lock()
	f.running--
	f.probes[e.ID()]++
	p := e.Progress()
	p.Polls++
	f.mu.Unlock()
	f.s.Reschedule(e, now.Add(e.Every()), p)
}

func (f *fakeProber) Instant(_ context.Context, es []*scheduler.Entry, _ time.Time) {
	f.mu.Lock()
	f.batches = append(f.batches, len(es))
	f.mu.Unlock()
	for _, e := range es {
		f.s.Drop(e)
	}
}

func (f *fakeProber) Prune(_ context.Context, now time.Time) time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.prunes = append(f.prunes, now)
	if f.pruneNext == 0 {
		return time.Time{}
	}
	return now.Add(f.pruneNext)
}

func (f *fakeProber) count(id string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.probes[id]
}

func entry(id string, every time.Duration, due time.Time) *scheduler.Entry {
	e := scheduler.NewEntry(id, vigil.KindHTTP, every, time.Time{}, false)
	e.SetDue(due)
	return e
}

// TestLoopIdleAndWake runs the real loop in a synctest bubble: with nothing
// due it blocks with no timer; an Add wakes it at once; the probes keep
// their cadence; Info and Len follow; shutdown leaves no goroutine behind.
func TestLoopIdleAndWake(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := scheduler.New(scheduler.Config{})
		f := newFake(s)
		s.Prime(nil)
		ctx, cancel := context.WithCancel(context.Background())
		s.Primed(ctx, f, time.Now())
		done := make(chan error)
		go func() { done <- s.Run(ctx, f) }()
		synctest.Wait()
		if _, ok := s.NextDue(); ok {
			t.Fatal("an idle scheduler has something due")
		}
		time.Sleep(time.Hour)
		now := time.Now()
		if !s.Add(entry("w1", 30*time.Second, now)) || s.Add(entry("w1", 30*time.Second, now)) {
			t.Fatal("Add: want true for a new watch, false for one held already")
		}
		synctest.Wait()
		if got := f.count("w1"); got != 1 {
			t.Fatalf("a due watch: %d probes, want 1 at once", got)
		}
		time.Sleep(10*time.Minute - time.Millisecond)
		synctest.Wait()
		if got := f.count("w1"); got != 20 {
			t.Fatalf("loop probed a 30 s watch %d times in 10 min, want 20", got)
		}
		if next, polls, ok := s.Info("w1"); !ok || polls != 20 || !next.Equal(now.Add(10*time.Minute).UTC()) {
			t.Fatalf("Info = %v %d %v, want the next turn at 10 min, 20 polls", next, polls, ok)
		}
		if s.Len() != 1 || len(s.IDs(vigil.KindHTTP)) != 1 || len(s.IDs(vigil.KindTimer)) != 0 {
			t.Fatalf("Len %d, IDs %v", s.Len(), s.IDs(vigil.KindHTTP))
		}
		s.Remove("w1")
		time.Sleep(time.Hour)
		synctest.Wait()
		if got := f.count("w1"); got != 20 || s.Len() != 0 {
			t.Fatalf("a removed watch was probed again (%d) or is still held (%d)", got, s.Len())
		}
		cancel()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	})
}

// TestTurnsOfOneRecipient: one recipient's due probes take at most half
// the workers at once; the rest wait parked and run in the turns its
// probes free.
func TestTurnsOfOneRecipient(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := scheduler.New(scheduler.Config{Workers: 4})
		f := newFake(s)
		f.release = make(chan struct{})
		now := time.Now()
		var es []*scheduler.Entry
		for _, id := range []string{"a", "b", "c", "d", "e"} {
			es = append(es, entry(id, time.Hour, now))
		}
		s.Prime(es)
		ctx, cancel := context.WithCancel(context.Background())
		s.Primed(ctx, f, now)
		done := make(chan error)
		go func() { done <- s.Run(ctx, f) }()
		synctest.Wait()
		f.mu.Lock()
		running := f.running
		f.mu.Unlock()
		if running != 2 {
			t.Fatalf("%d probes of one recipient run at once with 4 workers, want 2", running)
		}
		for range 5 {
			f.release <- struct{}{}
		}
		synctest.Wait()
		for _, id := range []string{"a", "b", "c", "d", "e"} {
			if f.count(id) != 1 {
				t.Fatalf("%s probed %d times, want once", id, f.count(id))
			}
		}
		if f.most != 2 {
			t.Fatalf("at most %d probes ran at once, want 2", f.most)
		}
		cancel()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	})
}

// TestInstantBatchesAndPrune: Tick hands instant entries to the prober in
// batches of BatchSize; the retention entry runs at Primed and again at
// the instant the prober names.
func TestInstantBatchesAndPrune(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	s := scheduler.New(scheduler.Config{BatchSize: 2, NowFunc: func() time.Time { return now }})
	f := newFake(s)
	f.pruneNext = time.Hour
	var es []*scheduler.Entry
	for _, id := range []string{"t1", "t2", "t3"} {
		e := scheduler.NewEntry(id, vigil.KindTimer, 0, now, true)
		e.SetDue(now)
		es = append(es, e)
	}
	s.Prime(es)
	// A prune armed while priming waits for Primed's.
	s.ArmPrune(now)
	ctx := context.Background()
	s.Primed(ctx, f, now)
	if n := s.Tick(ctx, f, now); n != 3 {
		t.Fatalf("Tick evaluated %d watches, want 3", n)
	}
	if len(f.batches) != 2 || f.batches[0]+f.batches[1] != 3 || max(f.batches[0], f.batches[1]) != 2 {
		t.Fatalf("instant batches %v, want one of 2 and one of 1", f.batches)
	}
	if len(f.prunes) != 1 {
		t.Fatalf("%d prunes after priming, want 1", len(f.prunes))
	}
	if next, ok := s.NextDue(); !ok || !next.Equal(now.Add(time.Hour)) {
		t.Fatalf("next due %v %v, want the prune an hour on", next, ok)
	}
	s.Tick(ctx, f, now.Add(time.Hour))
	if len(f.prunes) != 2 || s.Len() != 0 {
		t.Fatalf("%d prunes, %d watches held; want 2 and none", len(f.prunes), s.Len())
	}
}
