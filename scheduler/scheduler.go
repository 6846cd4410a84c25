// Package scheduler decides when each pending watch is probed and settles it
// when an observation answers. It is ONE goroutine over a min-heap keyed on
// next-due plus one wake channel, and a fixed pool of probe workers: no
// goroutine, timer or ticker per watch, and nothing periodic. With nothing
// due the loop blocks on the wake channel and a single timer set to the heap
// minimum; an empty heap has no timer at all.
//
// Writes follow state changes, not elapsed time: next-due and poll counts
// live in memory, and a probe whose observation is the same as the last one
// writes nothing. Settling persists the outcome and its mailbox message in
// one transaction before anything else hears of it.
//
// Prime loads the pending watches; Tick runs what is due at a given instant
// (tests drive it with a fake clock); Run is the loop (the spec's Start).
package scheduler

import (
	"container/heap"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/oklog/ulid/v2"
	"golang.org/x/sync/errgroup"

	"github.com/vigil-run/vigil"
	"github.com/vigil-run/vigil/deliver"
	"github.com/vigil-run/vigil/watcher"
	"github.com/vigil-run/vigil/wording"
)

// DefaultWorkers is the default size of the probe pool (probe_workers).
const DefaultWorkers = 8

// Config configures a Scheduler. Zero fields take defaults.
type Config struct {
	Store    vigil.Store
	Watchers *watcher.Registry
	// NowFunc is the clock; nil means time.Now.
	NowFunc func() time.Time
	// Workers is the size of the probe pool (default DefaultWorkers). Run
	// gives one recipient's probes at most half of it.
	Workers int
	// Limits supplies the backoff cap and the retention periods; the zero
	// value means vigil.DefaultLimits().
	Limits vigil.Limits
	// Logger; nil discards.
	Logger *slog.Logger
	// JitterFunc returns a random duration in [0, n); nil uses math/rand/v2.
	JitterFunc func(n time.Duration) time.Duration
	// EventFunc hears of observations, settlements and new messages, after
	// they are committed. It must not block.
	EventFunc func(vigil.Event)
	// NewIDFunc makes message ids; nil makes ULIDs.
	NewIDFunc func() string
	// ProbeTimeout is a hard cap on one probe (default 15 min); watchers
	// bound themselves well within it.
	ProbeTimeout time.Duration
	// BatchSize bounds how many instant watches (timers) settle in one
	// transaction (default 512).
	BatchSize int
	// DeliverFunc, when set, hears of each settlement that won, after its
	// commit, with the outcome message (nil for a silent settlement such as
	// one answered at creation). It hands the work to the push channels and
	// must not block.
	DeliverFunc func(w *vigil.Watch, m *vigil.Message)
	// CheckFunc, when set, runs before each probe, timers' included; a
	// *StopError cancels the watch silently with the reason it names (a
	// revoked token), and no probe runs.
	CheckFunc func(ctx context.Context, w *vigil.Watch) error
	// Metrics, when set, hears of each probe and each settlement, for
	// monitoring.
	Metrics Metrics
	// ProbedFunc, when set, hears of each probe's observation, settling or
	// not, with the watch it probed (the panel's recent probes). It runs on
	// the worker and must not block.
	ProbedFunc func(w *vigil.Watch, obs *vigil.Observation)
}

// Metrics hears what the scheduler does. Its methods run on the scheduler's
// workers: they must be cheap and must not block.
type Metrics interface {
	// Probed: a probe of a watch of kind answered verdict. It started late
	// after the watch was due and took took.
	Probed(kind vigil.Kind, verdict vigil.Verdict, late, took time.Duration)
	// Settled: a watch of kind settled as state, its settlement committed
	// late after the instant it was due (a timer's: its own instant).
	Settled(kind vigil.Kind, state vigil.State, late time.Duration)
}

// ReasonNoWatcher is the outcome reason of a watch of a kind this build
// has no watcher for, expired at its deadline.
const ReasonNoWatcher = "no_watcher"

// StopError cancels a watch silently before its probe: see Config.CheckFunc.
type StopError struct {
	// Reason is the outcome's machine word ("revoked").
	Reason string
	// Sentence is the outcome's sentence.
	Sentence string
}

func (e *StopError) Error() string { return e.Sentence }

// Scheduler runs probes when they are due. Create it with New.
type Scheduler struct {
	cfg  Config
	log  *slog.Logger
	mu   sync.Mutex
	h    entryHeap
	byID map[string]*entry
	// pruneE is the one retention entry, when armed.
	pruneE *entry
	wake   chan struct{}
	// busy counts Run's probes in flight by recipient, and parked holds
	// the due probes waiting for their recipient's turn (see runFair).
	// Both hold only recipients with a probe running.
	busy   map[string]int
	parked map[string][]*entry
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
	if cfg.Limits == (vigil.Limits{}) {
		cfg.Limits = vigil.DefaultLimits()
	}
	if cfg.JitterFunc == nil {
		cfg.JitterFunc = func(n time.Duration) time.Duration {
			if n <= 0 {
				return 0
			}
			return time.Duration(rand.Int64N(int64(n)))
		}
	}
	if cfg.EventFunc == nil {
		cfg.EventFunc = func(vigil.Event) {}
	}
	if cfg.NewIDFunc == nil {
		cfg.NewIDFunc = func() string { return ulid.Make().String() }
	}
	if cfg.ProbeTimeout <= 0 {
		cfg.ProbeTimeout = 15 * time.Minute
	}
	if cfg.BatchSize <= 0 {
		cfg.BatchSize = 512
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Scheduler{
		cfg:  cfg,
		log:  log.With("component", "scheduler"),
		byID: make(map[string]*entry),
		wake: make(chan struct{}, 1),
	}
}

func (s *Scheduler) now() time.Time { return s.cfg.NowFunc().UTC() }

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
	return time.Unix(0, s.h[0].due).UTC(), true
}

