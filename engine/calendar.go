package engine

import (
	"context"
	"encoding/json"
	"time"

	"github.com/vigil-run/vigil"
	"github.com/vigil-run/vigil/scheduler"
	"github.com/vigil-run/vigil/watcher"
	"github.com/vigil-run/vigil/wording"
)

// NextDuer is implemented by watchers whose watches come due on their own
// calendar rather than every Every: a schedule's cron expression or
// interval. The engine asks it when a watch is first due, and after
// each probe when it is due next, so a fire that came due while the last
// one still ran is skipped, never queued.
type NextDuer interface {
	// NextDue returns the first instant strictly after now at which the
	// watch with this predicate is due; anchor is the instant its calendar
	// counts from (its creation), which an interval keeps its grid on. An
	// error says why no next instant can be found (a predicate that no
	// longer reads, a calendar with no fire ahead): the watch could never
	// fire again, and settles errored, saying so, at its next turn
	// instead of staying pending without one.
	NextDue(predicate json.RawMessage, anchor, now time.Time) (next time.Time, err error)
}

// Noter is implemented by standing watchers whose satisfied answers are
// notes rather than changes (a schedule's fires): they are mailed as
// "note" messages instead of "changed" ones.
type Noter interface {
	// Notes reports whether satisfied answers are notes.
	Notes() bool
}

// Recorder is implemented by watchers whose watches keep their answer,
// and when it came, while no daemon runs (a run's status file, written by
// its supervisor). A watch whose deadline passed while the daemon was down
// is settled at the next start by the answer its watcher recorded by the
// deadline, instead of expiring.
type Recorder interface {
	// Recorded returns the answer recorded for the watch probed by p
	// that came by deadline: a satisfied or failed observation. ok is
	// false when there is none (nothing recorded, or it came after the
	// deadline).
	Recorded(p watcher.Probe, deadline time.Time) (obs vigil.Observation, ok bool)
}

// calendarDue asks wt, if it keeps its own calendar (calendar is true),
// when the watch is due next after now; err says why it never is.
func calendarDue(wt watcher.Watcher, predicate json.RawMessage, anchor, now time.Time) (next time.Time, calendar bool, err error) {
	nd, ok := wt.(NextDuer)
	if !ok {
		return time.Time{}, false, nil
	}
	next, err = nd.NextDue(predicate, anchor, now)
	return next, true, err
}

// noNextFire is the outcome of a watch whose calendar has no next instant
// (NextDuer's error): it could never fire again, so it settles errored,
// saying why, as a permanent error does, instead of staying pending
// without ever being due.
func noNextFire(err error, now time.Time) *vigil.Outcome {
	obs := &vigil.Observation{Verdict: vigil.VerdictUnavailable, At: now, Permanent: true,
		Reason: watcher.Clip("its next fire cannot be computed: "+err.Error(), 512)}
	return &vigil.Outcome{State: vigil.StateErrored, Reason: "permanent", Attention: true, Observation: obs}
}

// standingMessage returns the type and text of the message a standing
// watch's satisfied answer leaves.
func standingMessage(wt watcher.Watcher, w *vigil.Watch, obs *vigil.Observation) (vigil.MessageType, string) {
	if n, ok := wt.(Noter); ok && n.Notes() {
		return vigil.MessageNote, wording.Note(w, obs)
	}
	return vigil.MessageChanged, wording.Changed(w, obs)
}

// laterOf returns the later of a and b.
func laterOf(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// primeCalendar arms the pending watches whose watchers keep their own
// calendar, at their next instant after now: it reads their predicates,
// a batch at a time.
func (s *prober) primeCalendar(ctx context.Context, rows []vigil.ScheduleEntry, now time.Time) ([]*scheduler.Entry, error) {
	var out []*scheduler.Entry
	for len(rows) > 0 {
		n := min(len(rows), s.cfg.BatchSize)
		batch := rows[:n]
		rows = rows[n:]
		ids := make([]string, len(batch))
		for i, r := range batch {
			ids[i] = r.ID
		}
		ws, err := s.cfg.Store.WatchGetMany(ctx, ids)
		if err != nil {
			return nil, err
		}
		for _, w := range ws {
			wt, ok := s.cfg.Watchers.Lookup(w.Kind)
			if !ok || w.State != vigil.StatePending {
				continue
			}
			next, _, err := calendarDue(wt, w.Predicate, w.CreatedAt, now)
			if err != nil {
				// Its turn comes at once, and settles it errored (see
				// prober.Probe).
				s.log.Warn("a pending watch has no next fire; it settles errored", "watch_id", w.ID, "kind", w.Kind, "err", err)
				next = now
			} else if !w.Deadline.IsZero() && next.After(w.Deadline) {
				next = w.Deadline
			}
			spec, _ := s.cfg.Watchers.Spec(w.Kind)
			e := scheduler.NewEntry(w.ID, w.Kind, w.Every, w.Deadline, spec.Instant)
			e.SetDue(next)
			e.SetProgress(vigil.Progress{Polls: w.Polls, Errors: w.Errors, Consecutive: w.ConsecutiveErrors})
			out = append(out, e)
		}
	}
	return out, nil
}
