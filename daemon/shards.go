package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/vigil-run/vigil"
	"github.com/vigil-run/vigil/deliver"
	"github.com/vigil-run/vigil/engine"
	"github.com/vigil-run/vigil/internal/fifo"
	"github.com/vigil-run/vigil/internal/lease"
	"github.com/vigil-run/vigil/scheduler"
	"github.com/vigil-run/vigil/store/postgres"
	"github.com/vigil-run/vigil/watcher"
)

// Bounds of the replica's wake-ups.
const (
	// wakeQueue bounds the watch ids heard of and not yet looked at; past
	// it they are dropped, and the next repair scan finds them.
	wakeQueue = 8192
	// wakeBatch is how many of them one read looks at.
	wakeBatch = 512
	// repairMargin is how far before the last scan the next one looks
	// back (by the database's clock) when the heartbeat could not say
	// where the oldest transaction that had written then began
	// (postgres.Peers.Horizon): a registration's row is stamped when it
	// is inserted but seen only once its transaction commits.
	repairMargin = 30 * time.Second
	// repairSlack is how far before that horizon the next scan looks
	// back, for a database clock stepped back meanwhile.
	repairSlack = 2 * time.Second
	// holdMax bounds how long a replica that stops holds its shards for
	// the delivery attempts in flight (shards.run): their grace, then the
	// write of their final receipts (at most 5 s each, see deliver's
	// finalWrite). An attempt that ignores its context is not waited for
	// beyond it: the replica leaves, and the next holder reads it back as
	// unknown. The manager goes on renewing the leases meanwhile.
	holdMax = deliveryGrace + 5*time.Second
)

// shards is what a replica on PostgreSQL runs beside the engine: the lease
// manager, which holds its share of the shards, and the listener, which
// hears of registrations, cancels and checks made on any replica and hands
// those of the shards it holds to the scheduler. On SQLite there is none.
type shards struct {
	pg    *postgres.Store
	mgr   *lease.Manager
	eng   *engine.Engine
	sched *scheduler.Scheduler
	disp  *deliver.Dispatcher
	// fs is the file system notifier: the folder watches of a shard
	// taken are woken to register with it, and those of a shard lost
	// are forgotten by it.
	fs  *fsWake
	log *slog.Logger
	// ids are the watches heard of (registered or cancelled), for the
	// holder to arm or forget.
	ids chan heardWatch
	// needsRow says whether a kind's first due depends on its predicate
	// (a calendar): such a watch is read back before it is armed.
	needsRow func(vigil.Kind) bool
	// gained are shards taken and not yet armed: arming them (reading
	// their watches, resuming their receipts) runs beside the lease
	// manager, whose renewals must not wait for it.
	gained chan []int
	// since is where the next repair scan starts (repairSince; the zero
	// time: no scan yet). Only the manager's goroutine touches it.
	since time.Time
	// again are the watches the last repair could not settle the fate
	// of, looked at by the next one: those it could not read, and those
	// a fenced write refused that were still scheduled (the write had not
	// returned; the engine drops them when it does). Only the manager's
	// goroutine touches it.
	again []string
	// refused is the store's Refused (a test sets its own).
	refused func() []string
	// stopping is set once the engine has stopped, while the manager
	// still holds the shards for the deliveries in flight (run).
	stopping atomic.Bool
	// cancelled holds the last cancelledCap watches heard cancelled
	// (take's only; made at its first call).
	cancelled *fifo.Map[string, struct{}]
	// keys compares this replica's signing keys with the live replicas'
	// and records them (checkKeys), for rejoin; nil in tests of replicas
	// that record none.
	keys func(ctx context.Context) error
	// heardAt is when the last event was heard (unix ns; 0: none yet).
	heardAt atomic.Int64
	// owedSince, when not 0, is the instant (unix ns) from which owing
	// looks for outcomes settled on other replicas in the shards held here
	// and not handed to a channel yet (deliverElsewhere): their word was
	// lost (a reconnection) or not queued (ids was full). owedKick wakes
	// owing.
	owedSince atomic.Int64
	owedKick  chan struct{}
	// deaf drops every event heard (a test's lost notifications).
	deaf atomic.Bool
	// primeFor bounds arm's first attempt at priming shards taken (the
	// lease: see arm); primeFn and holds are prime and the store's
	// HoldsShard (a test sets its own).
	primeFor time.Duration
	primeFn  func(ctx context.Context, shards []int) error
	holds    func(shard int) bool
}

