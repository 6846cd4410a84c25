package scheduler_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/vigil-run/vigil/scheduler"
)

// runLoop starts s's loop with f as prober in the current bubble, primed,
// and returns the function that stops it and waits for it, letting f's
// probes still waiting for release go.
func runLoop(t *testing.T, s *scheduler.Scheduler, f *fakeProber) (stop func()) {
	t.Helper()
	s.Prime(nil)
	ctx, cancel := context.WithCancel(context.Background())
	s.Primed(ctx, f, time.Now())
	done := make(chan error)
	go func() { done <- s.Run(ctx, f) }()
	return func() {
		t.Helper()
		cancel()
		if f.release != nil {
			close(f.release)
		}
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
}

// runningNow returns how many of f's probes have started and not ended, and
// the most that ever ran at once.
func (f *fakeProber) runningNow() (running, most int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.running, f.most
}

// probing runs a scheduler's loop (until the test ends) over a fake prober
// whose probes end when told (f.release), with watch w added due now and
// its probe running, at start. Call inside synctest.
func probing(t *testing.T) (*scheduler.Scheduler, *fakeProber, time.Time) {
	return probingOf(t, 0, "w")
}

// probingOf is probing with workers (0: the default) and watch id.
func probingOf(t *testing.T, workers int, id string) (*scheduler.Scheduler, *fakeProber, time.Time) {
	t.Helper()
	s := scheduler.New(scheduler.Config{Workers: workers})
	f := newFake(s)
	f.release = make(chan struct{})
	t.Cleanup(runLoop(t, s, f))
	start := time.Now()
	s.Add(entry(id, time.Hour, start))
	synctest.Wait()
	return s, f, start
}

// TestReaddedWhileInFlightWaits: a watch removed while its probe is in
// flight (its shard lost) and added again before that probe ends (the
// shard taken back) is not probed a second time at once: the new entry
// waits, due or not, neither popped nor taken, until the first probe is
// handed back; it is then probed once, at its own due instant, with its
// own interval, whatever the first probe's hand-back said.
func TestReaddedWhileInFlightWaits(t *testing.T) {
	t.Run("due at once", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			s, f, start := probing(t)
			if running, _ := f.runningNow(); running != 1 {
				t.Fatalf("%d probes of w running, want 1", running)
			}

			s.Remove("w")
			if !s.Add(entry("w", 2*time.Hour, start)) {
				t.Fatal("Add refused w, removed")
			}
			synctest.Wait()
			if running, _ := f.runningNow(); running != 1 {
				t.Fatalf("w added again while its probe runs: %d probes of it run at once, want 1", running)
			}
			if e, mine := s.Take("w", time.Hour); mine {
				t.Fatal("Take took w while a probe of it runs")
			} else {
				s.Retry(e, start) // a stand-in: changes nothing
			}
			if next, _, ok := s.Info("w"); !ok || !next.Equal(start.UTC()) {
				t.Fatalf("Info(w) = %v %v, want held, due at %v", next, ok, start)
			}
			time.Sleep(time.Minute)
			synctest.Wait()
			if running, _ := f.runningNow(); running != 1 || f.count("w") != 0 {
				t.Fatalf("a minute on: %d probes of w running, %d ended; want the first still alone", running, f.count("w"))
			}

			f.release <- struct{}{} // the first probe ends, a minute in
			synctest.Wait()
			running, most := f.runningNow()
			if f.count("w") != 1 || running != 1 || most != 1 {
				t.Fatalf("after the first probe ended: %d ended, %d running, at most %d at once; want the new entry's probe running at once, alone", f.count("w"), running, most)
			}
			released := time.Now()
			f.release <- struct{}{}
			synctest.Wait()
			if n := f.count("w"); n != 2 {
				t.Fatalf("w probed %d times, want 2", n)
			}
			if next, _, _ := s.Info("w"); !next.Equal(released.Add(2 * time.Hour).UTC()) {
				t.Fatalf("w next due %v, want its new interval (2h) after its probe, %v", next, released.Add(2*time.Hour))
			}
		})
	})

	t.Run("due later", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			s, f, start := probing(t)
			s.Remove("w")
			s.Add(entry("w", time.Hour, start.Add(30*time.Minute)))
			time.Sleep(time.Minute)
			f.release <- struct{}{} // the first probe ends, hands w back due in an hour
			synctest.Wait()
			if running, _ := f.runningNow(); running != 0 || f.count("w") != 1 {
				t.Fatalf("%d probes of w running, %d ended; want the new entry waiting for its instant", running, f.count("w"))
			}
			if next, _, _ := s.Info("w"); !next.Equal(start.Add(30 * time.Minute).UTC()) {
				t.Fatalf("w next due %v, want the new entry's %v, not what the first probe's hand-back said", next, start.Add(30*time.Minute))
			}
			time.Sleep(29*time.Minute - time.Millisecond)
			synctest.Wait()
			if running, _ := f.runningNow(); running != 0 {
				t.Fatal("w probed before the new entry's due instant")
			}
			time.Sleep(time.Millisecond)
			synctest.Wait()
			if running, most := f.runningNow(); running != 1 || most != 1 {
				t.Fatalf("at the new entry's due instant: %d probes of w running (at most %d at once), want 1", running, most)
			}
			f.release <- struct{}{}
			synctest.Wait()
			if n := f.count("w"); n != 2 {
				t.Fatalf("w probed %d times, want 2", n)
			}
		})
	})

	t.Run("removed again", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			s, f, start := probing(t)
			s.Remove("w")
			s.Add(entry("w", time.Hour, start))
			s.Remove("w")
			f.release <- struct{}{}
			synctest.Wait()
			if s.Len() != 0 {
				t.Fatalf("the first probe's hand-back armed w, removed twice: %d held", s.Len())
			}
			time.Sleep(2 * time.Hour)
			synctest.Wait()
			if running, _ := f.runningNow(); running != 0 || f.count("w") != 1 {
				t.Fatalf("w removed: %d probes running, %d ended; want the first only", running, f.count("w"))
			}
		})
	})

	// A probe parked for its recipient's turn is in flight too: the new
	// entry waits for its turn to come (when the parked one is let go).
	t.Run("parked", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			s, f, start := probingOf(t, 2, "a") // one probe of a recipient at a time
			s.Add(entry("b", time.Hour, start))
			synctest.Wait() // b is parked
			s.Remove("b")
			s.Add(entry("b", time.Hour, start))
			synctest.Wait()
			if running, _ := f.runningNow(); running != 1 {
				t.Fatalf("%d probes running, want a's alone", running)
			}
			f.release <- struct{}{}
			synctest.Wait()
			if running, _ := f.runningNow(); running != 1 || f.count("a") != 1 {
				t.Fatalf("a ended: %d probes running, want b's new entry's", running)
			}
			f.release <- struct{}{}
			synctest.Wait()
			if f.count("b") != 1 {
				t.Fatalf("b probed %d times, want once", f.count("b"))
			}
		})
	})
}
