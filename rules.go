package vigil

import "time"

// Progress is what the scheduler remembers about a pending watch between
// probes. It lives in memory only.
type Progress struct {
	// Polls counts probes, including this one.
	Polls int
	// Errors counts unavailable answers, including this one.
	Errors int
	// Consecutive counts unavailable answers since the last other answer.
	Consecutive int
	// Streak counts consecutive satisfied answers, including this one.
	Streak int
	// Since is when the current satisfied streak began.
	Since time.Time
	// At is when the latest probe was made.
	At time.Time
}

// Decision is what one observation does to a watch.
type Decision struct {
	Settle    bool
	State     State
	Reason    string
	Held      bool
	Attention bool
}

// Advance returns p updated with one more observation made at now.
func (p Progress) Advance(v Verdict, now time.Time) Progress {
	p.Polls++
	p.At = now
	switch v {
	case VerdictSatisfied:
		if p.Streak == 0 {
			p.Since = now
		}
		p.Streak++
	case VerdictUnavailable:
		p.Errors++
		p.Consecutive++
		p.Streak, p.Since = 0, time.Time{}
		return p
	default:
		p.Streak, p.Since = 0, time.Time{}
	}
	p.Consecutive = 0
	return p
}

// Decide applies SPEC §1.2–§1.3 to one observation of w. p must already
// include obs (see Progress.Advance). final is true for the probe made at
// the deadline: an answer there still counts, and no answer expires the
// watch. Decide is pure.
func Decide(w *Watch, obs *Observation, p Progress, now time.Time, final bool) Decision {
	unless := w.Mode == ModeUnless
	if w.Standing {
		// A standing watch ends only by cancel, or when it can never be
		// observed again (the repository is gone, the token is bad).
		if obs.Verdict == VerdictUnavailable && obs.Permanent {
			return Decision{Settle: true, State: StateErrored, Reason: "permanent", Attention: true}
		}
		return Decision{}
	}
	switch obs.Verdict {
	case VerdictSatisfied:
		stable := p.Streak >= max(w.Stable, 1) && (w.StableFor == 0 || now.Sub(p.Since) >= w.StableFor)
		if stable {
			return Decision{Settle: true, State: StateFired, Reason: "satisfied", Attention: unless}
		}
	case VerdictFailed:
		if unless {
			// What we watch for can now never happen: the window holds.
			return Decision{Settle: true, State: StateFired, Reason: "failed", Held: true}
		}
		return Decision{Settle: true, State: StateFailed, Reason: "failed", Attention: true}
	case VerdictUnavailable:
		if obs.Permanent {
			return Decision{Settle: true, State: StateErrored, Reason: "permanent", Attention: true}
		}
		// max_errors bounds the errors in a row: any answer that could
		// tell starts the count again.
		if w.MaxErrors > 0 && p.Consecutive >= w.MaxErrors {
			return Decision{Settle: true, State: StateErrored, Reason: "max_errors", Attention: true}
		}
	}
	if final {
		if unless && obs.Verdict == VerdictPending {
			return Decision{Settle: true, State: StateFired, Reason: "deadline", Held: true}
		}
		return Decision{Settle: true, State: StateExpired, Reason: "deadline"}
	}
	if w.MaxPolls > 0 && p.Polls >= w.MaxPolls {
		return Decision{Settle: true, State: StateErrored, Reason: "max_polls", Attention: true}
	}
	return Decision{}
}

// NextDue returns when a watch probed at due (and answered at now) is due
// next. Pending answers keep a fixed cadence from due, skipping slots that
// already passed, so the schedule never drifts. Unavailable answers back off:
// every × 2^n for the n-th consecutive one, capped at capN × every. The
// result never passes the deadline (a zero deadline means none).
func NextDue(due, now time.Time, every time.Duration, consecutiveErrors, capN int, deadline time.Time) time.Time {
	var next time.Time
	if consecutiveErrors > 0 {
		d := every
		for i := 0; i < consecutiveErrors && d < time.Duration(capN)*every; i++ {
			d *= 2
		}
		d = min(d, time.Duration(capN)*every)
		next = now.Add(d)
	} else {
		next = due.Add(every)
		if !next.After(now) {
			skip := now.Sub(due)/every + 1
			next = due.Add(skip * every)
		}
	}
	if !deadline.IsZero() && next.After(deadline) {
		next = deadline
	}
	return next
}

// Transition reports whether a watch may move from one state to another:
// only pending moves, and only to a terminal state.
func Transition(from, to State) bool { return from == StatePending && to.Terminal() }
