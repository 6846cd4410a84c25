package scheduler

import (
	"context"
	"math"
	"time"

	"github.com/vigil-run/vigil"
)

// NewEntry makes the entry of a pending watch, for Add or Prime: deadline
// is zero when it has none; instant marks a watch answered by the clock
// alone, which Run hands to the prober in batches. Set its due instant,
// progress and observer before handing it over.
func NewEntry(id string, kind vigil.Kind, every time.Duration, deadline time.Time, instant bool) *Entry {
	e := &Entry{id: id, kind: kind, every: every, slot: -1}
	if !deadline.IsZero() {
		e.deadline = nanos(deadline)
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
	return &Entry{id: id, every: every, slot: -1}
}

// SetDue sets when a new entry is first due.
func (e *Entry) SetDue(t time.Time) { e.due = nanos(t) }

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

// idOf returns the id bytes of slot k, in the arena: valid until the
// arena next changes.
func (s *Scheduler) idOf(k int32) []byte { return s.idBytes(&s.slots[k]) }

func (s *Scheduler) idBytes(x *slot) []byte { return s.arena[x.idOff : x.idOff+x.idLen] }

// lookup returns the slot of the watch with id, and false when the
// scheduler does not hold it (a watch removed while in flight is no longer
// held, though its slot lives until the prober hands it back).
func (s *Scheduler) lookup(id string) (int32, bool) {
	t := &s.ids
	if len(t.buckets) == 0 {
		return 0, false
	}
	h := t.hashString(id)
	mask := uint32(len(t.buckets) - 1)
	for i := h & mask; ; i = (i + 1) & mask {
		b := t.buckets[i]
		if b.slot == 0 {
			return 0, false
		}
		if b.hash == h && string(s.idOf(b.slot-1)) == id {
			return b.slot - 1, true
		}
	}
}

// hold makes a slot for e, held by its id: the caller knows the id is not
// held already.
func (s *Scheduler) hold(e *Entry) int32 {
	k := s.alloc(e)
	s.ids.insert(k, s.ids.hash(s.idOf(k)))
	return k
}

// unhold lets go of slot k's id (its slot lives on).
func (s *Scheduler) unhold(k int32) { s.ids.remove(k, s.ids.hash(s.idOf(k))) }

// alloc copies e into a slot, a free one if there is one, and returns its
// number; the slot is in no heap and held by no id.
func (s *Scheduler) alloc(e *Entry) int32 {
	if len(s.arena)+len(e.id) > math.MaxUint32 {
		s.compactArena()
		if len(s.arena)+len(e.id) > math.MaxUint32 {
			panic("scheduler: the ids held exceed 4 GiB")
		}
	}
	x := slot{due: e.due, deadline: e.deadline, every: int64(e.every), prog: e.prog, idOff: uint32(len(s.arena)),
		idLen: uint32(len(e.id)), pos: -1, class: e.class}
	s.arena = append(s.arena, e.id...)
	var k int32
	if n := len(s.free); n > 0 {
		k = s.free[n-1]
		s.free = s.free[:n-1]
		s.slots[k] = x
	} else {
		if len(s.slots) == math.MaxInt32 {
			panic("scheduler: more than 2³¹ entries")
		}
		k = int32(len(s.slots))
		s.slots = append(s.slots, x)
	}
	s.slots[k].kind = s.internKind(k, e.kind)
	if e.observer != nil {
		if s.observers == nil {
			s.observers = map[int32]*Observer{}
		}
		s.observers[k] = e.observer
	}
	return k
}

// kindSide marks a slot whose kind is in Scheduler.oddKinds: the table of
// kinds is full (a store holding tens of thousands of kinds).
const kindSide = math.MaxUint16

// internKind returns the index of kind in the table of kinds, adding it.
func (s *Scheduler) internKind(k int32, kind vigil.Kind) uint16 {
	if i, ok := s.kindIndex[kind]; ok {
		return i
	}
	if len(s.kinds) < kindSide {
		if s.kindIndex == nil {
			s.kindIndex = map[vigil.Kind]uint16{}
		}
		i := uint16(len(s.kinds))
		s.kinds = append(s.kinds, kind)
		s.kindIndex[kind] = i
		return i
	}
	if s.oddKinds == nil {
		s.oddKinds = map[int32]vigil.Kind{}
	}
	s.oddKinds[k] = kind
	return kindSide
}

func (s *Scheduler) kindOf(k int32) vigil.Kind {
	if i := s.slots[k].kind; i != kindSide {
		return s.kinds[i]
	}
	return s.oddKinds[k]
}

// release frees slot k, which is in no heap and held by no id. When no
// slot is left in use, or none but the retention entry's, the table
// starts afresh, giving back what a storm grew.
func (s *Scheduler) release(k int32) {
	s.dead += int(s.slots[k].idLen)
	delete(s.observers, k)
	if s.slots[k].kind == kindSide {
		delete(s.oddKinds, k)
	}
	s.slots[k] = slot{pos: -1, flags: flagFree}
	s.free = append(s.free, k)
	switch {
	case len(s.free) == len(s.slots):
		s.slots, s.free, s.arena, s.dead, s.h = nil, nil, nil, 0, nil
		s.ids.buckets, s.ids.n = nil, 0
	case s.giveBack():
	case s.dead > s.compactAt && s.dead*2 > len(s.arena):
		s.compactArena()
	}
}

// giveBack starts the table afresh with the retention entry alone when
// it is the only slot left in use and not in flight (its slot number is
// then no one's but the scheduler's), and reports whether it did. A
// daemon holds that entry from its first settlement on (it is armed at
// the next instant anything becomes prunable), so without this a storm's
// million slots, their index and their heap stayed for good once it had
// settled.
func (s *Scheduler) giveBack() bool {
	p := s.pruneSlot
	if p < 0 || len(s.slots) < 2 || len(s.free) != len(s.slots)-1 || s.slots[p].flags&flagInflight != 0 {
		return false
	}
	x := s.slots[p]
	kind := s.kindOf(p)
	id := append([]byte(nil), s.idBytes(&x)...)
	clear(s.oddKinds)
	clear(s.observers)
	onHeap := x.pos >= 0 // it is whenever it is not in flight
	x.idOff, x.pos = 0, -1
	s.slots, s.free, s.arena, s.dead, s.h = []slot{x}, nil, id, 0, nil
	s.ids.buckets, s.ids.n = nil, 0
	s.pruneSlot = 0
	s.slots[0].kind = s.internKind(0, kind)
	if onHeap {
		s.heapPush(0)
	}
	return true
}

// compactArena copies the ids still held into a new arena.
func (s *Scheduler) compactArena() {
	a := make([]byte, 0, len(s.arena)-s.dead)
	for k := range s.slots {
		x := &s.slots[k]
		if x.flags&flagFree != 0 {
			continue
		}
		off := len(a)
		a = append(a, s.idBytes(x)...)
		x.idOff = uint32(off)
	}
	s.arena, s.dead = a, 0
}

// entry makes the entry of slot k for the prober, taking the slot's
// observer with it (handed back, it returns).
func (s *Scheduler) entry(k int32) *Entry {
	x := &s.slots[k]
	e := &Entry{id: string(s.idBytes(x)), kind: s.kindOf(k), due: x.due, deadline: x.deadline, every: time.Duration(x.every),
		prog: x.prog, slot: k, class: x.class}
	if o, ok := s.observers[k]; ok {
		e.observer = o
		delete(s.observers, k)
	}
	return e
}

// Take takes the entry of the watch with id off the heap, in flight, so
// that an answer arriving from outside a probe (a token watch's
// completion) can settle it: mine is false, and the entry a stand-in (see
// Detached), when the scheduler does not hold it or its probe is in
// flight (or its removed incarnation's: see Add); then the store's
// compare-and-set decides who wins.
func (s *Scheduler) Take(id string, every time.Duration) (e *Entry, mine bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	k, ok := s.lookup(id)
	if ok && s.slots[k].flags&flagInflight == 0 && s.slots[k].pos >= 0 {
		s.heapRemove(int(s.slots[k].pos))
		s.slots[k].flags |= flagInflight
		return s.entry(k), true
	}
	return Detached(id, every), false
}

// runPrune runs the retention entry: p prunes and says when anything next
// becomes prunable; with nothing left the entry is disarmed.
func (s *Scheduler) runPrune(ctx context.Context, p Prober, k int32, now time.Time) {
	// What was armed before this prune starts, it finds; what is armed
	// while it runs (armPruneLocked) may have been written after it read.
	s.mu.Lock()
	s.pruneLater = 0
	s.mu.Unlock()
	next := p.Prune(ctx, now)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.slots[k].flags &^= flagInflight
	if later := s.pruneLater; later != 0 {
		s.pruneLater = 0
		if t := time.Unix(0, later); next.IsZero() || t.Before(next) {
			next = t
		}
	}
	if next.IsZero() {
		if s.pruneSlot == k {
			s.pruneSlot = -1
		}
		s.release(k)
		return
	}
	// A retention instant already reached means rows were written in the
	// same millisecond as the cut-off: run again just after it.
	if !next.After(now) {
		next = now.Add(time.Second)
	}
	s.slots[k].due = nanos(next)
	s.heapPush(k)
	// The storm it found over (settled while it ran) gives its slots back.
	s.giveBack()
}
