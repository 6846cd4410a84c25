package scheduler_test

import (
	"context"
	"testing"
	"time"

	"github.com/vigil-run/vigil"
	"github.com/vigil-run/vigil/scheduler"
)

// TestFarFutureIsNotDueNow: an instant past what an int64 of nanoseconds
// holds (2262) is kept as the last one it holds, not wrapped around into
// the past: a watch armed (or handed back) due in 2300, or with its
// deadline there, is not due now.
func TestFarFutureIsNotDueNow(t *testing.T) {
	now := time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)
	far := time.Date(2300, 1, 1, 0, 0, 0, 0, time.UTC)
	s := scheduler.New(scheduler.Config{NowFunc: func() time.Time { return now }})
	f := newFake(s)
	s.Prime(nil)
	s.Primed(context.Background(), f, now)

	e := scheduler.NewEntry("armed", vigil.KindHTTP, time.Hour, far, false)
	e.SetDue(far)
	s.Add(e)
	if next, ok := s.NextDue(); !ok || !next.After(now) {
		t.Fatalf("a watch due in 2300 is next due %v", next)
	}
	if n := s.Tick(context.Background(), f, now); n != 0 {
		t.Fatalf("a watch due in 2300 was probed %d times in 2026", n)
	}

	// Handed back due in 2300 (a backoff of centuries).
	s.Add(entry("handed", time.Hour, now))
	h := &farProber{fakeProber: f, next: far}
	if n := s.Tick(context.Background(), h, now); n != 1 {
		t.Fatalf("the due watch: %d probes, want 1", n)
	}
	if n := s.Tick(context.Background(), h, now.Add(time.Hour)); n != 0 {
		t.Fatalf("a watch handed back due in 2300 was probed %d times in 2026", n)
	}
	if next, _, ok := s.Info("handed"); !ok || !next.After(now) {
		t.Fatalf("a watch handed back due in 2300 is next due %v", next)
	}
	if d, ok := e.Deadline(); !ok || !d.After(now) {
		t.Fatalf("a deadline in 2300 reads %v", d)
	}
}

// farProber hands every probed entry back due at next.
type farProber struct {
	*fakeProber
	next time.Time
}

func (f *farProber) Probe(_ context.Context, e *scheduler.Entry, _ time.Time, turn func(string) bool) {
	if turn(f.recipient) {
		f.s.Reschedule(e, f.next, e.Progress())
	}
}