func newShards(cfg Config, pg *postgres.Store, replica string, eng *engine.Engine, sched *scheduler.Scheduler,
	disp *deliver.Dispatcher, fs *fsWake, needsRow func(vigil.Kind) bool, keys func(context.Context) error, log *slog.Logger) (*shards, error) {
	s := &shards{pg: pg, eng: eng, sched: sched, disp: disp, fs: fs, log: log.With("component", "shards"), ids: make(chan heardWatch, wakeQueue),
		owedKick: make(chan struct{}, 1), gained: make(chan []int, postgres.Shards), needsRow: needsRow, refused: pg.Refused, keys: keys}
	l, r := cfg.leases()
	s.primeFor, s.primeFn, s.holds = l, s.prime, pg.HoldsShard
	lc := lease.Config{Store: pg, Replica: replica, Shards: postgres.Shards, Lease: l, Renew: r,
		Gain: s.gain, Lose: s.lose, Drain: s.drain, Since: s.repairSince, Renewed: s.repair, Logger: log}
	if keys != nil {
		lc.Rejoin = s.rejoin
	}
	mgr, err := lease.New(lc)
	if err != nil {
		return nil, err
	}
	s.mgr = mgr
	return s, nil
}

// held returns the shards this replica holds.
func (s *shards) held() []int { return s.mgr.Held() }

// run runs the manager and what arms the watches heard of until ctx ends
// (the daemon's one listener, pgEvents, hands heard its events). The
// manager goes on renewing the leases held, and with them the fence, until
// hold is closed: the dispatcher has returned, the attempts in flight when
// ctx ended having recorded their results, which the fence refuses once
// it lets go (a delivered webhook read back as unknown by the next
// holder). It waits holdMax at most, then lets go of every shard on its
// way out (Lose, then Leave: the other replicas take them at once).
// Meanwhile it takes no shard (gain refuses: nothing would arm it) and
// its repair scan arms nothing: the engine has stopped. A manager that
// ends by itself (rejoin refused: keys that differ) holds nothing, and
// run returns its error at once: the daemon stops with it.
func (s *shards) run(ctx context.Context, hold <-chan struct{}) error {
	mctx, stop := context.WithCancel(context.WithoutCancel(ctx))
	defer stop()
	g, gctx := errgroup.WithContext(ctx)
	ended := make(chan struct{})
	g.Go(func() error { defer close(ended); return s.mgr.Run(mctx) })
	g.Go(func() error { s.wake(gctx); return nil })
	g.Go(func() error { s.arm(gctx); return nil })
	g.Go(func() error { s.owing(gctx); return nil })
	g.Go(func() error {
		defer stop()
		<-gctx.Done()
		s.stopping.Store(true)
		select {
		case <-hold:
			return nil
		case <-ended:
			return nil // it let go of every shard
		default:
		}
		s.log.Info("holding the shards until the delivery attempts in flight have recorded their results", "shards", len(s.held()), "at_most", holdMax)
		t := time.NewTimer(holdMax)
		defer t.Stop()
		select {
		case <-hold:
		case <-t.C:
			s.log.Warn("letting go of the shards with delivery attempts still in flight: the next holder reads their receipts back as unknown", "waited", holdMax)
		}
		return nil
	})
	return g.Wait()
}

// rejoin, when the lease manager finds that this replica had stopped
// counting as live for the signing keys' check (its lease lapsed: it was
// frozen, or cut off from the database; lease.Config.Rejoin), compares
// its keys with the live replicas' again, by the rule of a start
// (checkKeys), before it takes a shard again: a replica may have started
// meanwhile with other keys without comparing them with this one's.
// Keys that differ stop the daemon with the start's refusal (ErrRefused:
// vigil serve exits 2), logged here at error level; it took no shard.
func (s *shards) rejoin(ctx context.Context) error {
	err := s.keys(ctx)
	if errors.Is(err, ErrRefused) {
		s.log.Error(err.Error(), "why", "this replica's lease lapsed (it was frozen, or cut off from the database) and its signing keys, compared again, differ from a live replica's; it takes no shard and stops")
		return lease.Stop(err)
	}
	return err
}

// errStopping is gain's refusal while the replica stops.
var errStopping = fmt.Errorf("this replica is stopping: %w", lease.ErrDecline)

