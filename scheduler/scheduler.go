// Package scheduler decides WHEN each pending watch is probed; the engine
// decides what happens when it is (see Prober). It is ONE goroutine over a
// min-heap keyed on next-due plus one wake channel, and a fixed pool of
// probe workers: no goroutine, timer or ticker per watch, and nothing
// periodic. With nothing due the loop blocks on the wake channel and a
// single timer set to the heap minimum; an empty heap has no timer at all.
//
// Next-due and the probe counts of each watch live here, in memory, in a
// table without pointers (a slot per watch; ids in one arena of bytes, an
// open-addressing index from id to slot, the heap a slice of slot
// numbers), so that the garbage collector, which the runtime runs at least
// every two minutes, does not walk a million watches. The prober gets an
// Entry made for each turn. The store and the watchers are the prober's:
// this package imports only the root package, the standard library and
// x/sync.
//
// Prime arms the pending watches the prober loaded; Tick runs what is due
// at a given instant (tests drive it with a fake clock); Run is the loop
// (the spec's Start).
//
// A watch is probed once at a time: an entry in flight (popped, taken,
// or parked for its recipient's turn) is not popped or taken again
// before the prober hands it back. That holds across Remove: a watch
// removed while its probe is in flight (cancelled elsewhere, or a replica
// that lost its shard) and added again before that probe is handed back
// (a replica that took the shard back, arming it with Add, AddMany or
// Prime) is held at once, as a new watch with its own due instant and
// counts, but waits, neither due nor taken, until the probe of its
// removed incarnation is handed back; it is then armed at its own due
// instant (at once if that passed meanwhile). That hand-back, whatever
// it says (Reschedule, Retry or Drop), changes nothing the scheduler
// holds: it arms only a watch added again meanwhile, and then as added.
package scheduler

import (
	"context"
	"hash/maphash"
	"math"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/vigil-run/vigil"
)

// DefaultWorkers is the default size of the probe pool (probe_workers).
const DefaultWorkers = 8

// Config configures a Scheduler. Zero fields take defaults.
type Config struct {
	// NowFunc is the clock; nil means time.Now.
	NowFunc func() time.Time
	// Workers is the size of the probe pool (default DefaultWorkers). Run
	// gives one recipient's probes at most half of it.
	Workers int
	// BatchSize bounds how many instant watches (timers) go to the prober
	// in one batch (default 512).
	BatchSize int
}

// Prober decides what happens when a watch's turn comes: the engine
// implements it. Its methods run on the scheduler's workers. Each entry
// it is handed is in flight and its own until it hands it back with
// Reschedule, Retry or Drop (exactly one of them, always).
type Prober interface {
	// Probe runs the probe of e at now. turn, once the watch's recipient
	// is known, claims one of that recipient's probe slots (see Run):
	// when it returns false the entry was parked for a later turn and
	// Probe must return at once, leaving e alone.
	Probe(ctx context.Context, e *Entry, now time.Time, turn func(recipient string) bool)
	// Instant settles a batch of entries answered by the clock alone
	// (made instant by NewEntry), BatchSize at most.
	Instant(ctx context.Context, es []*Entry, now time.Time)
	// Prune deletes what is past retention and returns the next instant
	// anything becomes prunable; zero when nothing will.
	Prune(ctx context.Context, now time.Time) (next time.Time)
}

// Scheduler runs probes when they are due. Create it with New.
type Scheduler struct {
	cfg Config
	mu  sync.Mutex
	// slots holds every entry: pending, in flight, the retention entry,
	// and free ones (listed in free, reused first). None holds a pointer.
	slots []slot
	free  []int32
	// h is the heap of the slots waiting for their turn (see heap.go).
	h []int32
	// ids finds the slot of each watch held; arena holds the ids' bytes,
	// dead of them no longer a slot's (compacted when they are half).
	ids   idTable
	arena []byte
	dead  int
	// compactAt is how many dead bytes the arena may hold before it is
	// compacted (when they are also half of it): 1 MiB.
	compactAt int
	// kinds are the kinds seen, each once (a slot holds its index);
	// oddKinds the kinds of the slots past the 65 535th kind.
	kinds     []vigil.Kind
	kindIndex map[vigil.Kind]uint16
	oddKinds  map[int32]vigil.Kind
	// observers are the observers of the slots that have one (few:
	// registrations waiting for a first observation).
	observers map[int32]*Observer
	// ghosts are the slots of the watches removed while their probe was
	// in flight (flagRemoved), by id, until that probe is handed back: few
	// (probes in flight), and the only place a removed watch's id is
	// still found. A watch added again meanwhile waits for it (see Add).
	ghosts map[string]int32
	// pruneSlot is the one retention entry, when armed; -1 when not.
	pruneSlot int32
	// pruneLater is the earliest instant (unix ns) an ArmPrune asked for
	// while the retention entry was in flight, 0 when none did: the
	// running prune may have read the store before that write.
	pruneLater int64
	wake       chan struct{}
	// busy counts Run's probes in flight by recipient, and parked holds
	// the due probes waiting for their recipient's turn (see runFair).
	// Both hold only recipients with a probe running.
	busy   map[string]int
	parked map[string][]*Entry
}

