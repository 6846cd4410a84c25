package engine_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vigil-run/vigil"
	"github.com/vigil-run/vigil/store/memstore"
	"github.com/vigil-run/vigil/watcher"
	"github.com/vigil-run/vigil/watcher/watchertest"
)

// TestLiveChecksShownAndKeptOnCancel: a watch whose probes keep saying the
// same thing writes nothing, yet every surface shows the time of its
// latest check and its live poll count (the scheduler knows them), and a
// cancel records them instead of falling back to the stored count.
func TestLiveChecksShownAndKeptOnCancel(t *testing.T) {
	t.Parallel()
	v := newEnv(t, envOpts{watchers: []watcher.Watcher{watchertest.NeverSettles(vigil.KindHTTP)}})
	w := v.register(vigil.RegisterRequest{Kind: vigil.KindHTTP, Predicate: obj(`{}`), Every: "10s", Deadline: "1h"})
	last := t0
	v.tick(t0)
	for i := 1; i <= 4; i++ {
		last = t0.Add(time.Duration(i) * 10 * time.Second)
		v.tick(last)
	}
	got := v.get(w.ID)
	if got.Polls != 5 || !got.CheckedAt.Equal(last) {
		t.Fatalf("after 5 checks: polls %d, checked at %v; want 5 and the latest check, %v", got.Polls, got.CheckedAt, last)
	}
	if got.LastObservation == nil || !got.LastObservation.At.Equal(t0) {
		t.Errorf("last observation %+v; want the first, made at %v (it never changed)", got.LastObservation, t0)
	}
	v.clock.Set(last.Add(3 * time.Second))
	c, err := v.eng.Cancel(v.ctx, w.ID)
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range []*vigil.Watch{c, v.get(w.ID)} {
		if g.State != vigil.StateCancelled || g.Polls != 5 || !g.CheckedAt.Equal(last) {
			t.Errorf("cancelled: %s, polls %d, checked at %v; want cancelled with 5 polls checked at %v", g.State, g.Polls, g.CheckedAt, last)
		}
	}
}

// flaky answers unavailable except on the probes in good.
func flaky(kind vigil.Kind, good func(n int) bool) *watchertest.Fake {
	var n atomic.Int64
	return watchertest.Func(kind, func(_ context.Context, p watcher.Probe) (vigil.Observation, error) {
		if good(int(n.Add(1))) {
			return vigil.Observation{Verdict: vigil.VerdictPending, Summary: "HTTP 503"}, nil
		}
		return vigil.Observation{}, errors.New("connection refused")
	})
}

// TestMaxErrorsCountsConsecutive: max_errors bounds errors in a row. A
// flaky endpoint that answers between its errors is watched on; only an
// unbroken run of max_errors errors settles it errored. Both counts are
// shown while it runs and in the outcome.
func TestMaxErrorsCountsConsecutive(t *testing.T) {
	t.Parallel()
	// Probes 1-2 fail, 3 answers, 4-5 fail, 6 answers, 7-9 fail.
	good := func(n int) bool { return n == 3 || n == 6 }
	v := newEnv(t, envOpts{watchers: []watcher.Watcher{flaky(vigil.KindHTTP, good)}})
	w := v.register(vigil.RegisterRequest{Kind: vigil.KindHTTP, Predicate: obj(`{}`), Every: "1s", Deadline: "1h", MaxErrors: 3})
	probe := func() {
		next, ok := v.sched.NextDue()
		if !ok {
			t.Fatal("nothing scheduled")
		}
		v.tick(next)
	}
	for range 5 {
		probe()
	}
	got := v.get(w.ID)
	if got.State != vigil.StatePending || got.Errors != 4 || got.ConsecutiveErrors != 2 {
		t.Fatalf("after 4 errors, never 3 in a row: %s, errors %d, in a row %d; want pending, 4, 2", got.State, got.Errors, got.ConsecutiveErrors)
	}
	why, err := v.eng.Why(v.ctx, w.ID)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(why.Sentence, "4 of 5 checks could not tell, the last 2 in a row") {
		t.Errorf("Why = %q; want both counts", why.Sentence)
	}
	for range 4 { // 6 answers, 7-9 fail
		probe()
	}
	got = v.get(w.ID)
	if got.State != vigil.StateErrored || got.Outcome.Reason != "max_errors" || got.Errors != 7 || got.ConsecutiveErrors != 3 || got.Polls != 9 {
		t.Fatalf("after 3 errors in a row: %s %+v, errors %d, in a row %d, polls %d; want errored (max_errors), 7, 3, 9",
			got.State, got.Outcome, got.Errors, got.ConsecutiveErrors, got.Polls)
	}
	if !strings.Contains(got.Outcome.Sentence, "3 checks in a row") {
		t.Errorf("outcome %q; want it to say the errors were in a row", got.Outcome.Sentence)
	}
}

