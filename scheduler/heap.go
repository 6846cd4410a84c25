package scheduler

import (
	"time"

	"github.com/vigil-run/vigil"
)

// Entry is all the scheduler keeps in memory about one pending watch. The
// predicate is not kept: a probe reads the row.
type Entry struct {
	id       string
	kind     vigil.Kind
	due      int64 // unix nanoseconds
	deadline int64 // unix nanoseconds; 0 = none
	every    time.Duration
	index    int32 // position in the heap; -1 when not in it
	// flags change while the entry lives; read and write them under the
	// scheduler's lock.
	flags uint8
	// class never changes after the entry is made, so a worker may read it
	// without the lock.
	class    uint8
	prog     progress
	observer *Observer
}

// progress is vigil.Progress packed small: 100 000 entries must fit in
// well under 512 B each.
type progress struct {
	polls, errors, consecutive, streak int32
	since, at                          int64
}

func (p progress) unpack() vigil.Progress {
	return vigil.Progress{Polls: int(p.polls), Errors: int(p.errors), Consecutive: int(p.consecutive), Streak: int(p.streak),
		Since: unixTime(p.since), At: unixTime(p.at)}
}

func pack(p vigil.Progress) progress {
	return progress{clamp32(p.Polls), clamp32(p.Errors), clamp32(p.Consecutive), clamp32(p.Streak), unixNano(p.Since), unixNano(p.At)}
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
	return t.UnixNano()
}

const (
	flagInflight uint8 = 1 << iota // popped and being probed
	flagRemoved                    // cancelled or settled while in flight
)

// Classes of entry (entry.class).
const (
	classInstant uint8 = 1 << iota // answered by the clock alone: settled in batches
	classPrune                     // the retention entry, not a watch
)

// entryHeap is a min-heap on due, ties broken by id for determinism.
type entryHeap []*Entry

func (h entryHeap) Len() int { return len(h) }
func (h entryHeap) Less(i, j int) bool {
	if h[i].due != h[j].due {
		return h[i].due < h[j].due
	}
	return h[i].id < h[j].id
}
func (h entryHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].index = int32(i)
	h[j].index = int32(j)
}
func (h *entryHeap) Push(x any) {
	e := x.(*Entry)
	e.index = int32(len(*h))
	*h = append(*h, e)
}
func (h *entryHeap) Pop() any {
	old := *h
	n := len(old)
	e := old[n-1]
	old[n-1] = nil
	e.index = -1
	*h = old[:n-1]
	return e
}

func clamp32(n int) int32 {
	if n > 1<<31-1 {
		return 1<<31 - 1
	}
	return int32(n)
}
