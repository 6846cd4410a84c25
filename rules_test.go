package vigil_test

import (
	"testing"
	"time"

	"github.com/vigil-run/vigil"
)

var t0 = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

func TestDecide(t *testing.T) {
	t.Parallel()
	until := &vigil.Watch{Mode: vigil.ModeUntil}
	unless := &vigil.Watch{Mode: vigil.ModeUnless}
	obs := func(v vigil.Verdict) *vigil.Observation { return &vigil.Observation{Verdict: v} }
	one := vigil.Progress{Polls: 1, Streak: 1, Since: t0}
	cases := []struct {
		name  string
		w     *vigil.Watch
		o     *vigil.Observation
		p     vigil.Progress
		final bool
		want  vigil.Decision
	}{
		{"until satisfied fires", until, obs(vigil.VerdictSatisfied), one, false, vigil.Decision{Settle: true, State: vigil.StateFired, Reason: "satisfied"}},
		{"until failed fails", until, obs(vigil.VerdictFailed), vigil.Progress{Polls: 1}, false, vigil.Decision{Settle: true, State: vigil.StateFailed, Reason: "failed", Attention: true}},
		{"until pending waits", until, obs(vigil.VerdictPending), vigil.Progress{Polls: 1}, false, vigil.Decision{}},
		{"until unavailable waits", until, obs(vigil.VerdictUnavailable), vigil.Progress{Polls: 1, Errors: 1}, false, vigil.Decision{}},
		{"until pending at deadline expires", until, obs(vigil.VerdictPending), vigil.Progress{Polls: 1}, true, vigil.Decision{Settle: true, State: vigil.StateExpired, Reason: "deadline"}},
		{"until satisfied at the buzzer fires", until, obs(vigil.VerdictSatisfied), one, true, vigil.Decision{Settle: true, State: vigil.StateFired, Reason: "satisfied"}},
		{"unless satisfied fires with attention", unless, obs(vigil.VerdictSatisfied), one, false, vigil.Decision{Settle: true, State: vigil.StateFired, Reason: "satisfied", Attention: true}},
		{"unless pending at deadline held", unless, obs(vigil.VerdictPending), vigil.Progress{Polls: 1}, true, vigil.Decision{Settle: true, State: vigil.StateFired, Reason: "deadline", Held: true}},
		{"unless unavailable at deadline expires", unless, obs(vigil.VerdictUnavailable), vigil.Progress{Polls: 1, Errors: 1}, true, vigil.Decision{Settle: true, State: vigil.StateExpired, Reason: "deadline"}},
		{"unless failed holds", unless, obs(vigil.VerdictFailed), vigil.Progress{Polls: 1}, false, vigil.Decision{Settle: true, State: vigil.StateFired, Reason: "failed", Held: true}},
		{"permanent errors", until, &vigil.Observation{Verdict: vigil.VerdictUnavailable, Permanent: true}, vigil.Progress{Polls: 1, Errors: 1}, false, vigil.Decision{Settle: true, State: vigil.StateErrored, Reason: "permanent", Attention: true}},
		{"max errors", &vigil.Watch{MaxErrors: 2}, obs(vigil.VerdictUnavailable), vigil.Progress{Polls: 2, Errors: 2, Consecutive: 2}, false, vigil.Decision{Settle: true, State: vigil.StateErrored, Reason: "max_errors", Attention: true}},
		// max_errors bounds errors in a row: a good answer in between
		// started the count again (a flaky endpoint is not a dead one).
		{"max errors counts consecutive ones", &vigil.Watch{MaxErrors: 2}, obs(vigil.VerdictUnavailable), vigil.Progress{Polls: 5, Errors: 4, Consecutive: 1}, false, vigil.Decision{}},
		{"max polls", &vigil.Watch{MaxPolls: 2}, obs(vigil.VerdictPending), vigil.Progress{Polls: 2}, false, vigil.Decision{Settle: true, State: vigil.StateErrored, Reason: "max_polls", Attention: true}},
		{"stable not yet", &vigil.Watch{Stable: 2}, obs(vigil.VerdictSatisfied), one, false, vigil.Decision{}},
		{"stable reached", &vigil.Watch{Stable: 2}, obs(vigil.VerdictSatisfied), vigil.Progress{Polls: 2, Streak: 2, Since: t0.Add(-time.Minute)}, false, vigil.Decision{Settle: true, State: vigil.StateFired, Reason: "satisfied"}},
		{"stable_for not yet", &vigil.Watch{StableFor: time.Minute}, obs(vigil.VerdictSatisfied), vigil.Progress{Polls: 2, Streak: 2, Since: t0.Add(-30 * time.Second)}, false, vigil.Decision{}},
		// Given both, both must hold (docs/api.md).
		{"stable and stable_for: answers enough, not long enough", &vigil.Watch{Stable: 3, StableFor: time.Minute}, obs(vigil.VerdictSatisfied), vigil.Progress{Polls: 5, Streak: 5, Since: t0.Add(-30 * time.Second)}, false, vigil.Decision{}},
		{"stable and stable_for: long enough, answers too few", &vigil.Watch{Stable: 3, StableFor: time.Minute}, obs(vigil.VerdictSatisfied), vigil.Progress{Polls: 2, Streak: 2, Since: t0.Add(-2 * time.Minute)}, false, vigil.Decision{}},
		{"stable and stable_for: both", &vigil.Watch{Stable: 3, StableFor: time.Minute}, obs(vigil.VerdictSatisfied), vigil.Progress{Polls: 3, Streak: 3, Since: t0.Add(-time.Minute)}, false, vigil.Decision{Settle: true, State: vigil.StateFired, Reason: "satisfied"}},
		{"standing never settles", &vigil.Watch{Standing: true}, obs(vigil.VerdictSatisfied), one, true, vigil.Decision{}},
		{"standing errors when it can never be observed", &vigil.Watch{Standing: true}, &vigil.Observation{Verdict: vigil.VerdictUnavailable, Permanent: true}, vigil.Progress{Polls: 1, Errors: 1}, false, vigil.Decision{Settle: true, State: vigil.StateErrored, Reason: "permanent", Attention: true}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := vigil.Decide(c.w, c.o, c.p, t0, c.final); got != c.want {
				t.Errorf("Decide = %+v, want %+v", got, c.want)
			}
		})
	}
}