// perRecipient is how many probes of one recipient Run runs at once: half
// the workers (at least one), so one recipient's slow probes always leave
// the other half to everyone else.
func (s *Scheduler) perRecipient() int { return max(1, s.cfg.Workers/2) }

// New returns a scheduler; call Prime before Tick or Run.
func New(cfg Config) *Scheduler {
	if cfg.NowFunc == nil {
		cfg.NowFunc = time.Now
	}
	if cfg.Workers <= 0 {
		cfg.Workers = DefaultWorkers
	}
	if cfg.BatchSize <= 0 {
		cfg.BatchSize = 512
	}
	return &Scheduler{
		cfg:       cfg,
		ids:       idTable{seed: maphash.MakeSeed()},
		compactAt: 1 << 20,
		pruneSlot: -1,
		wake:      make(chan struct{}, 1),
	}
}

// now is the scheduler's clock, to the millisecond the store keeps: the
// instant a worker hands a probe is the one its records carry.
func (s *Scheduler) now() time.Time { return s.cfg.NowFunc().UTC().Truncate(time.Millisecond) }

// signal wakes the loop without blocking.
func (s *Scheduler) signal() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// NextDue reports when the scheduler next has something to do; ok is false
// when the heap is empty.
func (s *Scheduler) NextDue() (t time.Time, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.nextLocked()
}

func (s *Scheduler) nextLocked() (time.Time, bool) {
	if len(s.h) == 0 {
		return time.Time{}, false
	}
	return time.Unix(0, s.slots[s.h[0]].due).UTC(), true
}

// Len returns how many watches the scheduler holds.
func (s *Scheduler) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.ids.n
}

// IDs returns the ids of the watches of kind the scheduler holds, in no
// order: what a daemon needs at start to wake the watches of one kind,
// without reading every pending row again.
func (s *Scheduler) IDs(kind vigil.Kind) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var ids []string
	for k := range s.slots {
		x := &s.slots[k]
		if x.flags&(flagFree|flagRemoved) != 0 || x.class&classPrune != 0 || s.kindOf(int32(k)) != kind {
			continue
		}
		ids = append(ids, string(s.idBytes(x)))
	}
	return ids
}

// Info returns what the scheduler knows of a pending watch: when it is next
// due and how many probes it has had.
func (s *Scheduler) Info(id string) (next time.Time, polls int, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	k, ok := s.lookup(id)
	if !ok {
		return time.Time{}, 0, false
	}
	x := &s.slots[k]
	return time.Unix(0, x.due).UTC(), int(x.prog.polls), true
}

// Live is what the scheduler knows of a pending watch between writes: when
// it is next due, what its probes counted and when the latest was made
// (zero before its first probe since the start).
type Live struct {
	NextDue                          time.Time
	Polls, Errors, ConsecutiveErrors int
	CheckedAt                        time.Time
}

// Live returns what the scheduler knows of a pending watch, and false when
// it does not hold it.
func (s *Scheduler) Live(id string) (Live, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	k, ok := s.lookup(id)
	if !ok {
		return Live{}, false
	}
	x := &s.slots[k]
	p := x.prog.unpack()
	return Live{NextDue: time.Unix(0, x.due).UTC(), Polls: p.Polls, Errors: p.Errors, ConsecutiveErrors: p.Consecutive, CheckedAt: p.At}, true
}

// Add schedules a newly registered watch at its entry's due instant, and
// wakes a waiting loop. It reports false, and arms nothing, when the
// scheduler holds the watch already.
//
// A watch removed while its probe was in flight and added again before
// that probe is handed back (a replica that lost a shard and took it
// back) is held from now on, as a new watch, but waits: it is not due,
// nor taken, until the probe of its removed incarnation ends, and is then
// armed at its own due instant (at once if that has passed). That probe's
// hand-back changes nothing of it. So a watch is never probed twice at
// once, whatever is removed and added meanwhile.
func (s *Scheduler) Add(e *Entry) bool {
	s.mu.Lock()
	if _, dup := s.lookup(e.id); dup {
		s.mu.Unlock()
		return false
	}
	s.arm(s.hold(e), e.id)
	s.mu.Unlock()
	s.signal()
	return true
}

