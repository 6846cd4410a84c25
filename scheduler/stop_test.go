package scheduler_test

import (
	"context"
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/vigil-run/vigil/scheduler"
)

// TestStopHandsBackReady: the jobs Run popped and had not yet handed a
// worker when it stopped are back on the heap, due as they were, as its
// parked probes are: they were left in flight, never due again.
func TestStopHandsBackReady(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := scheduler.New(scheduler.Config{Workers: 1})
		f := newFake(s)
		f.release = make(chan struct{})
		s.Prime(nil)
		ctx, cancel := context.WithCancel(context.Background())
		s.Primed(ctx, f, time.Now())
		done := make(chan error)
		go func() { done <- s.Run(ctx, f) }()
		now := time.Now()
		s.Add(entry("w0", time.Hour, now))
		synctest.Wait() // w0's probe runs
		for i := 1; i < 5; i++ {
			s.Add(entry(fmt.Sprintf("w%d", i), time.Hour, now))
		}
		s.ArmPrune(now)
		synctest.Wait() // the loop holds the retention entry and w1 ready
		prunes := len(f.prunes)
		cancel()
		close(f.release)
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		for i := range 5 {
			id := fmt.Sprintf("w%d", i)
			next, _, ok := s.Info(id)
			if !ok {
				t.Fatalf("%s is no longer held", id)
			}
			if f.count(id) == 0 && !next.Equal(now.UTC()) {
				t.Errorf("%s, never probed, is due %v, want %v", id, next, now.UTC())
			}
		}
		// Everything not probed is due and is probed by the next turn.
		s.Tick(context.Background(), f, now)
		if len(f.prunes) != prunes+1 {
			t.Errorf("the retention entry ran %d times after the stop, want once", len(f.prunes)-prunes)
		}
		for i := range 5 {
			if id := fmt.Sprintf("w%d", i); f.count(id) != 1 {
				t.Errorf("%s probed %d times, want once", id, f.count(id))
			}
		}
	})
}
