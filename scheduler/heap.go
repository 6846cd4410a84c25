package scheduler

import (
	"math"
	"time"

	"github.com/vigil-run/vigil"
)

// Entry is one pending watch as the scheduler hands it out and takes it in:
// made by NewEntry (or Detached) for Add and Prime, which copy it into the
// scheduler's own table and keep nothing of it; and made afresh each time
// an entry is popped, in flight, for the prober, which hands it back with
// Reschedule, Retry or Drop. The predicate is not kept: a probe reads the
// row.
type Entry struct {
	id       string
	kind     vigil.Kind
	due      int64 // unix nanoseconds
	deadline int64 // unix nanoseconds; 0 = none
	every    time.Duration
	prog     progress
	observer *Observer
	// slot is the entry's place in the scheduler's table while in flight;
	// -1 for an entry not (or no longer) the scheduler's: one being made,
	// or a stand-in (Detached), which a hand-back leaves alone.
	slot int32
	// class never changes after the entry is made, so a worker may read it
	// without the lock.
	class uint8
}

// slot is all the scheduler keeps in memory about one pending watch,
// without a pointer: a garbage collection does not look inside the table
// of a million of them (issue #18). The id is its bytes in the
// scheduler's arena, the kind an index into its table of kinds, and the
// observer, which few have, is in a side map.
type slot struct {
	due      int64 // unix nanoseconds
	deadline int64 // unix nanoseconds; 0 = none
	every    int64 // nanoseconds
	prog     progress
	idOff    uint32 // the id is arena[idOff : idOff+idLen]
	idLen    uint32
	pos      int32  // position in the heap; -1 when not in it
	kind     uint16 // index into Scheduler.kinds; kindSide: in Scheduler.oddKinds
	flags    uint8  // under the scheduler's lock
	class    uint8
}

// progress is vigil.Progress packed small.
type progress struct {
	polls, errors, consecutive, streak int32
	since, at, read                    int64
}

func (p progress) unpack() vigil.Progress {
	return vigil.Progress{Polls: int(p.polls), Errors: int(p.errors), Consecutive: int(p.consecutive), Streak: int(p.streak),
		Since: unixTime(p.since), At: unixTime(p.at), Read: unixTime(p.read)}
}

func pack(p vigil.Progress) progress {
	return progress{clamp32(p.Polls), clamp32(p.Errors), clamp32(p.Consecutive), clamp32(p.Streak), unixNano(p.Since), unixNano(p.At), unixNano(p.Read)}
}

// unixTime and unixNano convert between a time and unix nanoseconds, the
// zero time being 0.
func unixTime(n int64) time.Time {
	if n == 0 {
		return time.Time{}
	}
	return time.Unix(0, n).UTC()
}

func unixNano(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return nanos(t)
}

// The instants an int64 of unix nanoseconds holds: from 1677-09-21 to
// 2262-04-11.
var (
	minNanos = time.Unix(0, math.MinInt64)
	maxNanos = time.Unix(0, math.MaxInt64)
)

// nanos returns t in unix nanoseconds, an instant past 2262 (a backoff or
// an interval of a century or more) as the last one an int64 holds:
// t.UnixNano wraps around there, and a watch due in 2300 came due at
// once, in 1714.
func nanos(t time.Time) int64 {
	switch {
	case t.After(maxNanos):
		return math.MaxInt64
	case t.Before(minNanos):
		return math.MinInt64
	}
	return t.UnixNano()
}

const (
	flagInflight uint8 = 1 << iota // popped and being probed
	flagRemoved                    // removed (cancelled, closed, its shard lost) while in flight
	flagFree                       // the slot holds no watch (on the free list)
	// flagPoked marks an entry poked while its probe was in flight: it is
	// due again as soon as that probe ends, so no event is lost to single
	// flight.
	flagPoked
	// flagWaiting marks a watch added (or primed) again while the probe of
	// its removed incarnation is still in flight (see Scheduler.ghosts):
	// held, but off the heap until that probe is handed back, so that a
	// watch is never probed twice at once.
	flagWaiting
)

// Classes of entry (Entry.class, slot.class).
const (
	classInstant uint8 = 1 << iota // answered by the clock alone: settled in batches
	classPrune                     // the retention entry, not a watch
)

// The heap is a min-heap of slot numbers on due, ties broken by id for
// determinism; each slot knows its position (slot.pos). It is written out
// rather than through container/heap, whose Push and Pop take an any.

func (s *Scheduler) less(a, b int32) bool {
	x, y := &s.slots[a], &s.slots[b]
	if x.due != y.due {
		return x.due < y.due
	}
	return string(s.idBytes(x)) < string(s.idBytes(y))
}

func (s *Scheduler) swap(i, j int) {
	h := s.h
	h[i], h[j] = h[j], h[i]
	s.slots[h[i]].pos = int32(i)
	s.slots[h[j]].pos = int32(j)
}

func (s *Scheduler) up(j int) {
	for j > 0 {
		i := (j - 1) / 2
		if i == j || !s.less(s.h[j], s.h[i]) {
			break
		}
		s.swap(i, j)
		j = i
	}
}

func (s *Scheduler) down(i0, n int) bool {
	i := i0
	for {
		j1 := 2*i + 1
		if j1 >= n || j1 < 0 {
			break
		}
		j := j1
		if j2 := j1 + 1; j2 < n && s.less(s.h[j2], s.h[j1]) {
			j = j2
		}
		if !s.less(s.h[j], s.h[i]) {
			break
		}
		s.swap(i, j)
		i = j
	}
	return i > i0
}

// heapInit orders the whole heap, in O(n).
func (s *Scheduler) heapInit() {
	n := len(s.h)
	for i, k := range s.h {
		s.slots[k].pos = int32(i)
	}
	for i := n/2 - 1; i >= 0; i-- {
		s.down(i, n)
	}
}

func (s *Scheduler) heapPush(k int32) {
	s.slots[k].pos = int32(len(s.h))
	s.h = append(s.h, k)
	s.up(len(s.h) - 1)
}

// heapPop takes the minimum off the heap.
func (s *Scheduler) heapPop() int32 {
	n := len(s.h) - 1
	s.swap(0, n)
	s.down(0, n)
	k := s.h[n]
	s.h = s.h[:n]
	s.slots[k].pos = -1
	return k
}

// heapRemove takes the slot at position i off the heap.
func (s *Scheduler) heapRemove(i int) {
	n := len(s.h) - 1
	if n != i {
		s.swap(i, n)
		if !s.down(i, n) {
			s.up(i)
		}
	}
	k := s.h[n]
	s.h = s.h[:n]
	s.slots[k].pos = -1
}

// heapFix restores the order after the slot at position i changed its due.
func (s *Scheduler) heapFix(i int) {
	if !s.down(i, len(s.h)) {
		s.up(i)
	}
}

func clamp32(n int) int32 {
	if n > 1<<31-1 {
		return 1<<31 - 1
	}
	return int32(n)
}
