package engine

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/vigil-run/vigil"
	"github.com/vigil-run/vigil/scheduler"
	"github.com/vigil-run/vigil/watcher"
)

// prime loads every pending watch from the store and arms it: each probing
// watch at a random point inside its own interval (so a restart does not
// probe everything at once), each instant watch at its instant. Watches whose
// deadline passed while the daemon was down are expired and mailed at once;
// if the store cannot settle them, Prime fails (the daemon does not become
// ready) and nothing of them is scheduled. Rows of kinds this build has no
// watcher for are left untouched until their deadline, when they expire
// with reason ReasonNoWatcher; those without a deadline are left untouched.
// before, when set, runs after the rows are in the scheduler and before
// anything is settled (Engine.PrimeWith).
func (s *prober) prime(ctx context.Context, before func(context.Context) error) error {
	now := s.now()
	var (
		entries []*scheduler.Entry
		overdue []string
		err     error
	)
	if st, ok := s.cfg.Store.(pendingStreamer); ok {
		entries, overdue, err = s.loadStreamed(ctx, st, now)
	} else {
		var rows []vigil.ScheduleEntry
		if rows, err = s.cfg.Store.WatchListPending(ctx); err != nil {
			return err
		}
		entries, overdue, err = s.load(ctx, rows, now)
	}
	if err != nil {
		return err
	}
	s.sched.Prime(entries)
	if before != nil {
		if err := before(ctx); err != nil {
			return err
		}
	}
	if err := s.expireAll(ctx, overdue, now); err != nil {
		return err
	}
	s.sched.Primed(ctx, s, now)
	return nil
}

// adopt arms pending watches loaded after the start (the watches of a
// shard this replica took over) as prime arms those of a start: jittered
// inside their interval, overdue deadlines expired at once. Those the
// scheduler holds already are left as they are.
func (s *prober) adopt(ctx context.Context, rows []vigil.ScheduleEntry) error {
	// A shard lost while its rows were read is the new holder's.
	// (A copy: the caller's rows stay as they were.)
	rows = slices.DeleteFunc(slices.Clone(rows), func(r vigil.ScheduleEntry) bool { return !s.holds(r.ID) })
	now := s.now()
	entries, overdue, err := s.load(ctx, rows, now)
	if err != nil {
		return err
	}
	s.sched.AddMany(entries)
	return s.expireAll(ctx, overdue, now)
}

// expireAll expires the overdue watches, BatchSize at a time.
func (s *prober) expireAll(ctx context.Context, overdue []string, now time.Time) error {
	for len(overdue) > 0 {
		n := min(len(overdue), s.cfg.BatchSize)
		if err := s.expireOverdue(ctx, overdue[:n], now); err != nil {
			return err
		}
		overdue = overdue[n:]
	}
	return nil
}

// load makes the scheduler entries of pending rows, and lists those whose
// deadline passed (to expire at once).
func (s *prober) load(ctx context.Context, rows []vigil.ScheduleEntry, now time.Time) ([]*scheduler.Entry, []string, error) {
	s.sched.Reserve(len(rows))
	l := s.newLoader(now)
	l.add(rows)
	return l.finish(ctx)
}

// loadStreamed is load over the pending rows of a store that hands them
// over a part at a time as it reads them: each part is loaded on a
// goroutine of its own while the store reads the next (a million rows
// take seconds to read), and the parts in flight are bounded.
func (s *prober) loadStreamed(ctx context.Context, st pendingStreamer, now time.Time) ([]*scheduler.Entry, []string, error) {
	l := s.newLoader(now)
	parts := make(chan []vigil.ScheduleEntry, primeParts)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for rows := range parts {
			l.add(rows)
		}
	}()
	reserved := false
	err := st.WatchListPendingFunc(ctx, func(rows []vigil.ScheduleEntry, total int) error {
		if !reserved {
			reserved = true
			s.sched.Reserve(total) // before the first part is added
		}
		select {
		case parts <- rows:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	})
	close(parts)
	<-done
	if err != nil {
		return nil, nil, err
	}
	return l.finish(ctx)
}