// arm puts slot k, just held, of watch id, on the heap; or, when the
// probe of id's removed incarnation is in flight, makes it wait for it.
func (s *Scheduler) arm(k int32, id string) {
	if s.waits(k, id) {
		return
	}
	s.heapPush(k)
}

// waits reports whether slot k, of watch id, just held and on no heap,
// must wait for the probe of id's removed incarnation, and marks it so.
func (s *Scheduler) waits(k int32, id string) bool {
	if len(s.ghosts) == 0 {
		return false
	}
	if _, ok := s.ghosts[id]; !ok {
		return false
	}
	s.slots[k].flags |= flagWaiting
	return true
}

// AddMany arms newly created watches as Add does, under one lock and with
// one wake-up: a batch registration's. Entries held already are skipped.
func (s *Scheduler) AddMany(es []*Entry) {
	if len(es) == 0 {
		return
	}
	s.mu.Lock()
	s.ids.reserve(len(es))
	for _, e := range es {
		if _, dup := s.lookup(e.id); dup {
			continue
		}
		s.arm(s.hold(e), e.id)
	}
	s.mu.Unlock()
	s.signal()
}

// Reserve makes room for n more watches, so that priming a million grows
// the tables once.
func (s *Scheduler) Reserve(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ids.reserve(n)
	if m := len(s.slots) + n; m > cap(s.slots) {
		s.slots = append(make([]slot, 0, m), s.slots...)
	}
	if m := len(s.h) + n; m > cap(s.h) {
		s.h = append(make([]int32, 0, m), s.h...)
	}
}

// Prime arms the pending watches loaded at start (those held already are
// skipped). It may be called more than once before Primed, with a part of
// them each time (the entries handed over are not kept; see Reserve). A
// watch whose removed incarnation's probe is in flight waits for it, as
// in Add. The retention entry is held in flight from here to Primed, so
// the prunes that settlements made meanwhile arm (an overdue watch
// expired at start) find it running instead of making a second one.
func (s *Scheduler) Prime(es []*Entry) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ids.reserve(len(es))
	// Added one by one onto a large heap (a part of a priming), ordered
	// all at once onto a small one.
	build := len(es) > len(s.h)
	for _, e := range es {
		if _, dup := s.lookup(e.id); dup {
			continue
		}
		k := s.hold(e)
		switch {
		case s.waits(k, e.id):
		case build:
			s.h = append(s.h, k)
		default:
			s.heapPush(k)
		}
	}
	if build {
		s.heapInit()
	}
	if s.pruneSlot < 0 {
		s.pruneSlot = s.alloc(&Entry{id: "\x00prune", class: classPrune})
	}
	s.slots[s.pruneSlot].flags |= flagInflight
}

// Primed ends priming: it runs p's first prune at now, arms the retention
// entry from what it finds, and wakes the loop.
func (s *Scheduler) Primed(ctx context.Context, p Prober, now time.Time) {
	s.mu.Lock()
	k := s.pruneSlot
	s.mu.Unlock()
	if k >= 0 {
		s.runPrune(ctx, p, k, now)
	}
	s.signal()
}

// Remove forgets a watch that was cancelled or closed (or whose shard
// this replica lost). A probe in flight for it finishes, but its hand-back
// arms nothing (a settlement it makes loses the store's compare-and-set
// when the watch was cancelled); until then the watch, if added again,
// waits for it (see Add).
func (s *Scheduler) Remove(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	k, ok := s.lookup(id)
	if !ok {
		return
	}
	s.unhold(k)
	x := &s.slots[k]
	if x.flags&flagInflight != 0 {
		x.flags |= flagRemoved
		if s.ghosts == nil {
			s.ghosts = map[string]int32{}
		}
		s.ghosts[id] = k
		return
	}
	if x.pos >= 0 {
		s.heapRemove(int(x.pos))
	}
	// A registration waiting for a first observation that will never
	// come reads the watch as it is now.
	s.observers[k].Finish(nil)
	s.release(k)
}