// Len returns how many watches the scheduler holds.
func (s *Scheduler) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.byID)
}

// IDs returns the ids of the watches of kind the scheduler holds, in no
// order: what a daemon needs at start to wake the watches of one kind,
// without reading every pending row again.
func (s *Scheduler) IDs(kind vigil.Kind) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var ids []string
	for id, e := range s.byID {
		if e.kind == kind {
			ids = append(ids, id)
		}
	}
	return ids
}

// Info returns what the scheduler knows of a pending watch: when it is next
// due and how many probes it has had.
func (s *Scheduler) Info(id string) (next time.Time, polls int, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.byID[id]
	if !ok {
		return time.Time{}, 0, false
	}
	return time.Unix(0, e.due).UTC(), int(e.prog.polls), true
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
	e, ok := s.byID[id]
	if !ok {
		return Live{}, false
	}
	p := e.prog.unpack()
	return Live{NextDue: time.Unix(0, e.due).UTC(), Polls: p.Polls, Errors: p.Errors, ConsecutiveErrors: p.Consecutive, CheckedAt: p.At}, true
}

// firstDue says when a watch is first due, and false when it never is (a
// kind that is not probed and has no deadline).
func firstDue(spec vigil.KindSpec, every time.Duration, start, deadline, now time.Time) (time.Time, bool) {
	switch {
	case !start.IsZero() && start.After(now):
		return start, true
	case spec.Instant || every > 0:
		return now, true
	case !deadline.IsZero():
		return deadline, true
	}
	return time.Time{}, false
}

// Add schedules a newly registered watch: its first probe runs at once (or
// at its StartAt), and a waiting loop is woken. o, when non-nil, hears the
// first observation (registration with observe).
func (s *Scheduler) Add(w *vigil.Watch, o *Observer) {
	spec, _ := vigil.SpecOf(w.Kind)
	now := w.CreatedAt
	if now.IsZero() {
		now = s.now()
	}
	due, ok := firstDue(spec, w.Every, w.StartAt, w.Deadline, now)
	if wt, found := s.cfg.Watchers.Lookup(w.Kind); found {
		if next, due2, cal := calendarDue(wt, w.Predicate, w.CreatedAt, now); cal {
			due, ok = next, due2
			if !w.Deadline.IsZero() && (!ok || due.After(w.Deadline)) {
				// A deadline is always delivered, whatever the calendar says.
				due, ok = w.Deadline, true
			}
		}
	}
	if !ok {
		if o != nil {
			o.finish(nil)
		}
		return
	}
	e := newEntry(w.ID, s.internKind(w.Kind), w.Every, w.Deadline, spec)
	e.due = due.UnixNano()
	e.prog.polls = clamp32(w.Polls)
	e.prog.errors, e.prog.consecutive = clamp32(w.Errors), clamp32(w.ConsecutiveErrors)
	e.observer = o
	s.mu.Lock()
	if _, dup := s.byID[w.ID]; dup {
		s.mu.Unlock()
		if o != nil {
			o.finish(nil)
		}
		return
	}
	s.byID[w.ID] = e
	heap.Push(&s.h, e)
	s.mu.Unlock()
	s.signal()
}

// internKind returns the registry's own spelling of k: a constant, not a
// copy on the heap per watch for the collector to visit.
func (s *Scheduler) internKind(k vigil.Kind) vigil.Kind {
	if s.cfg.Watchers != nil {
		if wt, ok := s.cfg.Watchers.Lookup(k); ok {
			return wt.Kind()
		}
	}
	return k
}

// idArena copies the ids of primed watches into shared strings of
// idArenaSize ids each, so that a million primed watches hold a thousand
// id strings rather than a million: the garbage collector, which the
// runtime runs at least every two minutes, marks far fewer objects (with
// constant kinds, a quarter less time per collection at 100 000 watches:
// BenchmarkGCWithPendingWatches). A chunk lives while
// any of its ids does: at most idArenaSize × 26 bytes kept for one watch.
type idArena struct {
	b strings.Builder
	n int
}

const idArenaSize = 1024

func (a *idArena) add(id string) string {
	if a.n == idArenaSize {
		a.b, a.n = strings.Builder{}, 0
	}
	if a.b.Cap() == 0 {
		a.b.Grow(idArenaSize * 26) // a ULID is 26 bytes
	}
	start := a.b.Len()
	a.b.WriteString(id)
	a.n++
	// A Builder never changes bytes it has written: the substring may
	// share them, even after a later write moves the buffer.
	return a.b.String()[start:]
}

