package engine

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/vigil-run/vigil"
	"github.com/vigil-run/vigil/deliver"
	"github.com/vigil-run/vigil/scheduler"
	"github.com/vigil-run/vigil/watcher"
	"github.com/vigil-run/vigil/wording"
)

// DefaultWorkers is the default size of the probe pool (probe_workers).
const DefaultWorkers = scheduler.DefaultWorkers

// ReasonNoWatcher is the outcome reason of a watch of a kind this build
// has no watcher for, expired at its deadline.
const ReasonNoWatcher = "no_watcher"

// Metrics hears what the engine's probes and settlements do. Its methods
// run on the scheduler's workers: they must be cheap and must not block.
type Metrics interface {
	// Probed: a probe of a watch of kind answered verdict. It started late
	// after the watch was due and took took.
	Probed(kind vigil.Kind, verdict vigil.Verdict, late, took time.Duration)
	// Settled: a watch of kind settled as state, its settlement committed
	// late after the instant it was due (a timer's: its own instant).
	Settled(kind vigil.Kind, state vigil.State, late time.Duration)
}

// probeConfig is what the prober needs; see Config for each field.
type probeConfig struct {
	Store    vigil.Store
	Watchers *watcher.Registry
	Limits   vigil.Limits
	// JitterFunc returns a random duration in [0, n).
	JitterFunc func(n time.Duration) time.Duration
	// EventFunc hears of observations, settlements and new messages, after
	// they are committed. It must not block.
	EventFunc func(vigil.Event)
	// NewIDFunc makes message ids.
	NewIDFunc func() string
	// ProbeTimeout is a hard cap on one probe; watchers bound themselves
	// well within it.
	ProbeTimeout time.Duration
	// BatchSize bounds how many instant watches (timers) settle in one
	// transaction, and how many rows priming reads at once.
	BatchSize   int
	DeliverFunc func(w *vigil.Watch, m *vigil.Message)
	CheckFunc   func(ctx context.Context, w *vigil.Watch) error
	Metrics     Metrics
	// ProbedFunc, when set, hears of each probe's observation, settling
	// or not, once what it decided is written (the panel's recent
	// probes), with the ticket StartFunc gave the probe (0 for the
	// clock's batches, which it is not asked for). It must not block.
	ProbedFunc func(w *vigil.Watch, obs *vigil.Observation, ticket uint64)
	// StartFunc, when set, is called as a probe of watch id starts
	// looking; what it returns is handed to ProbedFunc.
	StartFunc func(id string) uint64
	// HoldsFunc is Config.HoldsFunc.
	HoldsFunc func(id string) bool
	// StopFunc ends what the probes of watch id, of kind, started and
	// would outlive it (a run's program; Engine.stop).
	StopFunc func(kind vigil.Kind, id string)
}

// prober is what happens when a watch's turn comes (it implements
// scheduler.Prober): the probe, recording what it saw, settling, the
// outcome message and pruning; and priming, which reads the store and arms
// the scheduler. Writes follow state changes, not elapsed time: a probe
// whose observation is the same as the last one writes nothing. Settling
// persists the outcome and its mailbox message in one transaction before
// anything else hears of it.
type prober struct {
	cfg   probeConfig
	log   *slog.Logger
	now   func() time.Time
	sched *scheduler.Scheduler
	// doubts are the settlements whose commit failed (see doubt.go).
	doubts doubts
	// outage quiets the log of store errors while the store cannot be
	// reached (outage.go).
	outage outageLog
}

var _ scheduler.Prober = (*prober)(nil)

