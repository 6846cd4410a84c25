package scheduler

import (
	"fmt"
	"testing"
	"time"

	"github.com/vigil-run/vigil"
)

// TestPopDueIsBounded: the loop tops its ready jobs up a few at a time; the
// rest of a storm stays on the heap, due, until workers can take it.
func TestPopDueIsBounded(t *testing.T) {
	s := New(Config{BatchSize: 10})
	now := time.Now()
	for i := range 1000 {
		e := NewEntry(fmt.Sprintf("w%04d", i), vigil.KindTimer, 0, time.Time{}, true)
		e.SetDue(now)
		s.heapPush(s.hold(e))
	}
	jobs := s.popDueLocked(now, 4)
	n := 0
	for _, j := range jobs {
		n += len(j.entries)
	}
	if len(jobs) != 4 || n != 40 || len(s.h) != 960 {
		t.Fatalf("popDueLocked(max 4 jobs) = %d jobs of %d watches, %d left on the heap; want 4 jobs of 40, 960 left", len(jobs), n, len(s.h))
	}
	rest := s.popDueLocked(now, 1<<30)
	n = 0
	for _, j := range rest {
		n += len(j.entries)
	}
	if n != 960 || len(s.h) != 0 {
		t.Fatalf("the rest: %d watches popped, %d left; want 960 and none", n, len(s.h))
	}
}
