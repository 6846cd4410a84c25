package vigil

import (
	"math"
	"time"
)

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
	// Read is the Observation.Read of the latest satisfied answer of the
	// streak (zero for a watcher that reads afresh each probe).
	Read time.Time
}

// Decision is what one observation does to a watch.
type Decision struct {
	Settle    bool
	State     State
	Reason    string
	Held      bool
	Attention bool
}

// Advance returns p updated with one more observation made at now, read
// afresh by its probe.
func (p Progress) Advance(v Verdict, now time.Time) Progress {
	return p.AdvanceRead(v, time.Time{}, now)
}

// AdvanceRead returns p updated with one more observation made at now,
// whose answer was read from its source at read (Observation.Read; zero:
// afresh by this probe). A satisfied answer read at the same instant as
// the streak's latest one is that same read, answered again from a
// cache: it counts as a probe but not again toward the streak, so stable
// answers are that many reads of the source, not that many probes of a
// cached read (a flappy CI seen green once). stable_for, which is time,
// is unchanged.
func (p Progress) AdvanceRead(v Verdict, read, now time.Time) Progress {
	p.Polls++
	p.At = now
	switch v {
	case VerdictSatisfied:
		switch {
		case p.Streak == 0:
			p.Since = now
			p.Streak = 1
		case read.IsZero() || !read.Equal(p.Read):
			p.Streak++
		}
		p.Read = read
	case VerdictUnavailable:
		p.Errors++
		p.Consecutive++
		p.Streak, p.Since, p.Read = 0, time.Time{}, time.Time{}
		return p
	default:
		p.Streak, p.Since, p.Read = 0, time.Time{}, time.Time{}
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
		// capN × every, and the doubling, stop at the longest duration:
		// past it they wrapped around to a negative backoff (an every of
		// 30 years, which a max_deadline of a century allows), due at
		// once, and an unavailable watch was probed without pause.
		limit := time.Duration(math.MaxInt64)
		if capN <= 0 || every <= limit/time.Duration(capN) {
			limit = time.Duration(capN) * every
		}
		d := every
		for i := 0; i < consecutiveErrors && d < limit; i++ {
			if d > limit/2 {
				d = limit
				break
			}
			d *= 2
		}
		d = min(d, limit)
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

// The registration defaults: how a request's mode, interval, deadline and
// stability window are resolved against its kind's spec and the limits.
// The engine applies them, in this order, after checking the request; each
// is pure, and a refusal is a *Error naming the field.

// ResolveMode returns the mode a watch of kind registers with: asked, or
// until by default. unless is refused for standing and instant kinds.
func ResolveMode(kind Kind, spec KindSpec, asked Mode) (Mode, error) {
	mode := asked
	switch mode {
	case "":
		mode = ModeUntil
	case ModeUntil, ModeUnless:
	default:
		return "", FieldErrorf(CodeInvalidRequest, "mode", "mode must be \"until\" or \"unless\", not %q", clip(string(mode)))
	}
	if mode == ModeUnless && (spec.Standing || spec.Instant) {
		return "", FieldErrorf(CodeInvalidRequest, "mode", "%s watches do not take mode \"unless\"", kind)
	}
	return mode, nil
}

// ResolveEvery returns a watch's probe interval: asked (a duration, at
// least l.MinEvery and at most l.MaxDeadline), else the one its predicate
// names (fromPredicate, a schedule's), else the kind's default. A kind not
// probed on an interval (spec.Every zero) has none and refuses one.
func ResolveEvery(kind Kind, spec KindSpec, fromPredicate time.Duration, asked string, l Limits) (time.Duration, error) {
	every := spec.Every
	if fromPredicate > 0 && spec.Every > 0 {
		every = fromPredicate
	}
	if asked == "" {
		return every, nil
	}
	if spec.Every == 0 {
		return 0, FieldErrorf(CodeInvalidRequest, "every", "%s watches are not probed on an interval; leave every out", kind)
	}
	d, err := ParseDuration(asked)
	if err != nil {
		return 0, FieldErrorf(CodeInvalidRequest, "every", "every: %v", err)
	}
	if d < l.MinEvery {
		return 0, FieldErrorf(CodeIntervalTooSmall, "every", "every %s is below the floor of %s (min_every)", FormatDuration(d), FormatDuration(l.MinEvery))
	}
	if d > l.MaxDeadline {
		return 0, FieldErrorf(CodeInvalidRequest, "every", "every %s is longer than the longest deadline, %s", FormatDuration(d), FormatDuration(l.MaxDeadline))
	}
	return d, nil
}

// ResolveDeadline returns a watch's deadline, the one place its default is
// resolved: asked (a duration from now or an RFC 3339 instant), else the
// kind's default from now (from start, for a kind whose deadline counts
// from it), else none (zero). start is when the watch starts (zero: at
// once; a timer's instant). A standing kind refuses a deadline; the
// deadline must be in the future, not before start, and at most
// l.MaxDeadline after the later of now and start, which is itself at most
// l.MaxDeadline away.
func ResolveDeadline(kind Kind, spec KindSpec, asked string, start, now time.Time, l Limits) (time.Time, error) {
	from := now
	if start.After(now) {
		from = start
		if start.Sub(now) > l.MaxDeadline {
			return time.Time{}, FieldErrorf(CodeDeadlineOutOfRange, "predicate.at", "the timer is more than %s away (max_deadline)", FormatDuration(l.MaxDeadline))
		}
	}
	var deadline time.Time
	switch {
	case asked != "" && spec.Standing:
		return time.Time{}, FieldErrorf(CodeInvalidRequest, "deadline", "%s watches are standing: they end when cancelled, not at a deadline", kind)
	case asked != "":
		var err error
		if deadline, err = parseDeadline(asked, now); err != nil {
			return time.Time{}, err
		}
	case spec.Deadline > 0 && spec.DeadlineFromStart && !start.IsZero():
		deadline = from.Add(spec.Deadline)
	case spec.Deadline > 0:
		deadline = now.Add(spec.Deadline)
	}
	if deadline.IsZero() {
		return deadline, nil
	}
	if !deadline.After(now) {
		return time.Time{}, FieldErrorf(CodeDeadlineOutOfRange, "deadline", "deadline %s is not in the future", FormatTime(deadline))
	}
	if !start.IsZero() && deadline.Before(start) {
		return time.Time{}, FieldErrorf(CodeDeadlineOutOfRange, "deadline", "deadline %s comes before the watch starts, %s", FormatTime(deadline), FormatTime(start))
	}
	if deadline.Sub(from) > l.MaxDeadline {
		return time.Time{}, FieldErrorf(CodeDeadlineOutOfRange, "deadline", "deadline is more than %s away (max_deadline)", FormatDuration(l.MaxDeadline))
	}
	return deadline, nil
}

// parseDeadline reads a duration from now or an RFC 3339 instant.
func parseDeadline(s string, now time.Time) (time.Time, error) {
	// Kept to the millisecond, rounded up: cut down, a deadline came
	// before the one asked, and an answer in between was refused as late.
	if t, err := ParseTime(s); err == nil {
		return CeilMillisecond(t), nil
	}
	d, err := ParseDuration(s)
	if err != nil {
		return time.Time{}, FieldErrorf(CodeInvalidRequest, "deadline", "deadline must be a duration like 2h or an RFC 3339 time: %v", err)
	}
	if d <= 0 {
		return time.Time{}, FieldErrorf(CodeDeadlineOutOfRange, "deadline", "deadline must be in the future")
	}
	return CeilMillisecond(now.Add(d)), nil
}

// CeilMillisecond returns the first whole millisecond at or after t: how
// an instant asked for finer than vigil keeps it (a timer's, a deadline's)
// is rounded, so that nothing comes before the instant asked.
func CeilMillisecond(t time.Time) time.Time {
	if c := t.Truncate(time.Millisecond); c.Before(t) {
		return c.Add(time.Millisecond)
	}
	return t
}

// ResolveStableFor returns how long a watch's satisfied answers must hold
// (asked, a duration of at most l.MaxDeadline; zero by default). Stability
// (stable answers or a stable_for) applies only to a watch probed on an
// interval (every).
func ResolveStableFor(kind Kind, asked string, stable int, every time.Duration, l Limits) (time.Duration, error) {
	var stableFor time.Duration
	if asked != "" {
		var err error
		if stableFor, err = ParseDuration(asked); err != nil {
			return 0, FieldErrorf(CodeInvalidRequest, "stable_for", "stable_for: %v", err)
		}
		if stableFor > l.MaxDeadline {
			return 0, FieldErrorf(CodeInvalidRequest, "stable_for", "stable_for is longer than the longest deadline")
		}
	}
	if (stable > 0 || stableFor > 0) && every == 0 {
		return 0, FieldErrorf(CodeInvalidRequest, "stable", "%s watches are not probed repeatedly; stability does not apply", kind)
	}
	return stableFor, nil
}

// clip shortens a name quoted in a refusal.
func clip(s string) string {
	if len(s) > 40 {
		return s[:40] + "…"
	}
	return s
}