// Probe implements scheduler.Prober: it probes e's watch and acts on the
// answer, in a turn of the watch's recipient (see scheduler.Run).
func (s *prober) Probe(ctx context.Context, e *scheduler.Entry, now time.Time, turn func(recipient string) bool) {
	if !s.holds(e.ID()) {
		// Its shard moved to another replica after it was armed here (a
		// shard lost while it was being primed, or between a holds check
		// and the scheduler's lock): the holder probes it, and nothing of
		// it runs here, a run watch's program above all.
		s.sched.Drop(e)
		e.Observer().Finish(nil)
		return
	}
	log := s.log.With("watch_id", e.ID())
	w, err := s.cfg.Store.WatchGet(ctx, e.ID())
	if errors.Is(err, vigil.ErrNotFound) {
		s.sched.Drop(e)
		e.Observer().Finish(nil)
		return
	}
	if err != nil {
		if ctx.Err() == nil {
			s.outage.error(log, s.now(), "reading watch before probe", err)
		}
		s.sched.Retry(e, retryAt(e, now))
		return
	}
	s.outage.fine(s.log, "reading watch before probe")
	if w.State != vigil.StatePending {
		// Settled by another: on another replica, a cancel or its
		// recipient's close, whose word did not reach this one (none is
		// sent for a close; a notification may be lost). What its probes
		// started here would outlive it: stopped, as Forget stops it.
		s.sched.Drop(e)
		if s.cfg.StopFunc != nil {
			s.cfg.StopFunc(w.Kind, w.ID)
		}
		s.seenSettled(w)
		e.Observer().Finish(w)
		return
	}
	deadline, hasDeadline := e.Deadline()
	final := hasDeadline && !now.Before(deadline)
	if !turn(w.Recipient) {
		return
	}
	wt, ok := s.cfg.Watchers.Lookup(w.Kind)
	if !ok && !final && w.Unreadable == "" {
		// No watcher for its kind in this build: untouched until its
		// deadline, if it has one.
		if !hasDeadline {
			s.sched.Drop(e)
		} else {
			s.sched.Retry(e, deadline)
		}
		e.Observer().Finish(w)
		return
	}
	if s.cfg.CheckFunc != nil {
		if err := s.cfg.CheckFunc(ctx, w); err != nil {
			s.stop(ctx, e, w, err, now)
			return
		}
	}
	// Its final probe answered, and the commit of that answer failed and
	// was not written: the answer is written again. A final probe runs
	// once; probing again ran a command watch's program again, past the
	// deadline, and settled on what that run said. (Only a turn at or past
	// the deadline can follow a final probe: the others look nothing up.)
	if fa, ok := s.finalInDoubt(final, w.ID); ok {
		w.Errors, w.ConsecutiveErrors, w.CheckedAt = fa.errors, fa.consecutive, fa.checkedAt
		won, err := s.commit(ctx, []settlement{{e: e, w: w, out: fa.out, polls: fa.polls, final: true}}, now)
		if err == nil && won[0] && fa.out.State != vigil.StateErrored && s.cfg.StopFunc != nil {
			// What the final probe let go of, or would have (as below).
			s.cfg.StopFunc(w.Kind, w.ID)
		}
		return
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
	if _, cal, err := calendarDue(wt, w.Predicate, w.CreatedAt, e.Due().Add(-time.Nanosecond)); cal && err != nil {
		// Its calendar has no fire from the instant this turn was due
		// (its tz gone from this machine, a cron expression with none
		// ahead; a fire due then is one): it could never fire again, so
		// it settles errored, saying why, and is not run.
		s.commit(ctx, []settlement{{e: e, w: w, out: noNextFire(err, now), polls: w.Polls}}, now)
		return
	}
	var ticket uint64
	if f := s.cfg.StartFunc; f != nil {
		ticket = f(w.ID)
	}
	pctx, cancel := context.WithTimeout(ctx, s.cfg.ProbeTimeout)
	obs, err := watcher.Run(pctx, wt, watcher.Probe{WatchID: w.ID, Kind: w.Kind, Predicate: w.Predicate, Now: now, Created: w.CreatedAt,
		Last: w.LastObservation, ChainDepth: w.ChainDepth, Final: final})
	cancel()
	if ctx.Err() != nil {
		// Shutting down: the probe was cut short, its answer means nothing.
		s.sched.Retry(e, e.Due())
		return
	}
	if err != nil {
		log.Error("probe routed to the wrong watcher", "err", err)
		obs = wrongKind(err, now)
	}
	// A probe that was still running when the deadline came is the final
	// probe: its answer decides as the final probe's would, settled once
	// it ended, and nothing is probed again. Another probe at the deadline
	// ran a command watch's program a second time and delivered the expiry
	// late by up to that probe's timeout. A watcher whose final probe does
	// what its others do not (ends a run, reports a folder's burst still
	// settling: watcher.FinalProber) gets that probe all the same.
	settleAt, lateFinal := now, false
	if !final && hasDeadline {
		if end := s.now(); !end.Before(deadline) {
			if _, own := wt.(watcher.FinalProber); !own {
				final, lateFinal, settleAt = true, true, end
			}
		}
	}
	if m := s.cfg.Metrics; m != nil {
		m.Probed(w.Kind, obs.Verdict, now.Sub(e.Due()), s.now().Sub(now))
	}
	// probed tells ProbedFunc once what the probe decided is written, and
	// before anyone is told of it: a Check woken by the settlement, or a
	// registration answered by its first observation, then finds the
	// probe among the watch's recent ones.
	probed := func() {}
	if f := s.cfg.ProbedFunc; f != nil {
		told := false
		probed = func() {
			if !told {
				told = true
				f(w, &obs, ticket)
			}
		}
	}
	// finish, when set, answers the registration waiting for this first
	// observation: after probed, and after the watch is rescheduled (its
	// progress is what a Check woken by probed reads).
	var finish func()
	defer func() {
		probed()
		if finish != nil {
			finish()
		}
	}()
	// Answers of one cached read (a ci or ticket watch probed more often
	// than the forge is read) count once toward stable.
	prog := e.Progress().AdvanceRead(obs.Verdict, obs.Read, now)
	w.Errors, w.ConsecutiveErrors, w.CheckedAt = prog.Errors, prog.Consecutive, now
	d := vigil.Decide(w, &obs, prog, now, final)
	if d.Settle {
		out := &vigil.Outcome{State: d.State, Reason: d.Reason, Held: d.Held, Attention: d.Attention, Observation: &obs}
		won, err := s.commit(ctx, []settlement{{e: e, w: w, out: out, polls: prog.Polls, final: final, probed: probed}}, settleAt)
		if lateFinal && err == nil && won[0] && d.State != vigil.StateErrored && s.cfg.StopFunc != nil {
			// What the final probe would have let go of (an http
			// watch's parsed predicate); commit stops an errored one.
			s.cfg.StopFunc(w.Kind, w.ID)
		}
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
	if o := e.Observer(); o != nil {
		w.Polls = prog.Polls
		e.Observed()
		finish = func() { o.Finish(w) }
	}
	if next, cal, err := calendarDue(wt, w.Predicate, w.CreatedAt, laterOf(now, s.now())); cal {
		// A calendar counts from when the probe ended: fires that came due
		// while it ran are skipped, never queued.
		if err != nil {
			// It could never fire again: settled, never left pending
			// without a next turn.
			s.commit(ctx, []settlement{{e: e, w: w, out: noNextFire(err, now), polls: prog.Polls}}, now)
			return
		}
		if hasDeadline && next.After(deadline) {
			next = deadline
		}
		s.sched.Reschedule(e, next, prog)
		return
	}
	every := e.Every()
	if every <= 0 {
		// Kinds that are not probed on an interval only wake at the deadline.
		every = max(deadline.Sub(now), time.Second)
	}
	next := vigil.NextDue(e.Due(), now, every, prog.Consecutive, s.cfg.Limits.BackoffCap, deadline)
	s.sched.Reschedule(e, next, prog)
}

// retryPastDeadline is how soon a turn that could not run or record (a
// failed read, check or write) is tried again once its watch's deadline
// has come, when its interval is longer.
const retryPastDeadline = 5 * time.Second

// retryAt returns when e's turn, which could not run or record at now, is
// tried again: an interval on (at least a second), but never past the
// watch's deadline, and within retryPastDeadline once that has come. A
// deadline is delivered on time: a store that failed for a moment once
// kept the final probe (or the expiry's commit) waiting a whole interval,
// and a condition that came true meanwhile fired a watch that had
// expired.
func retryAt(e *scheduler.Entry, now time.Time) time.Time {
	next := now.Add(max(e.Every(), time.Second))
	if d, ok := e.Deadline(); ok && next.After(d) {
		if d.After(now) {
			next = d
		} else if soon := now.Add(retryPastDeadline); soon.Before(next) {
			next = soon
		}
	}
	return next
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
// baseline, and only over the baseline the probe compared against, as is
// any other answer of it that is written; its unavailable answers are
// never written, so the baseline is always the last real observation.
func (s *prober) record(ctx context.Context, wt watcher.Watcher, e *scheduler.Entry, w *vigil.Watch, obs *vigil.Observation, polls int, now time.Time) (gone bool) {
	p := vigil.WatchObserveParams{ID: w.ID, Observation: obs, Polls: polls, Errors: w.Errors, ConsecutiveErrors: w.ConsecutiveErrors, CheckedAt: w.CheckedAt}
	switch {
	case w.Standing && obs.Verdict == vigil.VerdictUnavailable:
		return false
	case w.Standing && obs.Verdict == vigil.VerdictSatisfied:
		d := messageData{Kind: w.Kind, State: w.State, Note: w.Note, Labels: w.Labels, Predicate: vigil.RedactJSON(w.Predicate), Observation: obs}
		data := d.marshal()
		typ, text := standingMessage(wt, w, obs)
		p.Message = &vigil.Message{ID: s.cfg.NewIDFunc(), Recipient: w.Recipient, WatchID: w.ID, Type: typ,
			Text: text, Data: data, CreatedAt: now}
		p.Baseline = w.LastObservation
	case obs.Same(w.LastObservation):
		return false
	case w.Standing:
		// Unchanged, but written (its summary or facts differ from the
		// baseline's): it is the baseline too, so it is written only over
		// the one it was compared with. Unchecked, a look made before
		// another probe reported a change put the old facts back over the
		// new, and the next probe reported that change again.
		p.Baseline, p.CheckBaseline = w.LastObservation, true
		if w.LastObservation == nil && s.lateBaseline(wt, w, now) {
			// The first real read, later than the registration: a change
			// made in between is folded into this baseline and never
			// reported, so the watch says so, once, with the baseline.
			d := messageData{Kind: w.Kind, State: w.State, Note: w.Note, Labels: w.Labels, Predicate: vigil.RedactJSON(w.Predicate), Observation: obs}
			p.Message = &vigil.Message{ID: s.cfg.NewIDFunc(), Recipient: w.Recipient, WatchID: w.ID, Type: vigil.MessageNote,
				Text: wording.LateBaseline(w, now), Data: d.marshal(), CreatedAt: now}
		}
	}
	ok, err := s.cfg.Store.WatchObserve(ctx, p)
	if err == nil {
		s.outage.fine(s.log, "recording observation")
	}
	switch {
	case errors.Is(err, vigil.ErrBaselineMoved):
		// Another probe wrote the baseline first (a replica that held
		// the shard while this probe ran; it may have reported this
		// change): nothing is written, and the next probe compares
		// against the baseline it wrote.
		s.log.Info("an answer found against an old baseline was not written", "watch_id", w.ID)
		return false
	case err != nil:
		if ctx.Err() == nil {
			s.outage.error(s.log, s.now(), "recording observation", err, "watch_id", w.ID)
		}
		return false
	case !ok:
		s.sched.Drop(e)
		if s.doubts.has(w.ID) {
			// Settled meanwhile: perhaps by the commit in doubt, whose
			// write became visible only now (as in commit).
			s.recheck(ctx, w.ID)
		}
		e.Observer().Finish(nil)
		return true
	}
	w.LastObservation = obs
	s.cfg.EventFunc(vigil.Event{Type: vigil.EventWatchObserved, WatchID: w.ID, Recipient: w.Recipient,
		State: w.State, Polls: polls, Text: obs.Summary, At: now})
	if m := p.Message; m != nil {
		s.sched.ArmPrune(now.Add(s.cfg.Limits.RetentionMessages))
		s.cfg.EventFunc(vigil.Event{Type: vigil.EventMessage, WatchID: w.ID, Recipient: w.Recipient, State: w.State, Text: m.Text, Seq: m.Seq, At: now})
	}
	return false
}

// lateBaseline reports whether the first real observation of standing
// watch w, made by a probe that began at now, is a late baseline: checks
// before it could not tell (the forge was down at registration), or it
// began more than Limits.ObserveWait (5 s) after the watch was registered (or its
// start), so the registration's answer could not carry it. What changed
// in between is in this baseline, never reported. A watcher whose
// answers are notes (a schedule's runs) compares nothing: never late.
func (s *prober) lateBaseline(wt watcher.Watcher, w *vigil.Watch, now time.Time) bool {
	if n, ok := wt.(Noter); ok && n.Notes() {
		return false
	}
	from := laterOf(w.CreatedAt, w.StartAt)
	return w.Errors > 0 || now.Sub(from) > s.cfg.Limits.ObserveWait
}

// stop handles a CheckFunc refusal: a StopError cancels the watch silently;
// any other error is a failure to check, retried at the next interval.
func (s *prober) stop(ctx context.Context, e *scheduler.Entry, w *vigil.Watch, err error, now time.Time) {
	var se *vigil.StopError
	if !errors.As(err, &se) {
		if ctx.Err() == nil {
			s.outage.error(s.log, now, "checking watch before probe", err, "watch_id", w.ID)
		}
		s.sched.Retry(e, retryAt(e, now))
		return
	}
	out := &vigil.Outcome{State: vigil.StateCancelled, Reason: se.Reason, Sentence: se.Sentence, Observation: w.LastObservation}
	p := e.Progress()
	_, won, cerr := s.cfg.Store.WatchCancel(ctx, vigil.WatchCancelParams{ID: w.ID, Outcome: out, SettledAt: now,
		CheckedAt: p.At, Polls: p.Polls, Errors: p.Errors, ConsecutiveErrors: p.Consecutive})
	if cerr != nil {
		if ctx.Err() == nil {
			s.log.Error("cancelling watch", "watch_id", w.ID, "err", cerr)
		}
		s.sched.Retry(e, retryAt(e, now))
		return
	}
	s.sched.Drop(e)
	if !won && s.doubts.has(w.ID) {
		s.recheck(ctx, w.ID) // settled by the commit in doubt, as in record
	}
	e.Observer().Finish(nil)
	if won {
		s.sched.ArmPrune(now.Add(s.cfg.Limits.RetentionWatches))
		s.cfg.EventFunc(vigil.Event{Type: vigil.EventWatchSettled, WatchID: w.ID, Recipient: w.Recipient, State: vigil.StateCancelled,
			Text: se.Sentence, Done: true, At: now})
	}
}

// Instant implements scheduler.Prober: it settles a batch of watches answered by the clock alone, reading
// their rows in one query and committing in one transaction.
func (s *prober) Instant(ctx context.Context, es []*scheduler.Entry, now time.Time) {
	// In id order: ids are made in time order, so the batch's rows and
	// index entries are visited in the order they were written, page after
	// page, rather than at random.
	slices.SortFunc(es, func(a, b *scheduler.Entry) int { return strings.Compare(a.ID(), b.ID()) })
	ids := make([]string, len(es))
	for i, e := range es {
		ids[i] = e.ID()
	}
	ws, err := s.cfg.Store.WatchGetMany(ctx, ids)
	if err != nil {
		if ctx.Err() == nil {
			s.outage.error(s.log, now, "reading instant watches", err, "count", len(ids))
		}
		for _, e := range es {
			s.sched.Retry(e, now.Add(time.Second))
		}
		return
	}
	s.outage.fine(s.log, "reading instant watches")
	byID := make(map[string]*vigil.Watch, len(ws))
	for _, w := range ws {
		byID[w.ID] = w
	}
	var settle []settlement
	var probed []probedObs
	defer func() {
		// Once what the probes decided is written.
		for _, p := range probed {
			s.cfg.ProbedFunc(p.w, &p.obs, 0)
		}
	}()
	for _, e := range es {
		w := byID[e.ID()]
		if w == nil || w.State != vigil.StatePending {
			s.sched.Drop(e)
			s.seenSettled(w)
			e.Observer().Finish(w)
			continue
		}
		wt, ok := s.cfg.Watchers.Lookup(w.Kind)
		if !ok {
			s.sched.Drop(e)
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
		prog := e.Progress().Advance(obs.Verdict, now)
		w.Errors, w.ConsecutiveErrors, w.CheckedAt = prog.Errors, prog.Consecutive, now
		deadline, hasDeadline := e.Deadline()
		final := hasDeadline && !now.Before(deadline)
		d := vigil.Decide(w, &obs, prog, now, final)
		if !d.Settle {
			next := now.Add(time.Second)
			if hasDeadline && deadline.Before(next) {
				next = deadline
			}
			s.sched.Reschedule(e, next, prog)
			continue
		}
		out := &vigil.Outcome{State: d.State, Reason: d.Reason, Held: d.Held, Attention: d.Attention, Observation: &obs}
		settle = append(settle, settlement{e: e, w: w, out: out, polls: prog.Polls})
	}
	if len(settle) > 0 {
		s.commit(ctx, settle, now)
	}
}

// probedObs is one probe of a batch, for probeConfig.ProbedFunc.
type probedObs struct {
	w   *vigil.Watch
	obs vigil.Observation
}

// finalInDoubt returns the final probe's answer in doubt for watch id, for
// a turn at or past its deadline (final).
func (s *prober) finalInDoubt(final bool, id string) (*finalAnswer, bool) {
	if !final {
		return nil, false
	}
	return s.doubts.final(id)
}