// RemoveIf forgets every watch whose id drop says to, as Remove does (a
// replica that lost the shards they are in), and returns how many.
func (s *Scheduler) RemoveIf(drop func(id string) bool) int {
	s.mu.Lock()
	var ids []string
	for k := range s.slots {
		x := &s.slots[k]
		if x.flags&(flagFree|flagRemoved) != 0 || x.class&classPrune != 0 {
			continue
		}
		if id := string(s.idBytes(x)); drop(id) {
			ids = append(ids, id)
		}
	}
	s.mu.Unlock()
	for _, id := range ids {
		s.Remove(id)
	}
	return len(ids)
}

// Poke makes a pending watch due now, for event-driven watchers (a file
// system notification) that learn of a change before the next interval.
// A watch already in flight is left alone: its next probe comes soon
// anyway. Poke is cheap and safe to call from any goroutine.
func (s *Scheduler) Poke(id string) {
	now := s.now().UnixNano()
	s.mu.Lock()
	k, ok := s.lookup(id)
	var x *slot
	if ok {
		x = &s.slots[k]
		switch {
		case x.flags&flagInflight != 0:
			// Its probe may have looked before the event: due again when it ends.
			x.flags |= flagPoked
		case x.flags&flagWaiting != 0:
			// Due as soon as its removed incarnation's probe ends.
			x.due = min(x.due, now)
		}
	}
	if !ok || x.flags&flagInflight != 0 || x.due <= now || x.pos < 0 {
		s.mu.Unlock()
		return
	}
	x.due = now
	s.heapFix(int(x.pos))
	s.mu.Unlock()
	s.signal()
}

// ArmPrune makes sure the retention entry runs no later than t.
func (s *Scheduler) ArmPrune(t time.Time) {
	s.mu.Lock()
	armed := s.armPruneLocked(t)
	s.mu.Unlock()
	if armed {
		s.signal()
	}
}

func (s *Scheduler) armPruneLocked(t time.Time) bool {
	at := nanos(t)
	switch {
	case s.pruneSlot < 0:
		s.pruneSlot = s.alloc(&Entry{id: "\x00prune", class: classPrune, due: at})
		s.heapPush(s.pruneSlot)
	case s.slots[s.pruneSlot].flags&flagInflight != 0:
		// The running prune re-arms itself from what it finds, and from
		// this: what it finds may have been read before this write.
		if s.pruneLater == 0 || at < s.pruneLater {
			s.pruneLater = at
		}
		return false
	case at < s.slots[s.pruneSlot].due:
		s.slots[s.pruneSlot].due = at
		s.heapFix(int(s.slots[s.pruneSlot].pos))
	default:
		return false
	}
	return true
}

// job is one unit of work for a probe worker: a single probing watch, a
// batch of instant watches, or the retention entry.
type job struct {
	entries []*Entry
}

// popDueLocked takes the entries due at or before now off the heap, until
// it has made maxJobs jobs, and groups them into jobs.
func (s *Scheduler) popDueLocked(now time.Time, maxJobs int) []job {
	var jobs []job
	var batch []*Entry
	cut := now.UnixNano()
	for len(s.h) > 0 && s.slots[s.h[0]].due <= cut && len(jobs) < maxJobs {
		k := s.heapPop()
		s.slots[k].flags |= flagInflight
		e := s.entry(k)
		if e.class&classInstant != 0 {
			batch = append(batch, e)
			if len(batch) == s.cfg.BatchSize {
				jobs = append(jobs, job{batch})
				batch = nil
			}
			continue
		}
		jobs = append(jobs, job{[]*Entry{e}})
	}
	if len(batch) > 0 {
		jobs = append(jobs, job{batch})
	}
	return jobs
}

// Tick runs everything due at now to completion, using up to Workers probes
// at once, and returns how many watches it evaluated. Tests drive the
// scheduler with Tick and a fake clock; the daemon uses Run.
func (s *Scheduler) Tick(ctx context.Context, p Prober, now time.Time) int {
	now = now.UTC()
	s.mu.Lock()
	jobs := s.popDueLocked(now, math.MaxInt)
	s.mu.Unlock()
	var g errgroup.Group
	g.SetLimit(s.cfg.Workers)
	n := 0
	for _, j := range jobs {
		if j.entries[0].class&classPrune == 0 {
			n += len(j.entries)
		}
		g.Go(func() error { s.runJob(ctx, p, j, now, false); return nil })
	}
	_ = g.Wait()
	return n
}

