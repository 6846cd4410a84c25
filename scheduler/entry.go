package scheduler

import (
	"container/heap"
	"context"
	"time"

	"github.com/vigil-run/vigil"
)

// flagPoked marks an entry poked while its probe was in flight: it is due
// again as soon as that probe ends, so no event is lost to single flight.
const flagPoked uint8 = 1 << 7

// NewEntry makes the entry of a pending watch, for Add or Prime: deadline
// is zero when it has none; instant marks a watch answered by the clock
// alone, which Run hands to the prober in batches. Set its due instant,
// progress and observer before handing it over.
func NewEntry(id string, kind vigil.Kind, every time.Duration, deadline time.Time, instant bool) *Entry {
	e := &Entry{id: id, kind: kind, every: every, index: -1}
	if !deadline.IsZero() {
		e.deadline = deadline.UnixNano()
	}
	if instant {
		e.class |= classInstant
	}
	return e
}

// Detached returns a stand-in entry in flight for a watch the scheduler
// does not hold (or whose probe is in flight): handed back, it is never put
// on the heap.
func Detached(id string, every time.Duration) *Entry {
	return &Entry{id: id, every: every, index: -1, flags: flagInflight | flagRemoved}
}

// SetDue sets when a new entry is first due.
func (e *Entry) SetDue(t time.Time) { e.due = t.UnixNano() }

// SetProgress sets the probe counts a new entry starts from (a restart's:
// its stored row's).
func (e *Entry) SetProgress(p vigil.Progress) { e.prog = pack(p) }

// SetObserver sets the registration waiting for a new entry's first
// observation.
func (e *Entry) SetObserver(o *Observer) { e.observer = o }

// ID returns the watch's id.
func (e *Entry) ID() string { return e.id }

// Kind returns the watch's kind.
func (e *Entry) Kind() vigil.Kind { return e.kind }

// Every returns the watch's probe interval (0: not probed on one).
func (e *Entry) Every() time.Duration { return e.every }

// Due returns the instant the entry was due.
func (e *Entry) Due() time.Time { return time.Unix(0, e.due) }

// Deadline returns the watch's deadline, and false when it has none.
func (e *Entry) Deadline() (time.Time, bool) {
	if e.deadline == 0 {
		return time.Time{}, false
	}
	return time.Unix(0, e.deadline), true
}

// Progress returns what the watch's probes have counted so far.
func (e *Entry) Progress() vigil.Progress { return e.prog.unpack() }

// Observer returns the registration waiting for the watch's first
// observation; nil when none is.
func (e *Entry) Observer() *Observer { return e.observer }

// Observed lets go of the observer once it heard the first observation.
func (e *Entry) Observed() { e.observer = nil }

// Take takes the entry of the watch with id off the heap, in flight, so
// that an answer arriving from outside a probe (a token watch's
// completion) can settle it: mine is false, and the entry a stand-in (see
// Detached), when the scheduler does not hold it or its probe is in
// flight; then the store's compare-and-set decides who wins.
func (s *Scheduler) Take(id string, every time.Duration) (e *Entry, mine bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e, mine = s.byID[id]
	if mine && e.flags&flagInflight == 0 && e.index >= 0 {
		heap.Remove(&s.h, int(e.index))
		e.flags |= flagInflight
		return e, true
	}
	return Detached(id, every), false
}

// runPrune runs the retention entry: p prunes and says when anything next
// becomes prunable; with nothing left the entry is disarmed.
func (s *Scheduler) runPrune(ctx context.Context, p Prober, e *Entry, now time.Time) {
	next := p.Prune(ctx, now)
	s.mu.Lock()
	defer s.mu.Unlock()
	e.flags &^= flagInflight
	if next.IsZero() {
		if s.pruneE == e {
			s.pruneE = nil
		}
		return
	}
	// A retention instant already reached means rows were written in the
	// same millisecond as the cut-off: run again just after it.
	if !next.After(now) {
		next = now.Add(time.Second)
	}
	e.due = next.UnixNano()
	heap.Push(&s.h, e)
}