// TestAdvanceCountsErrors: every unavailable answer counts in Errors and
// Consecutive; any other answer resets Consecutive only.
func TestAdvanceCountsErrors(t *testing.T) {
	t.Parallel()
	var p vigil.Progress
	for _, v := range []vigil.Verdict{vigil.VerdictUnavailable, vigil.VerdictUnavailable, vigil.VerdictPending, vigil.VerdictUnavailable} {
		p = p.Advance(v, t0)
	}
	if p.Polls != 4 || p.Errors != 3 || p.Consecutive != 1 {
		t.Errorf("after 2 errors, a pending answer and an error: %+v, want 4 polls, 3 errors, 1 consecutive", p)
	}
}

func TestNextDue(t *testing.T) {
	t.Parallel()
	s := time.Second
	cases := []struct {
		name     string
		due, now time.Time
		errs     int
		deadline time.Time
		want     time.Time
	}{
		{"on the grid", t0, t0.Add(2 * s), 0, time.Time{}, t0.Add(30 * s)},
		{"skips missed slots", t0, t0.Add(65 * s), 0, time.Time{}, t0.Add(90 * s)},
		{"exactly on a slot skips it", t0, t0.Add(30 * s), 0, time.Time{}, t0.Add(60 * s)},
		{"first error doubles", t0, t0, 1, time.Time{}, t0.Add(60 * s)},
		{"third error", t0, t0, 3, time.Time{}, t0.Add(240 * s)},
		{"capped at 10x", t0, t0, 9, time.Time{}, t0.Add(300 * s)},
		{"never past the deadline", t0, t0, 0, t0.Add(10 * s), t0.Add(10 * s)},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := vigil.NextDue(c.due, c.now, 30*s, c.errs, 10, c.deadline); !got.Equal(c.want) {
				t.Errorf("NextDue = %v, want %v", got.Sub(t0), c.want.Sub(t0))
			}
		})
	}
}