// Run is the scheduler loop: it blocks until ctx is done, then waits for
// the probe workers to return. In-flight probes see ctx cancelled and write
// nothing.
func (s *Scheduler) Run(ctx context.Context, p Prober) error {
	jobs := make(chan job)
	var wg sync.WaitGroup
	for range s.cfg.Workers {
		wg.Go(func() {
			for j := range jobs {
				s.runJob(ctx, p, j, s.now(), true)
				s.signal()
			}
		})
	}
	// ready holds popped jobs not yet taken by a worker. It is topped up to
	// a few jobs per worker, not filled with everything due: a storm of a
	// million due watches starts settling at once instead of after they
	// have all been popped, and the heap keeps what cannot run yet.
	var ready []job
	defer func() {
		close(jobs)
		wg.Wait()
		s.unpark()
		s.unready(ready)
	}()

	timer := time.NewTimer(time.Hour)
	timer.Stop()
	defer timer.Stop()
	maxReady := 2 * s.cfg.Workers
	for {
		now := s.now()
		s.mu.Lock()
		if len(ready) < maxReady {
			ready = append(ready, s.popDueLocked(now, maxReady-len(ready))...)
		}
		next, ok := s.nextLocked()
		s.mu.Unlock()

		var timerC <-chan time.Time
		if len(ready) >= maxReady {
			// Full: the next send wakes the loop to top it up.
			timer.Stop()
		} else if ok {
			timer.Reset(next.Sub(now))
			timerC = timer.C
		} else {
			timer.Stop()
		}
		var send chan job
		var head job
		if len(ready) > 0 {
			send, head = jobs, ready[0]
		}
		select {
		case send <- head:
			ready[0] = job{}
			ready = ready[1:]
		case <-timerC:
		case <-s.wake:
		case <-ctx.Done():
			return nil
		}
	}
}

// runJob runs one job; fair (Run's workers) makes a probe take its turn
// among its recipient's (see runFair).
func (s *Scheduler) runJob(ctx context.Context, p Prober, j job, now time.Time, fair bool) {
	if j.entries[0].class&classPrune == 0 {
		// The probes about to run answer the pokes made while they
		// waited for a worker (in Run's ready jobs), as a parked
		// probe's does (nextTurn).
		s.mu.Lock()
		for _, e := range j.entries {
			if e.slot >= 0 {
				s.slots[e.slot].flags &^= flagPoked
			}
		}
		s.mu.Unlock()
	}
	switch {
	case j.entries[0].class&classPrune != 0:
		s.runPrune(ctx, p, j.entries[0].slot, now)
	case j.entries[0].class&classInstant != 0:
		p.Instant(ctx, j.entries, now)
	case fair:
		s.runFair(ctx, p, j.entries[0], now)
	default:
		p.Probe(ctx, j.entries[0], now, anyTurn)
	}
}

// anyTurn is the turn of a probe that does not wait for one (Tick's).
func anyTurn(string) bool { return true }

// runFair runs a probe in its recipient's turn. A recipient has at most
// perRecipient probes running; a probe of one that has them all running
// is parked (it has read its row, nothing more) and the worker moves on.
// So a recipient whose probes are slow (a command may run for minutes)
// holds at most half the workers, and the other half serve everyone
// else's due probes, delayed only by the reading of the rows due before
// them. The worker
// that ends one of a recipient's probes runs its next parked probe,
// oldest first, in the slot it holds. Instant batches (timers) are not
// probes: they never wait here.
func (s *Scheduler) runFair(ctx context.Context, p Prober, e *Entry, now time.Time) {
	held := ""
	for {
		// A worker that holds a turn already runs the next probe in it.
		p.Probe(ctx, e, now, func(recipient string) bool {
			if held != "" {
				return true
			}
			if !s.takeTurn(recipient, e) {
				return false
			}
			held = recipient
			return true
		})
		if held == "" {
			return
		}
		if e = s.nextTurn(held, ctx.Err() == nil); e == nil {
			return
		}
		now = s.now()
	}
}

// takeTurn claims a probe slot of recipient for e, or parks e.
func (s *Scheduler) takeTurn(recipient string, e *Entry) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.busy == nil {
		s.busy, s.parked = map[string]int{}, map[string][]*Entry{}
	}
	if s.busy[recipient] < s.perRecipient() {
		s.busy[recipient]++
		return true
	}
	s.parked[recipient] = append(s.parked[recipient], e)
	return false
}