// pendingStreamer is a store that hands its pending watches over a part at
// a time as it reads them (store/sqlite): fn gets each part, which it may
// keep, and the number of pending watches the store counts, to size what
// it builds; an error from fn ends the read with it.
type pendingStreamer interface {
	WatchListPendingFunc(ctx context.Context, fn func(rows []vigil.ScheduleEntry, total int) error) error
}

// loader makes the scheduler entries of pending rows handed to add, one
// part after another from one goroutine, and hands them to the scheduler
// a chunk at a time; finish arms the calendars and returns the rest.
type loader struct {
	s        *prober
	now      time.Time
	overdue  []string
	unknown  map[vigil.Kind]int
	entries  []*scheduler.Entry
	calendar []vigil.ScheduleEntry
	// k is what the rows' kind needs, looked up once for a run of rows of
	// one kind (the store hands them over with one string per kind).
	k kindInfo
}

func (s *prober) newLoader(now time.Time) *loader {
	// The scheduler copies what it keeps of each entry into its own
	// tables: it is handed them a part at a time, so that a million rows
	// do not have a million entries beside them.
	return &loader{s: s, now: now, unknown: map[vigil.Kind]int{}, entries: make([]*scheduler.Entry, 0, primeChunk)}
}

// add makes the entries of rows.
func (l *loader) add(rows []vigil.ScheduleEntry) {
	s, now := l.s, l.now
	for i := range rows {
		if len(l.entries) == primeChunk {
			s.sched.Prime(l.entries)
			clear(l.entries)
			l.entries = l.entries[:0]
		}
		r := &rows[i]
		if r.Unreadable != "" {
			// Its schedule cannot be read: its turn comes at once, and
			// settles it errored (see runProbe).
			s.log.Warn("a pending watch cannot be read; it settles errored", "watch_id", r.ID, "reason", r.Unreadable)
			e := scheduler.NewEntry(r.ID, r.Kind, 0, time.Time{}, false)
			e.SetDue(now)
			l.entries = append(l.entries, e)
			continue
		}
		if !l.k.set || l.k.kind != r.Kind {
			l.k = s.kindInfo(r.Kind)
		}
		k := &l.k
		if !k.ok {
			l.unknown[r.Kind]++
			if !r.Deadline.IsZero() {
				// Armed at its deadline only, when it expires (at once
				// if that passed already).
				e := scheduler.NewEntry(r.ID, r.Kind, r.Every, r.Deadline, false)
				e.SetDue(r.Deadline)
				e.SetProgress(vigil.Progress{Polls: r.Polls})
				l.entries = append(l.entries, e)
			}
			continue
		}
		spec := k.spec
		if !r.Deadline.IsZero() && !r.Deadline.After(now) {
			l.overdue = append(l.overdue, r.ID)
			continue
		}
		if k.calendar {
			l.calendar = append(l.calendar, *r)
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
		e := scheduler.NewEntry(r.ID, k.watcherKind, r.Every, r.Deadline, spec.Instant)
		e.SetDue(due)
		e.SetProgress(vigil.Progress{Polls: r.Polls, Errors: r.Errors, Consecutive: r.ConsecutiveErrors})
		l.entries = append(l.entries, e)
	}
}

// finish arms the calendars' watches and returns the entries not handed to
// the scheduler yet, and the watches whose deadline passed.
func (l *loader) finish(ctx context.Context) ([]*scheduler.Entry, []string, error) {
	for k, n := range l.unknown {
		l.s.log.Warn("pending watches of a kind this build cannot watch are left untouched until their deadline, when they expire", "kind", k, "count", n)
	}
	cal, err := l.s.primeCalendar(ctx, l.calendar, l.now)
	if err != nil {
		return nil, nil, err
	}
	return append(l.entries, cal...), l.overdue, nil
}

// kindInfo is what load needs of a kind: whether this build watches it,
// its spec, its watcher's own name of it, and whether it keeps a calendar.
type kindInfo struct {
	kind        vigil.Kind
	set, ok     bool
	spec        vigil.KindSpec
	watcherKind vigil.Kind
	calendar    bool
}

func (s *prober) kindInfo(kind vigil.Kind) kindInfo {
	k := kindInfo{kind: kind, set: true}
	wt, ok := s.cfg.Watchers.Lookup(kind)
	if !ok {
		return k
	}
	k.ok, k.watcherKind = true, wt.Kind()
	k.spec, _ = s.cfg.Watchers.Spec(kind)
	_, k.calendar = wt.(NextDuer)
	return k
}

func (s *prober) expireOverdue(ctx context.Context, ids []string, now time.Time) error {
	ws, err := s.cfg.Store.WatchGetMany(ctx, ids)
	if err != nil {
		return err
	}
	ss := make([]settlement, 0, len(ws))
	for _, w := range ws {
		if w.State != vigil.StatePending {
			s.seenSettled(w)
			continue
		}
		if s.cfg.CheckFunc != nil {
			// As before its final probe: a watch whose token was
			// revoked (or expired, or deleted) is cancelled silently,
			// not expired and delivered as if the token still held.
			if err := s.cfg.CheckFunc(ctx, w); err != nil {
				if err := s.cancelPastDeadline(ctx, w, err, now); err != nil {
					return err
				}
				continue
			}
		}
		out := &vigil.Outcome{State: vigil.StateExpired, Reason: "down_past_deadline", Observation: w.LastObservation}
		polls := w.Polls
		if a, p, ok := s.recordedAnswer(w, now); ok {
			out, polls = a, p
		}
		// A stand-in that is never put on the heap, even when the store
		// fails: the watch is not held here, and a failed expiry fails Prime.
		ss = append(ss, settlement{e: scheduler.Detached(w.ID, 0), w: w, out: out, polls: polls})
	}
	if len(ss) == 0 {
		return nil
	}
	won, err := s.commit(ctx, ss, now)
	if err != nil {
		return fmt.Errorf("scheduler: expiring the watches past their deadline: %w", err)
	}
	if s.cfg.StopFunc != nil {
		// No final probe ran for them, which ends what a watch's probes
		// started at its deadline (a run watch's program): ended here.
		for i, st := range ss {
			if won[i] {
				s.cfg.StopFunc(st.w.Kind, st.w.ID)
			}
		}
	}
	return nil
}

// cancelPastDeadline handles a CheckFunc refusal of w, whose deadline
// passed while the daemon was down, as stop does before a probe: a
// StopError cancels it silently (nothing in the mailbox, nothing pushed,
// and what its probes started is stopped); any other error (the token
// could not be read) fails, as a failed expiry does.
func (s *prober) cancelPastDeadline(ctx context.Context, w *vigil.Watch, err error, now time.Time) error {
	var se *vigil.StopError
	if !errors.As(err, &se) {
		return fmt.Errorf("scheduler: checking the token of watch %s, past its deadline: %w", w.ID, err)
	}
	out := &vigil.Outcome{State: vigil.StateCancelled, Reason: se.Reason, Sentence: se.Sentence, Observation: w.LastObservation}
	_, won, err := s.cfg.Store.WatchCancel(ctx, vigil.WatchCancelParams{ID: w.ID, Outcome: out, SettledAt: now})
	if err != nil {
		return fmt.Errorf("scheduler: cancelling watch %s, whose token no longer holds: %w", w.ID, err)
	}
	if won {
		s.sched.ArmPrune(now.Add(s.cfg.Limits.RetentionWatches))
		s.cfg.EventFunc(vigil.Event{Type: vigil.EventWatchSettled, WatchID: w.ID, Recipient: w.Recipient, State: vigil.StateCancelled,
			Text: se.Sentence, Done: true, At: now})
	}
	return nil
}

// recordedAnswer returns the outcome of w, whose deadline passed while
// the daemon was down, when its watcher kept an answer that came by that
// deadline (a Recorder: a run that ended by itself meanwhile), and the
// polls to record with it. Decided as the final probe would have: it is
// an answer that came in time, so the watch does not expire.
func (s *prober) recordedAnswer(w *vigil.Watch, now time.Time) (*vigil.Outcome, int, bool) {
	wt, ok := s.cfg.Watchers.Lookup(w.Kind)
	if !ok {
		return nil, 0, false
	}
	r, ok := wt.(Recorder)
	if !ok {
		return nil, 0, false
	}
	obs, ok := r.Recorded(watcher.Probe{WatchID: w.ID, Kind: w.Kind, Predicate: w.Predicate, Now: now, Created: w.CreatedAt,
		Last: w.LastObservation, ChainDepth: w.ChainDepth, Final: true}, w.Deadline)
	if !ok {
		return nil, 0, false
	}
	if obs.At.IsZero() {
		obs.At = now
	}
	prog := vigil.Progress{Polls: w.Polls, Errors: w.Errors, Consecutive: w.ConsecutiveErrors}.Advance(obs.Verdict, now)
	d := vigil.Decide(w, &obs, prog, now, true)
	if !d.Settle || d.State == vigil.StateExpired {
		return nil, 0, false
	}
	w.Errors, w.ConsecutiveErrors, w.CheckedAt = prog.Errors, prog.Consecutive, now
	return &vigil.Outcome{State: d.State, Reason: d.Reason, Held: d.Held, Attention: d.Attention, Observation: &obs}, prog.Polls, true
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

// add schedules a newly registered watch: its first probe runs at once (or
// at its StartAt), and a waiting loop is woken. o, when non-nil, hears the
// first observation (registration with observe).
func (s *prober) add(w *vigil.Watch, o *scheduler.Observer) {
	if !s.holds(w.ID) {
		// Another replica's shard: its holder hears of it (see
		// Config.HoldsFunc) and probes it.
		o.Finish(nil)
		return
	}
	e := s.entryFor(w)
	if e == nil {
		o.Finish(nil)
		return
	}
	e.SetObserver(o)
	if !s.sched.Add(e) {
		o.Finish(nil)
	}
}

// addMany arms newly created watches as add does, none observed, under
// one lock and with one wake-up: a batch registration's.
func (s *prober) addMany(ws []*vigil.Watch) {
	es := make([]*scheduler.Entry, 0, len(ws))
	for _, w := range ws {
		if !s.holds(w.ID) {
			continue
		}
		if e := s.entryFor(w); e != nil {
			es = append(es, e)
		}
	}
	s.sched.AddMany(es)
}

// holds reports whether this daemon schedules the watch id: always on one
// daemon; on a replica, when it holds the watch's shard.
func (s *prober) holds(id string) bool {
	return s.cfg.HoldsFunc == nil || s.cfg.HoldsFunc(id)
}

// entryFor returns the scheduler entry of a new pending watch, or nil when
// it has nothing ever due.
func (s *prober) entryFor(w *vigil.Watch) *scheduler.Entry {
	spec, _ := s.cfg.Watchers.Spec(w.Kind)
	now := w.CreatedAt
	if now.IsZero() {
		now = s.now()
	}
	due, ok := firstDue(spec, w.Every, w.StartAt, w.Deadline, now)
	if wt, found := s.cfg.Watchers.Lookup(w.Kind); found {
		if next, cal, err := calendarDue(wt, w.Predicate, w.CreatedAt, now); cal {
			due, ok = next, true
			switch {
			case err != nil:
				// No next fire: its turn comes at once, and settles it
				// errored (see prober.Probe).
				due = now
			case !w.Deadline.IsZero() && due.After(w.Deadline):
				// A deadline is always delivered, whatever the calendar says.
				due = w.Deadline
			}
		}
	}
	if !ok {
		return nil
	}
	e := scheduler.NewEntry(w.ID, w.Kind, w.Every, w.Deadline, spec.Instant)
	e.SetDue(due)
	e.SetProgress(vigil.Progress{Polls: w.Polls, Errors: w.Errors, Consecutive: w.ConsecutiveErrors})
	return e
}

// primeChunk is how many entries prime hands the scheduler at a time, and
// primeParts how many parts of a store's read (pendingStreamer) may wait
// to be loaded.
const (
	primeChunk = 4096
	primeParts = 4
)