func newEntry(id string, kind vigil.Kind, every time.Duration, deadline time.Time, spec vigil.KindSpec) *entry {
	e := &entry{id: id, kind: kind, every: every, index: -1}
	if !deadline.IsZero() {
		e.deadline = deadline.UnixNano()
	}
	if spec.Instant {
		e.class |= classInstant
	}
	return e
}

// Remove forgets a watch that was cancelled or closed. A probe in flight for
// it finishes, but its settlement loses the store's compare-and-set.
func (s *Scheduler) Remove(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.byID[id]
	if !ok {
		return
	}
	delete(s.byID, id)
	if e.flags&flagInflight != 0 {
		e.flags |= flagRemoved
		return
	}
	if e.index >= 0 {
		heap.Remove(&s.h, int(e.index))
	}
}

// Poke makes a pending watch due now, for event-driven watchers (a file
// system notification) that learn of a change before the next interval.
// A watch already in flight is left alone: its next probe comes soon
// anyway. Poke is cheap and safe to call from any goroutine.
func (s *Scheduler) Poke(id string) {
	now := s.now().UnixNano()
	s.mu.Lock()
	e, ok := s.byID[id]
	if ok && e.flags&flagInflight != 0 {
		// Its probe may have looked before the event: due again when it ends.
		e.flags |= flagPoked
	}
	if !ok || e.flags&flagInflight != 0 || e.due <= now {
		s.mu.Unlock()
		return
	}
	e.due = now
	heap.Fix(&s.h, int(e.index))
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
	at := t.UnixNano()
	switch {
	case s.pruneE == nil:
		s.pruneE = &entry{id: "\x00prune", class: classPrune, due: at, index: -1}
		heap.Push(&s.h, s.pruneE)
	case s.pruneE.flags&flagInflight != 0:
		// The running prune re-arms itself from what it finds.
		return false
	case at < s.pruneE.due:
		s.pruneE.due = at
		heap.Fix(&s.h, int(s.pruneE.index))
	default:
		return false
	}
	return true
}

// job is one unit of work for a probe worker: a single probing watch, a
// batch of instant watches, or the retention entry.
type job struct {
	entries []*entry
}

// popDueLocked takes the entries due at or before now off the heap, until
// it has made maxJobs jobs, and groups them into jobs.
func (s *Scheduler) popDueLocked(now time.Time, maxJobs int) []job {
	var jobs []job
	var batch []*entry
	cut := now.UnixNano()
	for len(s.h) > 0 && s.h[0].due <= cut && len(jobs) < maxJobs {
		e := heap.Pop(&s.h).(*entry)
		e.flags |= flagInflight
		if e.class&classInstant != 0 {
			batch = append(batch, e)
			if len(batch) == s.cfg.BatchSize {
				jobs = append(jobs, job{batch})
				batch = nil
			}
			continue
		}
		jobs = append(jobs, job{[]*entry{e}})
	}
	if len(batch) > 0 {
		jobs = append(jobs, job{batch})
	}
	return jobs
}

// Tick runs everything due at now to completion, using up to Workers probes
// at once, and returns how many watches it evaluated. Tests drive the
// scheduler with Tick and a fake clock; the daemon uses Run.
func (s *Scheduler) Tick(ctx context.Context, now time.Time) int {
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
		g.Go(func() error { s.runJob(ctx, j, now, false); return nil })
	}
	_ = g.Wait()
	return n
}