// gain hands the shards taken to arm. It never blocks: there are at most
// as many gains in flight as shards.
func (s *shards) gain(_ context.Context, shards []int) error {
	if s.stopping.Load() {
		// The manager releases them at once, for another replica.
		return errStopping
	}
	select {
	case s.gained <- shards:
		return nil
	default:
		return fmt.Errorf("too many shards waiting to be armed")
	}
}

// arm arms the shards taken, in turn; a shard lost meanwhile is skipped,
// and one that fails (the database) is tried again a second later while
// this replica holds it. Gain only hands the shards here, so it is this
// priming, not the lease step, that a database which stopped answering
// without a reset would hold: each attempt is given up after primeFor (a
// lease) and tried again on a new connection, the bound doubling at each
// attempt that ran out of time (up to 16 leases), so that a large shard
// whose priming takes longer than a lease is still armed.
func (s *shards) arm(ctx context.Context) {
	for {
		var shards []int
		select {
		case <-ctx.Done():
			return
		case shards = <-s.gained:
		}
		bound := s.primeFor
		for {
			shards = slices.DeleteFunc(shards, func(sh int) bool { return !s.holds(sh) })
			if len(shards) == 0 {
				break
			}
			pctx, cancel := context.WithTimeout(ctx, bound)
			err := s.primeFn(pctx, shards)
			late := pctx.Err() == context.DeadlineExceeded
			cancel()
			if err == nil || ctx.Err() != nil {
				break
			}
			if late {
				err = fmt.Errorf("ran out of time (%s): %w", bound, err)
				bound = min(2*bound, 16*s.primeFor)
			}
			s.log.Warn("arming shards taken failed; trying again", "shards", shards, "err", err)
			select {
			case <-ctx.Done():
				return
			case <-time.After(time.Second):
			}
		}
	}
}

// prime arms the pending watches of the shards taken and resumes their
// deliveries, with the rules of a start: jittered re-arm, overdue
// deadlines expired at once; sending receipts become unknown (not sent
// again unless retry_unknown), settled watches never handed to a channel
// are delivered.
func (s *shards) prime(ctx context.Context, shards []int) error {
	// Deliveries first, as at a start (deliver.Dispatcher.Resume): the
	// watches armed next may settle at once (overdue deadlines), and
	// their deliveries are new jobs. (A job of the same delivery on both
	// sides would still go out once: each attempt claims its receipt.)
	err := s.disp.ResumeWith(ctx, func(ctx context.Context, p vigil.ReceiptsResumeParams) (vigil.ReceiptsResumeResult, error) {
		return s.pg.ReceiptsResumeShards(ctx, p, shards)
	})
	if err != nil {
		return err
	}
	rows, err := s.pg.WatchListPendingShards(ctx, shards)
	if err != nil {
		return err
	}
	if err := s.eng.Adopt(ctx, rows); err != nil {
		return fmt.Errorf("arming the watches of shards %v: %w", shards, err)
	}
	// Folder watches hear of changes through the notifier, which they
	// register with when probed: wake them soon, as at a start.
	s.fs.adopt(rows, time.Now())
	s.log.Debug("shards armed", "shards", shards, "watches", len(rows))
	return nil
}

// drain, before the manager releases shards to another replica (never
// for shards lost), stops their delivery attempts from starting and waits
// (ctx bounds it: lease.DrainMax) for those in flight to record their
// results while the fence still holds the shards: a 503 is then retried
// by the next holder on its ladder, and a success is not read back as
// unknown. lose, which follows once the fence let go of them, lifts the
// stop (the dispatcher's holds check drops their attempts from then on).
func (s *shards) drain(ctx context.Context, shards []int) int {
	give := make(map[int]bool, len(shards))
	for _, sh := range shards {
		give[sh] = true
	}
	return s.disp.Drain(ctx, func(id string) bool { return give[postgres.ShardOf(id)] })
}

// lose forgets the watches of the shards lost: the fence stops their
// writes already; the dispatcher drops their deliveries at their turn
// (deliver.Config.HoldsFunc); the file system notifier stops watching
// their folders. A run's process is left to end (see watcher/run: the
// new holder settles the watch errored rather than start it again).
func (s *shards) lose(shards []int) {
	lost := map[int]bool{}
	for _, sh := range shards {
		lost[sh] = true
	}
	var ids []string
	s.sched.RemoveIf(func(id string) bool {
		if lost[postgres.ShardOf(id)] {
			ids = append(ids, id)
			return true
		}
		return false
	})
	s.fs.drop(ids)
	s.disp.Undrain()
	s.log.Debug("shards let go", "shards", shards, "watches", len(ids))
}