// TestErrorCountsSurviveRestart: the error counts written with an
// observation come back at the next start, so max_errors counts on.
func TestErrorCountsSurviveRestart(t *testing.T) {
	t.Parallel()
	st := memstore.New()
	// Each error says something new, so each is written.
	var n atomic.Int64
	fake := watchertest.Func(vigil.KindHTTP, func(context.Context, watcher.Probe) (vigil.Observation, error) {
		return vigil.Observation{}, errors.New("refused, attempt " + string(rune('0'+n.Add(1))))
	})
	v := newEnv(t, envOpts{store: st, watchers: []watcher.Watcher{fake}})
	w := v.register(vigil.RegisterRequest{Kind: vigil.KindHTTP, Predicate: obj(`{}`), Every: "1s", Deadline: "1h", MaxErrors: 3})
	v.tick(t0)
	next, _ := v.sched.NextDue()
	v.tick(next)
	v2 := newEnvAt(t, envOpts{store: st, watchers: []watcher.Watcher{fake}, jitter: func(time.Duration) time.Duration { return 0 }}, next.Add(time.Second))
	if got := v2.get(w.ID); got.Errors != 2 || got.ConsecutiveErrors != 2 {
		t.Fatalf("after a restart: errors %d, in a row %d; want 2, 2", got.Errors, got.ConsecutiveErrors)
	}
	next, _ = v2.sched.NextDue()
	v2.tick(next)
	if got := v2.get(w.ID); got.State != vigil.StateErrored || got.Outcome.Reason != "max_errors" {
		t.Fatalf("the third error in a row, after a restart: %s %+v; want errored (max_errors)", got.State, got.Outcome)
	}
}

// TestDedupHitSaysDeadlineDiffers: registering what is already pending
// returns that watch; when the deadline asked for differs from the one it
// keeps, the answer carries the one asked for, so every surface can say
// so. Without a deadline asked for, or with the same one, it carries none.
func TestDedupHitSaysDeadlineDiffers(t *testing.T) {
	t.Parallel()
	v := newEnv(t, envOpts{watchers: []watcher.Watcher{watchertest.NeverSettles(vigil.KindHTTP)}})
	first := v.register(vigil.RegisterRequest{Kind: vigil.KindHTTP, Predicate: obj(`{"u":1}`), Deadline: "1h"})
	again := v.register(vigil.RegisterRequest{Kind: vigil.KindHTTP, Predicate: obj(`{"u":1}`), Deadline: "2h"})
	if !again.Existing || again.ID != first.ID || !again.Deadline.Equal(t0.Add(time.Hour)) || !again.AskedDeadline.Equal(t0.Add(2*time.Hour)) {
		t.Fatalf("dedup hit with another deadline: existing %v, deadline %v, asked %v; want the first watch, its deadline, and the one asked for",
			again.Existing, again.Deadline, again.AskedDeadline)
	}
	for _, d := range []string{"", "1h"} {
		same := v.register(vigil.RegisterRequest{Kind: vigil.KindHTTP, Predicate: obj(`{"u":1}`), Deadline: d})
		if !same.Existing || !same.AskedDeadline.IsZero() {
			t.Errorf("dedup hit with deadline %q: existing %v, asked %v; want no asked deadline", d, same.Existing, same.AskedDeadline)
		}
	}
}