// Run is the scheduler loop: it blocks until ctx is done, then waits for
// the probe workers to return. In-flight probes see ctx cancelled and write
// nothing.
func (s *Scheduler) Run(ctx context.Context) error {
	jobs := make(chan job)
	var wg sync.WaitGroup
	for range s.cfg.Workers {
		wg.Go(func() {
			for j := range jobs {
				s.runJob(ctx, j, s.now(), true)
				s.signal()
			}
		})
	}
	defer func() {
		close(jobs)
		wg.Wait()
		s.unpark()
	}()

	timer := time.NewTimer(time.Hour)
	timer.Stop()
	defer timer.Stop()
	// ready holds popped jobs not yet taken by a worker. It is topped up to
	// a few jobs per worker, not filled with everything due: a storm of a
	// million due watches starts settling at once instead of after they
	// have all been popped, and the heap keeps what cannot run yet.
	var ready []job
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
func (s *Scheduler) runJob(ctx context.Context, j job, now time.Time, fair bool) {
	switch {
	case j.entries[0].class&classPrune != 0:
		s.runPrune(ctx, j.entries[0], now)
	case j.entries[0].class&classInstant != 0:
		s.runInstant(ctx, j.entries, now)
	case fair:
		s.runFair(ctx, j.entries[0], now)
	default:
		s.runProbe(ctx, j.entries[0], now, false, "")
	}
}

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
func (s *Scheduler) runFair(ctx context.Context, e *entry, now time.Time) {
	held := ""
	for {
		held = s.runProbe(ctx, e, now, true, held)
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
func (s *Scheduler) takeTurn(recipient string, e *entry) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.busy == nil {
		s.busy, s.parked = map[string]int{}, map[string][]*entry{}
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
func (s *Scheduler) nextTurn(recipient string, more bool) *entry {
	s.mu.Lock()
	defer s.mu.Unlock()
	q := s.parked[recipient]
	for more && len(q) > 0 {
		e := q[0]
		q[0] = nil
		q = q[1:]
		if e.flags&flagRemoved != 0 {
			e.flags &^= flagInflight
			continue
		}
		// The probe it waited for is about to run: a poke meanwhile is
		// answered by it.
		e.flags &^= flagPoked
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
			e.flags &^= flagInflight | flagPoked
			if e.flags&flagRemoved == 0 {
				heap.Push(&s.h, e)
			}
		}
		delete(s.parked, r)
	}
	clear(s.busy)
}

// reschedule puts e back on the heap at next with its new progress, unless
// it was removed while in flight.
func (s *Scheduler) reschedule(e *entry, next time.Time, p progress) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e.flags &^= flagInflight
	if e.flags&flagRemoved != 0 {
		return
	}
	e.prog = p
	e.due = next.UnixNano()
	if e.flags&flagPoked != 0 {
		e.flags &^= flagPoked
		e.due = min(e.due, s.now().UnixNano())
	}
	heap.Push(&s.h, e)
}

// drop forgets e after it settled or vanished.
func (s *Scheduler) drop(e *entry) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e.flags &^= flagInflight
	if cur, ok := s.byID[e.id]; ok && cur == e {
		delete(s.byID, e.id)
	}
}

// settlement is one decided outcome on its way to the store.
type settlement struct {
	e     *entry
	w     *vigil.Watch
	out   *vigil.Outcome
	polls int
	quiet bool
}

// runProbe probes e's watch and acts on the answer. With fair, it first
// takes a turn of the watch's recipient unless it holds one already
// (held): it returns the recipient whose turn it holds, "" when it holds
// none (it was parked).
func (s *Scheduler) runProbe(ctx context.Context, e *entry, now time.Time, fair bool, held string) (holds string) {
	holds = held
	log := s.log.With("watch_id", e.id)
	w, err := s.cfg.Store.WatchGet(ctx, e.id)
	if errors.Is(err, vigil.ErrNotFound) {
		s.drop(e)
		e.observer.finish(nil)
		return
	}
	if err != nil {
		if ctx.Err() == nil {
			log.Error("reading watch before probe", "err", err)
		}
		s.reschedule(e, now.Add(max(e.every, time.Second)), e.prog)
		return
	}
	if w.State != vigil.StatePending {
		s.drop(e)
		e.observer.finish(w)
		return
	}
	final := e.deadline != 0 && now.UnixNano() >= e.deadline
	if fair && holds == "" {
		if !s.takeTurn(w.Recipient, e) {
			return ""
		}
		holds = w.Recipient
	}
	wt, ok := s.cfg.Watchers.Lookup(w.Kind)
	if !ok && !final && w.Unreadable == "" {
		// No watcher for its kind in this build: untouched until its
		// deadline, if it has one.
		if e.deadline == 0 {
			s.drop(e)
		} else {
			s.reschedule(e, time.Unix(0, e.deadline), e.prog)
		}
		e.observer.finish(w)
		return
	}
	if s.cfg.CheckFunc != nil {
		if err := s.cfg.CheckFunc(ctx, w); err != nil {
			s.stop(ctx, e, w, err, now)
			return
		}
	}
	if w.Unreadable != "" {
		s.commit(ctx, []settlement{{e: e, w: w, out: unreadable(w, now), polls: w.Polls}}, now)
		return
	}
	if !ok {
		// Its deadline passed and no watcher ever looked: it expires,
		// saying so, as every deadline is delivered.
		out := &vigil.Outcome{State: vigil.StateExpired, Reason: ReasonNoWatcher, Observation: w.LastObservation}
		s.commit(ctx, []settlement{{e: e, w: w, out: out, polls: w.Polls}}, now)
		return
	}
	pctx, cancel := context.WithTimeout(ctx, s.cfg.ProbeTimeout)
	obs, err := watcher.Run(pctx, wt, watcher.Probe{WatchID: w.ID, Kind: w.Kind, Predicate: w.Predicate, Now: now, Created: w.CreatedAt,
		Last: w.LastObservation, ChainDepth: w.ChainDepth, Final: final})
	cancel()
	if ctx.Err() != nil {
		// Shutting down: the probe was cut short, its answer means nothing.
		s.reschedule(e, time.Unix(0, e.due), e.prog)
		return
	}
	if err != nil {
		log.Error("probe routed to the wrong watcher", "err", err)
		obs = wrongKind(err, now)
	}
	if m := s.cfg.Metrics; m != nil {
		m.Probed(w.Kind, obs.Verdict, now.Sub(time.Unix(0, e.due)), s.now().Sub(now))
	}
	if f := s.cfg.ProbedFunc; f != nil {
		// Once what the probe decided is written.
		defer f(w, &obs)
	}
	prog := e.prog.unpack().Advance(obs.Verdict, now)
	w.Errors, w.ConsecutiveErrors, w.CheckedAt = prog.Errors, prog.Consecutive, now
	d := vigil.Decide(w, &obs, prog, now, final)
	if d.Settle {
		out := &vigil.Outcome{State: d.State, Reason: d.Reason, Held: d.Held, Attention: d.Attention, Observation: &obs}
		s.commit(ctx, []settlement{{e: e, w: w, out: out, polls: prog.Polls}}, now)
		return
	}
	if s.record(ctx, wt, e, w, &obs, prog.Polls, now) {
		return
	}
	if deliver.Progress(w.Deliver) {
		// Ambient progress: published, never stored, never mailed.
		text := obs.Summary
		if text == "" {
			text = obs.Reason
		}
		s.cfg.EventFunc(vigil.Event{Type: vigil.EventWatchProgress, WatchID: w.ID, Recipient: w.Recipient,
			State: w.State, Polls: prog.Polls, Text: text, At: now})
	}
	if e.observer != nil {
		w.Polls = prog.Polls
		e.observer.finish(w)
		e.observer = nil
	}
	if next, due, cal := calendarDue(wt, w.Predicate, w.CreatedAt, laterOf(now, s.now())); cal {
		// A calendar counts from when the probe ended: fires that came due
		// while it ran are skipped, never queued.
		if !due && e.deadline == 0 {
			s.drop(e)
			return
		}
		if e.deadline != 0 && (!due || next.UnixNano() > e.deadline) {
			next = time.Unix(0, e.deadline)
		}
		s.reschedule(e, next, pack(prog))
		return
	}
	deadline := time.Time{}
	if e.deadline != 0 {
		deadline = time.Unix(0, e.deadline)
	}
	every := e.every
	if every <= 0 {
		// Kinds that are not probed on an interval only wake at the deadline.
		every = max(deadline.Sub(now), time.Second)
	}
	next := vigil.NextDue(time.Unix(0, e.due), now, every, prog.Consecutive, s.cfg.Limits.BackoffCap, deadline)
	s.reschedule(e, next, pack(prog))
	return
}

// ReasonUnreadable is the outcome reason of a watch whose stored row
// cannot be read (vigil.Watch.Unreadable).
const ReasonUnreadable = "unreadable"

// unreadable is the outcome of a watch whose stored row cannot be read in
// full: it is never probed (what it asks may be what cannot be read), and
// settles errored at once, saying why, instead of failing every turn.
func unreadable(w *vigil.Watch, now time.Time) *vigil.Outcome {
	obs := &vigil.Observation{Verdict: vigil.VerdictUnavailable, At: now, Permanent: true,
		Reason: "its stored row cannot be read: " + w.Unreadable}
	return &vigil.Outcome{State: vigil.StateErrored, Reason: ReasonUnreadable, Attention: true, Observation: obs}
}

// wrongKind is the observation of a probe routed to the wrong watcher
// (watcher.ErrWrongKind): a bug that no later probe will fix, so it is
// permanent and the watch settles errored at once, saying why.
func wrongKind(err error, now time.Time) vigil.Observation {
	return vigil.Observation{Verdict: vigil.VerdictUnavailable, At: now, Reason: "internal error: " + err.Error(), Permanent: true}
}

// record writes what an unsettled observation changed, and reports true if
// the watch turned out to be settled already (it was dropped). A pending
// watch writes only when its observation differs from the last one. A
// standing watch's change (a satisfied answer) is written with its
// "changed" message in one transaction, the new observation becoming the
// baseline; its unavailable answers are never written, so the baseline is
// always the last real observation.
func (s *Scheduler) record(ctx context.Context, wt watcher.Watcher, e *entry, w *vigil.Watch, obs *vigil.Observation, polls int, now time.Time) (gone bool) {
	p := vigil.WatchObserveParams{ID: w.ID, Observation: obs, Polls: polls, Errors: w.Errors, ConsecutiveErrors: w.ConsecutiveErrors, CheckedAt: w.CheckedAt}
	switch {
	case w.Standing && obs.Verdict == vigil.VerdictUnavailable:
		return false
	case w.Standing && obs.Verdict == vigil.VerdictSatisfied:
		data, _ := json.Marshal(messageData{Kind: w.Kind, State: w.State, Note: w.Note, Labels: w.Labels, Predicate: vigil.RedactJSON(w.Predicate), Observation: obs})
		typ, text := standingMessage(wt, w, obs)
		p.Message = &vigil.Message{ID: s.cfg.NewIDFunc(), Recipient: w.Recipient, WatchID: w.ID, Type: typ,
			Text: text, Data: data, CreatedAt: now}
	case obs.Same(w.LastObservation):
		return false
	}
	ok, err := s.cfg.Store.WatchObserve(ctx, p)
	switch {
	case err != nil:
		if ctx.Err() == nil {
			s.log.Error("recording observation", "watch_id", w.ID, "err", err)
		}
		return false
	case !ok:
		s.drop(e)
		e.observer.finish(nil)
		return true
	}
	w.LastObservation = obs
	s.cfg.EventFunc(vigil.Event{Type: vigil.EventWatchObserved, WatchID: w.ID, Recipient: w.Recipient,
		State: w.State, Polls: polls, Text: obs.Summary, At: now})
	if m := p.Message; m != nil {
		s.cfg.EventFunc(vigil.Event{Type: vigil.EventMessage, WatchID: w.ID, Recipient: w.Recipient, State: w.State, Text: m.Text, Seq: m.Seq, At: now})
	}
	return false
}

// stop handles a CheckFunc refusal: a StopError cancels the watch silently;
// any other error is a failure to check, retried at the next interval.
func (s *Scheduler) stop(ctx context.Context, e *entry, w *vigil.Watch, err error, now time.Time) {
	var se *StopError
	if !errors.As(err, &se) {
		if ctx.Err() == nil {
			s.log.Error("checking watch before probe", "watch_id", w.ID, "err", err)
		}
		s.reschedule(e, now.Add(max(e.every, time.Second)), e.prog)
		return
	}
	out := &vigil.Outcome{State: vigil.StateCancelled, Reason: se.Reason, Sentence: se.Sentence, Observation: w.LastObservation}
	p := e.prog.unpack()
	_, won, cerr := s.cfg.Store.WatchCancel(ctx, vigil.WatchCancelParams{ID: w.ID, Outcome: out, SettledAt: now,
		CheckedAt: p.At, Polls: p.Polls, Errors: p.Errors, ConsecutiveErrors: p.Consecutive})
	if cerr != nil {
		if ctx.Err() == nil {
			s.log.Error("cancelling watch", "watch_id", w.ID, "err", cerr)
		}
		s.reschedule(e, now.Add(max(e.every, time.Second)), e.prog)
		return
	}
	s.drop(e)
	e.observer.finish(nil)
	if won {
		s.cfg.EventFunc(vigil.Event{Type: vigil.EventWatchSettled, WatchID: w.ID, Recipient: w.Recipient, State: vigil.StateCancelled,
			Text: se.Sentence, Done: true, At: now})
	}
}

// runInstant settles a batch of watches answered by the clock alone, reading
// their rows in one query and committing in one transaction.
func (s *Scheduler) runInstant(ctx context.Context, es []*entry, now time.Time) {
	// In id order: ids are made in time order, so the batch's rows and
	// index entries are visited in the order they were written, page after
	// page, rather than at random.
	slices.SortFunc(es, func(a, b *entry) int { return strings.Compare(a.id, b.id) })
	ids := make([]string, len(es))
	for i, e := range es {
		ids[i] = e.id
	}
	ws, err := s.cfg.Store.WatchGetMany(ctx, ids)
	if err != nil {
		if ctx.Err() == nil {
			s.log.Error("reading instant watches", "err", err, "count", len(ids))
		}
		for _, e := range es {
			s.reschedule(e, now.Add(time.Second), e.prog)
		}
		return
	}
	byID := make(map[string]*vigil.Watch, len(ws))
	for _, w := range ws {
		byID[w.ID] = w
	}
	var settle []settlement
	var probed []probedObs
	defer func() {
		// Once what the probes decided is written.
		for _, p := range probed {
			s.cfg.ProbedFunc(p.w, &p.obs)
		}
	}()
	for _, e := range es {
		w := byID[e.id]
		if w == nil || w.State != vigil.StatePending {
			s.drop(e)
			e.observer.finish(w)
			continue
		}
		wt, ok := s.cfg.Watchers.Lookup(w.Kind)
		if !ok {
			s.drop(e)
			continue
		}
		if s.cfg.CheckFunc != nil {
			if err := s.cfg.CheckFunc(ctx, w); err != nil {
				s.stop(ctx, e, w, err, now)
				continue
			}
		}
		if w.Unreadable != "" {
			settle = append(settle, settlement{e: e, w: w, out: unreadable(w, now), polls: w.Polls})
			continue
		}
		obs, err := watcher.Run(ctx, wt, watcher.Probe{WatchID: w.ID, Kind: w.Kind, Predicate: w.Predicate, Now: now})
		if err != nil {
			s.log.Error("probe routed to the wrong watcher", "watch_id", w.ID, "err", err)
			obs = wrongKind(err, now)
		}
		if s.cfg.ProbedFunc != nil {
			probed = append(probed, probedObs{w, obs})
		}
		prog := e.prog.unpack().Advance(obs.Verdict, now)
		w.Errors, w.ConsecutiveErrors, w.CheckedAt = prog.Errors, prog.Consecutive, now
		final := e.deadline != 0 && now.UnixNano() >= e.deadline
		d := vigil.Decide(w, &obs, prog, now, final)
		if !d.Settle {
			next := now.Add(time.Second)
			if e.deadline != 0 && e.deadline < next.UnixNano() {
				next = time.Unix(0, e.deadline)
			}
			s.reschedule(e, next, pack(prog))
			continue
		}
		out := &vigil.Outcome{State: d.State, Reason: d.Reason, Held: d.Held, Attention: d.Attention, Observation: &obs}
		settle = append(settle, settlement{e: e, w: w, out: out, polls: prog.Polls})
	}
	if len(settle) > 0 {
		s.commit(ctx, settle, now)
	}
}

// probedObs is one probe of a batch, for Config.ProbedFunc.
type probedObs struct {
	w   *vigil.Watch
	obs vigil.Observation
}

// messageData is the machine-readable part of an outcome message.
type messageData struct {
	Kind    vigil.Kind     `json:"kind"`
	State   vigil.State    `json:"state"`
	Outcome *vigil.Outcome `json:"outcome,omitempty"`
	// Observation is a standing watch's change.
	Observation *vigil.Observation `json:"observation,omitempty"`
	Note        string             `json:"note,omitempty"`
	Labels      map[string]string  `json:"labels,omitempty"`
	Predicate   json.RawMessage    `json:"predicate"`
}

// OutcomeMessage builds the mailbox message for a settled watch.
func OutcomeMessage(id string, w *vigil.Watch, out *vigil.Outcome, now time.Time) *vigil.Message {
	data, _ := json.Marshal(messageData{Kind: w.Kind, State: out.State, Outcome: out, Note: w.Note, Labels: w.Labels, Predicate: vigil.RedactJSON(w.Predicate)})
	return &vigil.Message{ID: id, Recipient: w.Recipient, WatchID: w.ID, Type: vigil.MessageTypeFor(out.State),
		Text: out.Sentence, Data: data, CreatedAt: now}
}

// commit persists settlements in one transaction, then tells the world.
// It reports which settlements won, or the store's error (each entry is
// then rescheduled, unless it was removed).
func (s *Scheduler) commit(ctx context.Context, ss []settlement, now time.Time) ([]bool, error) {
	ps := make([]vigil.WatchSettleParams, len(ss))
	msgs := make([]*vigil.Message, len(ss))
	for i := range ss {
		st := &ss[i]
		st.out.Sentence = wording.Outcome(st.w, st.out)
		// A registration still waiting for this first observation gets the
		// answer itself: nothing is mailed (answered at creation).
		st.quiet = st.e.observer.claim()
		p := vigil.WatchSettleParams{ID: st.w.ID, State: st.out.State, Outcome: st.out, SettledAt: now, Polls: st.polls,
			Errors: st.w.Errors, ConsecutiveErrors: st.w.ConsecutiveErrors, CheckedAt: st.w.CheckedAt, AnsweredAtCreation: st.quiet}
		if !st.quiet {
			msgs[i] = OutcomeMessage(s.cfg.NewIDFunc(), st.w, st.out, now)
			p.Message = msgs[i]
		}
		ps[i] = p
	}
	won, err := s.cfg.Store.WatchSettle(ctx, ps)
	if err != nil {
		if ctx.Err() == nil {
			s.log.Error("settling watches", "err", err, "count", len(ss))
		}
		for _, st := range ss {
			st.e.observer.finish(nil)
			s.reschedule(st.e, now.Add(max(st.e.every, time.Second)), st.e.prog)
		}
		return nil, err
	}
	var anyWon bool
	committed := s.now()
	for i, st := range ss {
		if won[i] && s.cfg.Metrics != nil {
			s.cfg.Metrics.Settled(st.w.Kind, st.out.State, committed.Sub(time.Unix(0, st.e.due)))
		}
		s.drop(st.e)
		if !won[i] {
			st.e.observer.finish(nil)
			continue
		}
		anyWon = true
		w := st.w
		w.State, w.Outcome, w.SettledAt, w.Polls, w.AnsweredAtCreation = st.out.State, st.out, now, st.polls, st.quiet
		w.LastObservation = st.out.Observation
		st.e.observer.finish(w)
		if s.cfg.DeliverFunc != nil {
			s.cfg.DeliverFunc(w, msgs[i])
		}
		s.cfg.EventFunc(vigil.Event{Type: vigil.EventWatchSettled, WatchID: w.ID, Recipient: w.Recipient, State: w.State,
			Polls: w.Polls, Text: st.out.Sentence, Done: true, At: now})
		if m := msgs[i]; m != nil {
			s.cfg.EventFunc(vigil.Event{Type: vigil.EventMessage, WatchID: w.ID, Recipient: w.Recipient, State: w.State, Text: m.Text, Seq: m.Seq, At: now})
		}
	}
	if anyWon {
		s.ArmPrune(now.Add(min(s.cfg.Limits.RetentionWatches, s.cfg.Limits.RetentionMessages)))
	}
	return won, nil
}

// runPrune deletes what is past retention and re-arms at the next instant
// anything becomes prunable; with nothing left it disarms.
func (s *Scheduler) runPrune(ctx context.Context, e *entry, now time.Time) {
	l := s.cfg.Limits
	res, err := s.cfg.Store.Prune(ctx, vigil.PruneParams{
		WatchesBefore:     now.Add(-l.RetentionWatches),
		MessagesBefore:    now.Add(-l.RetentionMessages),
		IdempotencyBefore: now.Add(-l.IdempotencyTTL),
	})
	var next time.Time
	if err != nil {
		if ctx.Err() == nil {
			s.log.Error("pruning", "err", err)
		}
		next = now.Add(time.Hour)
	} else {
		if res.Watches+res.Messages+res.Keys > 0 {
			s.log.Info("pruned", "watches", res.Watches, "messages", res.Messages, "idempotency_keys", res.Keys)
		}
		for _, t := range []time.Time{
			addIf(res.OldestSettled, l.RetentionWatches),
			addIf(res.OldestMessage, l.RetentionMessages),
			addIf(res.OldestKey, l.IdempotencyTTL),
		} {
			if !t.IsZero() && (next.IsZero() || t.Before(next)) {
				next = t
			}
		}
	}
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

func addIf(t time.Time, d time.Duration) time.Time {
	if t.IsZero() {
		return t
	}
	return t.Add(d)
}

// Prime loads every pending watch from the store and arms it: each probing
// watch at a random point inside its own interval (so a restart does not
// probe everything at once), each instant watch at its instant. Watches whose
// deadline passed while the daemon was down are expired and mailed at once;
// if the store cannot settle them, Prime fails (the daemon does not become
// ready) and nothing of them is scheduled. Rows of kinds this build has no
// watcher for are left untouched until their deadline, when they expire
// with reason ReasonNoWatcher; those without a deadline are left untouched.
func (s *Scheduler) Prime(ctx context.Context) error {
	now := s.now()
	rows, err := s.cfg.Store.WatchListPending(ctx)
	if err != nil {
		return err
	}
	var overdue []string
	unknown := map[vigil.Kind]int{}
	entries := make([]*entry, 0, len(rows))
	var ids idArena
	var calendar []vigil.ScheduleEntry
	for _, r := range rows {
		if r.Unreadable != "" {
			// Its schedule cannot be read: its turn comes at once, and
			// settles it errored (see runProbe).
			s.log.Warn("a pending watch cannot be read; it settles errored", "watch_id", r.ID, "reason", r.Unreadable)
			e := newEntry(ids.add(r.ID), r.Kind, 0, time.Time{}, vigil.KindSpec{})
			e.due = now.UnixNano()
			entries = append(entries, e)
			continue
		}
		wt, ok := s.cfg.Watchers.Lookup(r.Kind)
		if !ok {
			unknown[r.Kind]++
			if !r.Deadline.IsZero() {
				// Armed at its deadline only, when it expires (at once
				// if that passed already).
				e := newEntry(ids.add(r.ID), r.Kind, r.Every, r.Deadline, vigil.KindSpec{})
				e.due = r.Deadline.UnixNano()
				e.prog.polls = clamp32(r.Polls)
				entries = append(entries, e)
			}
			continue
		}
		spec, _ := vigil.SpecOf(r.Kind)
		if !r.Deadline.IsZero() && !r.Deadline.After(now) {
			overdue = append(overdue, r.ID)
			continue
		}
		if _, cal := wt.(NextDuer); cal {
			calendar = append(calendar, r)
			continue
		}
		due, ok := firstDue(spec, r.Every, r.StartAt, r.Deadline, now)
		if !ok {
			continue
		}
		if r.Every > 0 && !due.After(now) {
			due = now.Add(s.cfg.JitterFunc(r.Every))
			if !r.Deadline.IsZero() && due.After(r.Deadline) {
				due = r.Deadline
			}
		}
		e := newEntry(ids.add(r.ID), wt.Kind(), r.Every, r.Deadline, spec)
		e.due = due.UnixNano()
		e.prog.polls = clamp32(r.Polls)
		e.prog.errors, e.prog.consecutive = clamp32(r.Errors), clamp32(r.ConsecutiveErrors)
		entries = append(entries, e)
	}
	for k, n := range unknown {
		s.log.Warn("pending watches of a kind this build cannot watch are left untouched until their deadline, when they expire", "kind", k, "count", n)
	}
	cal, err := s.primeCalendar(ctx, calendar, now)
	if err != nil {
		return err
	}
	entries = append(entries, cal...)
	s.mu.Lock()
	for _, e := range entries {
		if _, dup := s.byID[e.id]; dup {
			continue
		}
		s.byID[e.id] = e
		e.index = int32(len(s.h))
		s.h = append(s.h, e)
	}
	heap.Init(&s.h)
	s.mu.Unlock()

	// The retention entry exists, in flight, before the overdue watches
	// settle: the prune their settlement arms finds it running (it re-arms
	// from what it finds) instead of making a second one.
	pe := &entry{id: "\x00prune", class: classPrune, flags: flagInflight, index: -1}
	s.mu.Lock()
	s.pruneE = pe
	s.mu.Unlock()
	for len(overdue) > 0 {
		n := min(len(overdue), s.cfg.BatchSize)
		if err := s.expireOverdue(ctx, overdue[:n], now); err != nil {
			return err
		}
		overdue = overdue[n:]
	}
	s.runPrune(ctx, pe, now)
	s.signal()
	return nil
}

func (s *Scheduler) expireOverdue(ctx context.Context, ids []string, now time.Time) error {
	ws, err := s.cfg.Store.WatchGetMany(ctx, ids)
	if err != nil {
		return err
	}
	ss := make([]settlement, 0, len(ws))
	for _, w := range ws {
		if w.State != vigil.StatePending {
			continue
		}
		out := &vigil.Outcome{State: vigil.StateExpired, Reason: "down_past_deadline", Observation: w.LastObservation}
		// A stand-in that is never put on the heap, even when the store
		// fails: the watch is not held here, and a failed expiry fails Prime.
		ss = append(ss, settlement{e: &entry{id: w.ID, index: -1, flags: flagInflight | flagRemoved}, w: w, out: out, polls: w.Polls})
	}
	if len(ss) == 0 {
		return nil
	}
	if _, err := s.commit(ctx, ss, now); err != nil {
		return fmt.Errorf("scheduler: expiring the watches past their deadline: %w", err)
	}
	return nil
}
