package engine

import (
	"context"
	"errors"

	"github.com/vigil-run/vigil"
)

// notSettled is answer's error when the store could not write the
// settlement: the store's own word when it has one (storage_full), else
// unavailable, which a caller tries again (a retry that finds it written
// after all is told the token was used).
func notSettled(err error) error {
	var ve *vigil.Error
	if errors.As(err, &ve) && ve.Code != vigil.CodeInternal {
		return err
	}
	return &vigil.Error{Code: vigil.CodeUnavailable, Err: err,
		Message: "the completion could not be recorded just now: try again (if it was recorded after all, the retry is told the token was used)"}
}

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
	if s.cfg.CheckFunc != nil {
		// As before a probe: a watch whose token was revoked (or has
		// expired, or is gone) is cancelled silently, not settled and
		// delivered on an answer its maker may no longer give.
		if err := s.cfg.CheckFunc(ctx, w); err != nil {
			if _, stop := errors.AsType[*vigil.StopError](err); stop {
				s.stop(ctx, e, w, err, now)
				return false, nil
			}
			s.sched.Retry(e, e.Due())
			return false, notSettled(err)
		}
	}
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
		return false, notSettled(err)
	}
	if won[0] && !mine {
		s.sched.Remove(w.ID)
	}
	return won[0], nil
}