// heardWatch is a watch heard of: registered (w, its schedule, when the
// event carried it), cancelled (gone), or either (neither: read it).
type heardWatch struct {
	id   string
	w    *vigil.Watch
	gone bool
	// message, on a watch gone, is the id of its outcome message when
	// another replica settled it (a completion): this holder delivers it.
	message string
	// at is when it was heard (a completion's: where the look for
	// outcomes settled elsewhere starts if its delivery is not handed
	// over, see take).
	at time.Time
}

// heard takes the database's events: a watch registered or cancelled in a
// shard held here is looked at (wake), unless this replica registered it
// (the engine armed it, if this replica held its shard then; if it did
// not, the shard's rows were read when it was taken, or the repair scan
// finds it); a check asks for a probe now; a rebalance steps the manager;
// a reconnection (events may have been lost) steps it too, and its
// repair scan finds what was missed.
func (s *shards) heard(ev postgres.Event) {
	if s.deaf.Load() {
		return
	}
	now := time.Now()
	last := s.heardAt.Swap(now.UnixNano())
	switch ev.Kind {
	case postgres.EventWatch:
		if ev.WatchID == "" || !s.pg.Holds(ev.WatchID) {
			return
		}
		h := heardWatch{id: ev.WatchID, gone: ev.Gone, at: now}
		if ev.Gone {
			h.message = ev.Message
		}
		if !ev.Gone {
			// While registrations come, every step's repair scan covers
			// them (a quick one reads none): one whose word is lost is
			// found at the next step, as one missed while idle is within
			// QuickRun steps.
			s.mgr.Rescan()
		}
		if !ev.Gone && ev.Origin != "" && ev.Origin == s.pg.Origin() {
			// Registered here: arming it from here could race the
			// engine's own (and take its first observation's
			// observer's place).
			return
		}
		if w := ev.Watch(); w != nil && (s.needsRow == nil || !s.needsRow(w.Kind)) {
			h.w = w
		}
		select {
		case s.ids <- h:
		default:
			// Full: the repair scan at the next step finds it (a full
			// one: see above); an outcome settled on another replica,
			// the look for them.
			if h.message != "" {
				s.owe(now)
			}
		}
	case postgres.EventCheck:
		if ev.WatchID != "" && s.pg.Holds(ev.WatchID) {
			s.sched.Poke(ev.WatchID)
		}
	case postgres.EventResync:
		// What was said while nobody listened is lost: a completion
		// made on another replica among it (its delivery is owed here).
		if last != 0 {
			s.owe(time.Unix(0, last))
		}
		s.mgr.Kick()
	case postgres.EventRebalance:
		s.mgr.Kick()
	}
}

// owe asks owing to look for the outcomes settled on other replicas since
// at (less repairMargin, for their clocks) and owed a channel here
// (deliverElsewhere).
func (s *shards) owe(at time.Time) {
	v := at.Add(-repairMargin).UnixNano()
	for {
		old := s.owedSince.Load()
		if old != 0 && old <= v || s.owedSince.CompareAndSwap(old, v) {
			break
		}
	}
	select {
	case s.owedKick <- struct{}{}:
	default:
	}
}

// owing runs deliverElsewhere over the shards held when owe asks, beside
// the lease manager (whose renewals must not wait for its read), until
// ctx ends; a look that failed is made again a second later.
func (s *shards) owing(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-s.owedKick:
		}
		for !s.deliverElsewhere(ctx, s.held()) {
			select {
			case <-ctx.Done():
				return
			case <-time.After(time.Second):
			}
		}
	}
}

// deliverElsewhere hands the dispatcher the outcomes that other replicas
// settled since the instant owedSince holds in shards (held here) and that
// no channel has a receipt of (postgres.Store.UndispatchedElsewhere): the
// completions whose word did not reach take. A delivery queued twice goes
// out once (the dispatcher's queue, and each attempt's claim). It reports
// false when the read failed, owedSince kept for the next look.
func (s *shards) deliverElsewhere(ctx context.Context, shards []int) bool {
	since := s.owedSince.Swap(0)
	if since == 0 || s.disp == nil || len(shards) == 0 {
		return true
	}
	err := s.disp.ResumeWith(ctx, func(ctx context.Context, p vigil.ReceiptsResumeParams) (vigil.ReceiptsResumeResult, error) {
		if at := time.Unix(0, since); at.After(p.SettledSince) {
			p.SettledSince = at
		}
		u, err := s.pg.UndispatchedElsewhere(ctx, p, shards)
		return vigil.ReceiptsResumeResult{Undispatched: u}, err
	})
	if err != nil {
		s.owe(time.Unix(0, since).Add(repairMargin))
		if ctx.Err() == nil {
			s.log.Warn("looking for outcomes settled on other replicas; looking again in a second", "err", err)
		}
		return false
	}
	return true
}