// nextTurn hands recipient's slot, after one of its probes ended, to its
// oldest parked probe; with none (or more false: shutting down) it frees
// the slot and returns nil.
func (s *Scheduler) nextTurn(recipient string, more bool) *Entry {
	s.mu.Lock()
	defer s.mu.Unlock()
	q := s.parked[recipient]
	for more && len(q) > 0 {
		e := q[0]
		q[0] = nil
		q = q[1:]
		x := &s.slots[e.slot]
		if x.flags&flagRemoved != 0 {
			e.observer.Finish(nil)
			x.flags &^= flagInflight
			s.bury(e.slot)
			continue
		}
		// The probe it waited for is about to run: a poke meanwhile is
		// answered by it.
		x.flags &^= flagPoked
		s.parked[recipient] = q
		return e
	}
	if len(q) == 0 {
		delete(s.parked, recipient)
	} else {
		s.parked[recipient] = q
	}
	if s.busy[recipient]--; s.busy[recipient] <= 0 {
		delete(s.busy, recipient)
	}
	return nil
}

// unpark puts the probes still parked when Run stops back on the heap,
// due as they were.
func (s *Scheduler) unpark() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for r, q := range s.parked {
		for _, e := range q {
			if k := e.slot; s.handBack(e) {
				s.slots[k].flags &^= flagPoked
				s.heapPush(k)
			}
		}
		delete(s.parked, r)
	}
	clear(s.busy)
}

// unready puts the jobs Run popped and handed no worker before it
// stopped back on the heap, due as they were (the retention entry as
// asked meanwhile, if sooner), as unpark does the parked ones: left in
// flight, they were never due again.
func (s *Scheduler) unready(jobs []job) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, j := range jobs {
		for _, e := range j.entries {
			k := e.slot
			if e.class&classPrune != 0 {
				x := &s.slots[k]
				x.flags &^= flagInflight
				if later := s.pruneLater; later != 0 {
					s.pruneLater = 0
					x.due = min(x.due, later)
				}
				s.heapPush(k)
				continue
			}
			if s.handBack(e) {
				s.slots[k].flags &^= flagPoked
				s.heapPush(k)
			}
		}
	}
}

// Reschedule hands an entry in flight back, due at next with its new
// progress, unless it was removed while in flight.
func (s *Scheduler) Reschedule(e *Entry, next time.Time, p vigil.Progress) {
	s.reschedule(e, next, pack(p))
}

// Retry hands an entry in flight back, due at next with its progress as
// it was (a probe that could not run or record).
func (s *Scheduler) Retry(e *Entry, next time.Time) { s.reschedule(e, next, e.prog) }

func (s *Scheduler) reschedule(e *Entry, next time.Time, p progress) {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := e.slot
	if !s.handBack(e) {
		return
	}
	x := &s.slots[k]
	x.prog = p
	x.due = nanos(next)
	if x.flags&flagPoked != 0 {
		x.flags &^= flagPoked
		x.due = min(x.due, s.now().UnixNano())
	}
	s.heapPush(k)
}

// handBack ends e's flight: it reports false when the entry is not (or no
// longer) the scheduler's — a stand-in, or a watch removed meanwhile,
// whose slot it frees. Otherwise the slot takes e's observer back.
func (s *Scheduler) handBack(e *Entry) bool {
	k := e.slot
	if k < 0 {
		return false
	}
	e.slot = -1
	x := &s.slots[k]
	if x.flags&flagInflight == 0 {
		return false // not in flight: never the case, as e.slot is -1 once handed back
	}
	x.flags &^= flagInflight
	if x.flags&flagRemoved != 0 {
		s.bury(k)
		return false
	}
	if e.observer != nil {
		if s.observers == nil {
			s.observers = map[int32]*Observer{}
		}
		s.observers[k] = e.observer
	}
	return true
}

// Drop forgets an entry in flight after its watch settled or vanished.
func (s *Scheduler) Drop(e *Entry) {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := e.slot
	if !s.handBack(e) {
		return
	}
	s.unhold(k)
	s.release(k)
}

// bury frees slot k, whose watch was removed while its probe was in flight
// and which that probe no longer holds, and arms the watch's new
// incarnation that waited for it (see Add), at its own due instant.
func (s *Scheduler) bury(k int32) {
	id := string(s.idOf(k))
	if g, ok := s.ghosts[id]; ok && g == k {
		delete(s.ghosts, id)
	}
	s.release(k)
	if w, ok := s.lookup(id); ok && s.slots[w].flags&flagWaiting != 0 {
		s.slots[w].flags &^= flagWaiting
		s.heapPush(w)
		s.signal()
	}
}