// TestNextDueLongBackoff: a backoff of capN intervals longer than the
// longest duration (an every of 30 years, which a max_deadline of a
// century allows) stops there rather than wrapping around into the past,
// and neither does the doubling; with a deadline it is the deadline.
func TestNextDueLongBackoff(t *testing.T) {
	t.Parallel()
	year := 365 * 24 * time.Hour
	for _, errs := range []int{1, 2, 5, 60} {
		for _, every := range []time.Duration{30 * year, 100 * year} {
			if got := vigil.NextDue(t0, t0, every, errs, 10, time.Time{}); !got.After(t0.Add(every)) {
				t.Errorf("every %v, %d errors: next due %v, want past %v", every, errs, got, t0.Add(every))
			}
			if got := vigil.NextDue(t0, t0, every, errs, 10, t0.Add(every)); !got.Equal(t0.Add(every)) {
				t.Errorf("every %v, %d errors, deadline an interval on: next due %v, want the deadline", every, errs, got)
			}
		}
	}
}

func TestProgressAdvance(t *testing.T) {
	t.Parallel()
	var p vigil.Progress
	p = p.Advance(vigil.VerdictUnavailable, t0)
	p = p.Advance(vigil.VerdictUnavailable, t0)
	if p.Consecutive != 2 || p.Errors != 2 {
		t.Fatalf("after two unavailable: %+v", p)
	}
	p = p.Advance(vigil.VerdictSatisfied, t0.Add(time.Second))
	p = p.Advance(vigil.VerdictSatisfied, t0.Add(2*time.Second))
	if p.Consecutive != 0 || p.Streak != 2 || !p.Since.Equal(t0.Add(time.Second)) || p.Polls != 4 {
		t.Fatalf("after two satisfied: %+v", p)
	}
	p = p.Advance(vigil.VerdictPending, t0)
	if p.Streak != 0 || !p.Since.IsZero() {
		t.Fatalf("pending did not reset the streak: %+v", p)
	}
}

func TestTransition(t *testing.T) {
	t.Parallel()
	if !vigil.Transition(vigil.StatePending, vigil.StateFired) {
		t.Error("pending → fired refused")
	}
	for _, from := range []vigil.State{vigil.StateFired, vigil.StateCancelled, vigil.StateExpired} {
		if vigil.Transition(from, vigil.StateCancelled) || vigil.Transition(from, vigil.StatePending) {
			t.Errorf("a settled watch (%s) may move", from)
		}
	}
	if vigil.Transition(vigil.StatePending, vigil.StateUnwatchable) {
		t.Error("unwatchable is a view, never written")
	}
}

// TestAdvanceReadCountsReadsOnce: satisfied answers repeating one cached
// read count once toward the streak (and still as polls); a new read, or
// a kind that reads afresh (zero Read), counts again; a break forgets
// the read.
func TestAdvanceReadCountsReadsOnce(t *testing.T) {
	t.Parallel()
	r1, r2 := t0, t0.Add(30*time.Second)
	var p vigil.Progress
	p = p.AdvanceRead(vigil.VerdictSatisfied, r1, t0)
	p = p.AdvanceRead(vigil.VerdictSatisfied, r1, t0.Add(10*time.Second))
	p = p.AdvanceRead(vigil.VerdictSatisfied, r1, t0.Add(20*time.Second))
	if p.Streak != 1 || p.Polls != 3 || !p.Since.Equal(t0) {
		t.Fatalf("one read answered thrice: streak %d, polls %d, since %v; want 1, 3, %v", p.Streak, p.Polls, p.Since, t0)
	}
	p = p.AdvanceRead(vigil.VerdictSatisfied, r2, t0.Add(30*time.Second))
	if p.Streak != 2 {
		t.Fatalf("a new read: streak %d, want 2", p.Streak)
	}
	p = p.AdvanceRead(vigil.VerdictPending, r2, t0.Add(40*time.Second))
	p = p.AdvanceRead(vigil.VerdictSatisfied, r2, t0.Add(50*time.Second))
	if p.Streak != 1 {
		t.Fatalf("after a break: streak %d, want 1", p.Streak)
	}
	var q vigil.Progress
	for i := range 3 {
		q = q.AdvanceRead(vigil.VerdictSatisfied, time.Time{}, t0.Add(time.Duration(i)*time.Second))
	}
	if q.Streak != 3 {
		t.Fatalf("fresh reads: streak %d, want 3", q.Streak)
	}
}