// wake arms the watches heard of that are pending and not scheduled here,
// and forgets those that are no longer pending, a batch at a time.
func (s *shards) wake(ctx context.Context) {
	batch := make([]heardWatch, 0, wakeBatch)
	for {
		batch = batch[:0]
		select {
		case <-ctx.Done():
			return
		case h := <-s.ids:
			batch = append(batch, h)
		}
	more:
		for len(batch) < wakeBatch {
			select {
			case h := <-s.ids:
				batch = append(batch, h)
			default:
				break more
			}
		}
		if err := s.take(ctx, batch); err != nil && ctx.Err() == nil {
			s.log.Warn("reading watches heard of; the repair scan (or, for outcomes settled elsewhere, the look for them) will find them", "err", err)
		}
	}
}

// take arms or forgets the watches heard of, in the order heard: a
// cancelled one is forgotten, a registered one whose schedule the event
// carried is armed as it is (a registration costs the database no read),
// and the others are read (reconcile).
func (s *shards) take(ctx context.Context, batch []heardWatch) error {
	if s.cancelled == nil {
		s.cancelled = fifo.New[string, struct{}](cancelledCap)
	}
	gone := map[string]bool{}
	owed := map[string]string{}
	var owedAt time.Time
	for _, h := range batch {
		if h.gone {
			gone[h.id] = true
			s.cancelled.Add(h.id, struct{}{})
			if h.message != "" {
				owed[h.id] = h.message
				if owedAt.IsZero() || h.at.Before(owedAt) {
					owedAt = h.at
				}
			}
		}
	}
	var arm []*vigil.Watch
	var read []string
	seen := map[string]bool{}
	for _, h := range batch {
		if gone[h.id] || seen[h.id] {
			continue
		}
		seen[h.id] = true
		switch {
		case h.w == nil:
			read = append(read, h.id)
		case s.heardCancelled(h.id):
			// Heard cancelled before its registration was heard: a
			// registration's event follows its commit, and a cancel
			// made on another replica in between may come first.
		default:
			// A watch settled here meanwhile and armed again is
			// dropped at its first probe, which reads the row.
			if _, scheduled := s.sched.Live(h.id); !scheduled {
				arm = append(arm, h.w)
			}
		}
	}
	s.eng.ArmMany(arm)
	var forget []string
	for id := range gone {
		forget = append(forget, id)
	}
	s.eng.Forget(forget...)
	derr := s.deliverOwed(ctx, owed)
	if derr != nil {
		// Not handed over (their rows could not be read), and the repair
		// scan finds registrations only: the look for outcomes settled
		// elsewhere finds them.
		if owedAt.IsZero() {
			owedAt = time.Now()
		}
		s.owe(owedAt)
	}
	if len(read) == 0 {
		return derr
	}
	return errors.Join(derr, s.reconcile(ctx, read))
}

// deliverOwed hands the dispatcher the outcomes another replica settled
// in the shards held here (a completion made there: owed maps each watch
// to its outcome message), which that replica's fence keeps it from
// delivering. A delivery handed over twice goes out once (each attempt
// claims its receipt); one whose event is lost, or not queued, is found
// by deliverElsewhere (see heard).
func (s *shards) deliverOwed(ctx context.Context, owed map[string]string) error {
	if len(owed) == 0 || s.disp == nil {
		return nil
	}
	ids := make([]string, 0, len(owed))
	for id := range owed {
		ids = append(ids, id)
	}
	ws, err := s.pg.WatchGetMany(ctx, ids)
	if err != nil {
		return err
	}
	for _, w := range ws {
		if w.State != vigil.StatePending && s.pg.Holds(w.ID) {
			s.disp.Deliver(w, &vigil.Message{ID: owed[w.ID], WatchID: w.ID, Recipient: w.Recipient})
		}
	}
	return nil
}

