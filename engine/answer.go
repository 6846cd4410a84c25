package engine

import (
	"context"
	"errors"

	"github.com/vigil-run/vigil"
)

// errNotSettled is Answer's error when the store could not settle.
var errNotSettled = errors.New("scheduler: the store could not settle the watch")

// errPastDeadline is answer's error for an observation that came after
// the watch's deadline: the deadline is final, and the watch expires.
var errPastDeadline = errors.New("engine: the answer came after the watch's deadline")

// answer settles the pending watch w on an observation that arrived from
// outside a probe (a token watch's completion), exactly as a probe's answer
// would: decided by the same rules, persisted with its outcome message in
// one transaction, then delivered. It reports whether this call settled
// the watch: false, with no error, when the watch was already settled
// (the store's compare-and-set lost) or when obs does not settle it.
//
// An answer that comes after the watch's deadline settles nothing
// (errPastDeadline), though the watch may still read pending: its expiry,
// due at the deadline, is on its way. A deadline is final; one that came
// at the deadline itself is in time, as the final probe's would be.
func (s *prober) answer(ctx context.Context, w *vigil.Watch, obs vigil.Observation) (bool, error) {
	now := s.now()
	if !w.Deadline.IsZero() && now.After(w.Deadline) {
		return false, errPastDeadline
	}
	if obs.At.IsZero() {
		obs.At = now
	}
	e, mine := s.sched.Take(w.ID, w.Every)
	prog := e.Progress().Advance(obs.Verdict, now)
	d := vigil.Decide(w, &obs, prog, now, false)
	if d.Settle {
		w.Errors, w.ConsecutiveErrors, w.CheckedAt = prog.Errors, prog.Consecutive, now
	}
	if !d.Settle {
		s.sched.Retry(e, e.Due())
		return false, nil
	}
	out := &vigil.Outcome{State: d.State, Reason: d.Reason, Held: d.Held, Attention: d.Attention, Observation: &obs}
	// Answered: on a replica that does not hold the watch's shard too (a
	// completion may reach any replica); its holder delivers it.
	won, err := s.commit(ctx, []settlement{{e: e, w: w, out: out, polls: prog.Polls, answered: true}}, now)
	if err != nil {
		return false, errNotSettled
	}
	if won[0] && !mine {
		s.sched.Remove(w.ID)
	}
	return won[0], nil
}