// reconcile reads the watches ids and arms or forgets each.
func (s *shards) reconcile(ctx context.Context, ids []string) error {
	ws, err := s.pg.WatchGetMany(ctx, ids)
	if err != nil {
		return err
	}
	var arm []*vigil.Watch
	var gone []string
	for _, w := range ws {
		_, scheduled := s.sched.Live(w.ID)
		switch {
		case w.State == vigil.StatePending && !scheduled:
			arm = append(arm, w)
		case w.State != vigil.StatePending && scheduled:
			gone = append(gone, w.ID)
		}
	}
	s.eng.ArmMany(arm)
	s.eng.Forget(gone...)
	return nil
}

// repairSince is the instant from which the next heartbeat's repair scan
// reads (set by repair): where the oldest transaction that had written
// when the last scan ran began, or the database's clock then when none
// had, less repairSlack; the clock then less repairMargin when the
// heartbeat could not tell. A row the last scan could not see (its
// transaction had not committed) was inserted after its transaction
// began, so the next scan reads it, and rows the last scan saw are not
// read again and again (with a fixed look-back of 30 s, every step of the
// half minute after a burst read the whole burst again). None before the
// first (the shards just taken were loaded whole).
func (s *shards) repairSince() time.Time {
	return s.since
}

// repair, after each lease step, arms the pending watches the step's
// heartbeat found inserted in the shards it renewed since the last scan
// (repairSince) that are not scheduled: registrations whose notification
// was lost. The heartbeat read only those rows, through the index of each
// shard's pending rows by insertion time, never every watch, in the same
// statement as the renewal. A quick heartbeat (postgres.Peers.Quick)
// scans nothing, and the next scan starts where this one would have: it
// comes at the next two steps when a registration in a held shard was
// heard of since the last (Rescan, in heard: a wake-up dropped among them), the
// listener reconnected or another replica joined (Kick), or the database
// changed (a replica's session ended, one that could not send a
// registration's events rewrote its row); otherwise within QuickRun+1
// steps (a minute at the default renewal).
//
// It also arms again the watches a fenced write refused since the last
// step (postgres.Store.Refused) whose shards this step kept: the engine
// dropped them as lost, and a renewal that committed just as the lease
// lapsed, unseen by the refused write, left them here with nobody to arm
// them. Those whose shards moved are the new holder's, which primes them.
// One still scheduled is looked at again at the next step (the refused
// write may not have returned yet, and the engine drops it when it does),
// and so are all it found when reading them failed: the scan's window has
// moved on, and nothing else would find them.
func (s *shards) repair(ctx context.Context, _ []int, found postgres.Peers) {
	if s.stopping.Load() {
		return // the engine has stopped: nothing to arm
	}
	switch {
	case found.Quick:
		// No scan (nothing was read): the next goes on from where this
		// one would have.
	case found.Horizon.IsZero():
		s.since = found.Now.Add(-repairMargin)
	default:
		s.since = found.Horizon.Add(-repairSlack)
	}
	if m := found.PendingMore; !m.IsZero() && m.Before(s.since) {
		// A shard had more rows than one scan reads: the next goes on
		// from where this one cut.
		s.since = m
	}
	again := s.again
	s.again = nil
	var missing []string
	seen := map[string]bool{}
	look := func(id string, refused bool) {
		if seen[id] || !s.pg.Holds(id) {
			return
		}
		seen[id] = true
		if _, ok := s.sched.Live(id); !ok {
			missing = append(missing, id)
		} else if refused {
			s.again = append(s.again, id)
		}
	}
	for _, id := range s.refused() {
		look(id, true)
	}
	for _, id := range slices.Concat(found.Pending, again) {
		look(id, false)
	}
	if len(missing) == 0 {
		return
	}
	if err := s.reconcile(ctx, missing); err != nil && ctx.Err() == nil {
		s.again = append(s.again, missing...)
		s.log.Warn("repair scan failed; it runs again at the next step", "err", err)
	}
}

// calendarKind returns whether a kind of reg computes its first due from
// its predicate (engine.NextDuer).
func calendarKind(reg *watcher.Registry) func(vigil.Kind) bool {
	return func(k vigil.Kind) bool {
		wt, ok := reg.Lookup(k)
		if !ok {
			return false
		}
		_, cal := wt.(engine.NextDuer)
		return cal
	}
}

// heardCancelled reports whether watch id is among the last heard
// cancelled.
func (s *shards) heardCancelled(id string) bool {
	_, ok := s.cancelled.Get(id)
	return ok
}

// cancelledCap is how many of the watches heard cancelled take
// remembers.
const cancelledCap = 4096
