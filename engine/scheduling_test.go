package engine_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/vigil-run/vigil"
	"github.com/vigil-run/vigil/watcher"
	httpwatch "github.com/vigil-run/vigil/watcher/http"
	"github.com/vigil-run/vigil/watcher/watchertest"
)

func TestEmptySchedulerHasNoWake(t *testing.T) {
	t.Parallel()
	v := newEnv(t, envOpts{})
	if next, ok := v.sched.NextDue(); ok {
		t.Fatalf("NextDue() = %v, true; want none on an empty heap", next)
	}
	if n := v.tick(t0.Add(time.Hour)); n != 0 {
		t.Fatalf("Tick(+1h) evaluated %d watches, want 0", n)
	}
	if _, ok := v.sched.NextDue(); ok {
		t.Fatal("NextDue() reports a wake after an empty tick")
	}
}

func TestFiftyWatchesProbedOnlyWhenDue(t *testing.T) {
	t.Parallel()
	fake := watchertest.NeverSettles(vigil.KindHTTP)
	v := newEnv(t, envOpts{watchers: []watcher.Watcher{fake}})
	ids := make([]string, 50)
	for i := range ids {
		// Spread registrations over 5 s so due times differ.
		v.clock.Set(t0.Add(time.Duration(i) * 100 * time.Millisecond))
		ids[i] = v.register(vigil.RegisterRequest{Kind: vigil.KindHTTP, Predicate: obj(fmt.Sprintf(`{"n":%d}`, i)), Every: "30s"}).ID
	}
	// The first probe of each runs at once.
	v.tick(t0.Add(5 * time.Second))
	for _, id := range ids {
		if got := fake.Probes(id); got != 1 {
			t.Fatalf("after registration, watch %s probed %d times, want 1", id, got)
		}
	}
	next, ok := v.sched.NextDue()
	if want := t0.Add(30 * time.Second); !ok || !next.Equal(want) {
		t.Fatalf("NextDue() = %v, %v; want the earliest due %v", next, ok, want)
	}
	for s := 6; s <= 15; s++ {
		v.tick(t0.Add(time.Duration(s) * time.Second))
	}
	if got := fake.Total(); got != 50 {
		t.Fatalf("probes in the 10 s after the first round = %d, want 0 (total %d, want 50)", got-50, got)
	}
	v.tickEach(100*time.Millisecond, t0.Add(35*time.Second))
	for _, id := range ids {
		if got := fake.Probes(id); got != 2 {
			t.Fatalf("watch %s probed %d times by +35s, want exactly 2", id, got)
		}
	}
}

func TestCadenceDoesNotDrift(t *testing.T) {
	t.Parallel()
	fake := watchertest.NeverSettles(vigil.KindHTTP)
	v := newEnv(t, envOpts{watchers: []watcher.Watcher{fake}})
	w := v.register(vigil.RegisterRequest{Kind: vigil.KindHTTP, Predicate: obj(`{}`), Every: "30s", Deadline: "1h"})
	// Every tick comes 5 s late (a busy machine): the schedule still keeps
	// its 30 s grid instead of sliding to 35 s.
	for {
		next, ok := v.sched.NextDue()
		if !ok || !next.Before(t0.Add(10*time.Minute)) {
			break
		}
		v.tick(next.Add(5 * time.Second))
	}
	if got := fake.Probes(w.ID); got != 20 {
		t.Fatalf("a 30 s watch over 10 min was probed %d times, want 20", got)
	}
}

func TestTimerFiresOnceWithoutProbing(t *testing.T) {
	t.Parallel()
	v := newEnv(t, envOpts{})
	w := v.register(vigil.RegisterRequest{Kind: vigil.KindTimer, Predicate: obj(`{"in":"40m"}`), Note: "check the deploy"})
	if want := t0.Add(41 * time.Minute); !w.Deadline.Equal(want) {
		t.Fatalf("timer deadline = %v, want at + 1 min = %v", w.Deadline, want)
	}
	if n := v.tick(t0.Add(40*time.Minute - time.Millisecond)); n != 0 {
		t.Fatalf("a timer was evaluated %d times before its instant", n)
	}
	if n := v.tick(t0.Add(40 * time.Minute)); n != 1 {
		t.Fatalf("Tick at the timer's instant evaluated %d, want 1", n)
	}
	got := v.get(w.ID)
	if got.State != vigil.StateFired {
		t.Fatalf("40-min timer state = %s, want fired", got.State)
	}
	v.tick(t0.Add(2 * time.Hour))
	msgs := v.messages("agent-1")
	if len(msgs) != 1 || msgs[0].Type != vigil.MessageFired || !strings.Contains(msgs[0].Text, "check the deploy") {
		t.Fatalf("mailbox = %+v, want one fired message carrying the note", msgs)
	}
	if _, ok := v.sched.NextDue(); ok {
		// Only the retention entry may remain.
		if next, _ := v.sched.NextDue(); next.Before(t0.Add(24 * time.Hour)) {
			t.Fatalf("after the timer fired the scheduler still wakes at %v", next)
		}
	}
}

func TestDefaultDeadlineAppliesExactly(t *testing.T) {
	t.Parallel()
	fake := watchertest.NeverSettles(vigil.KindHTTP)
	v := newEnv(t, envOpts{watchers: []watcher.Watcher{fake}})
	w := v.register(vigil.RegisterRequest{Kind: vigil.KindHTTP, Predicate: obj(`{}`), Every: "1m"})
	spec := httpwatch.Descriptor().Spec
	deadline := t0.Add(spec.Deadline)
	if !w.Deadline.Equal(deadline) {
		t.Fatalf("default deadline = %v, want %v", w.Deadline, deadline)
	}
	v.tickEach(time.Second, deadline.Add(-time.Second))
	if got := v.get(w.ID).State; got != vigil.StatePending {
		t.Fatalf("1 s before the deadline state = %s, want pending", got)
	}
	v.tickEach(time.Second, deadline.Add(time.Second))
	got := v.get(w.ID)
	if got.State != vigil.StateExpired {
		t.Fatalf("1 s after the deadline state = %s, want expired", got.State)
	}
	msgs := v.messages("agent-1")
	if len(msgs) != 1 || msgs[0].Type != vigil.MessageExpired {
		t.Fatalf("mailbox = %+v, want one expired message", msgs)
	}

	// A caller's longer deadline is honoured.
	w2 := v.register(vigil.RegisterRequest{Kind: vigil.KindHTTP, Predicate: obj(`{"b":1}`), Every: "1m", Deadline: "2h"})
	if want := v.clock.Now().Add(2 * time.Hour); !w2.Deadline.Equal(want) {
		t.Fatalf("deadline 2h = %v, want %v", w2.Deadline, want)
	}
	v.tickEach(time.Minute, v.clock.Now().Add(time.Hour))
	if got := v.get(w2.ID).State; got != vigil.StatePending {
		t.Fatalf("a 2 h watch after 1 h is %s, want pending", got)
	}
}

func TestExpiryWordingDiffersFromFailure(t *testing.T) {
	t.Parallel()
	v := newEnv(t, envOpts{watchers: []watcher.Watcher{watchertest.NeverSettles(vigil.KindHTTP), watchertest.Fails(vigil.KindTCP)}})
	exp := v.register(vigil.RegisterRequest{Kind: vigil.KindHTTP, Predicate: obj(`{}`), Deadline: "30s"})
	fail := v.register(vigil.RegisterRequest{Kind: vigil.KindTCP, Predicate: obj(`{}`)})
	v.tickEach(time.Second, t0.Add(time.Minute))
	e, f := v.get(exp.ID), v.get(fail.ID)
	if e.State != vigil.StateExpired || f.State != vigil.StateFailed {
		t.Fatalf("states = %s, %s; want expired, failed", e.State, f.State)
	}
	if e.Outcome.Sentence == f.Outcome.Sentence || !strings.Contains(e.Outcome.Sentence, "deadline") || !strings.Contains(f.Outcome.Sentence, "failed") {
		t.Fatalf("expiry %q and failure %q must read differently", e.Outcome.Sentence, f.Outcome.Sentence)
	}
}

func TestUnlessHeldThroughWindow(t *testing.T) {
	t.Parallel()
	v := newEnv(t, envOpts{watchers: []watcher.Watcher{watchertest.NeverSettles(vigil.KindHTTP), watchertest.Unavailable(vigil.KindTCP, false)}})
	held := v.register(vigil.RegisterRequest{Kind: vigil.KindHTTP, Predicate: obj(`{}`), Mode: vigil.ModeUnless, Every: "10s", Deadline: "5m"})
	unsure := v.register(vigil.RegisterRequest{Kind: vigil.KindTCP, Predicate: obj(`{}`), Mode: vigil.ModeUnless, Every: "10s", Deadline: "5m"})
	v.tickEach(time.Second, t0.Add(6*time.Minute))
	h := v.get(held.ID)
	if h.State != vigil.StateFired || !h.Outcome.Held || h.Outcome.Attention {
		t.Fatalf("unless watch pending through its window: state %s outcome %+v; want fired, held, no attention", h.State, h.Outcome)
	}
	u := v.get(unsure.ID)
	if u.State != vigil.StateExpired || !strings.Contains(u.Outcome.Sentence, "without a confirmed answer") {
		t.Fatalf("unless watch whose last probe could not tell: state %s sentence %q; want expired without a confirmed answer", u.State, u.Outcome.Sentence)
	}
}

func TestPanickingWatcherKeepsLoopAndWatch(t *testing.T) {
	t.Parallel()
	v := newEnv(t, envOpts{watchers: []watcher.Watcher{watchertest.Panics(vigil.KindHTTP), watchertest.SettlesAfter(vigil.KindTCP, 2)}})
	bad := v.register(vigil.RegisterRequest{Kind: vigil.KindHTTP, Predicate: obj(`{}`), Every: "5s"})
	good := v.register(vigil.RegisterRequest{Kind: vigil.KindTCP, Predicate: obj(`{}`), Every: "5s"})
	v.tickEach(time.Second, t0.Add(20*time.Second))
	b := v.get(bad.ID)
	if b.State != vigil.StatePending || b.LastObservation == nil || !strings.Contains(b.LastObservation.Reason, "panicked") {
		t.Fatalf("panicking watch: state %s last %+v; want pending with the panic recorded", b.State, b.LastObservation)
	}
	if g := v.get(good.ID); g.State != vigil.StateFired {
		t.Fatalf("another watch beside a panicking one is %s, want fired", g.State)
	}
}

func TestCancelDuringInflightProbeWins(t *testing.T) {
	t.Parallel()
	started := make(chan struct{})
	release := make(chan struct{})
	fake := watchertest.Func(vigil.KindHTTP, func(ctx context.Context, p watcher.Probe) (vigil.Observation, error) {
		close(started)
		<-release
		return vigil.Observation{Verdict: vigil.VerdictSatisfied, Summary: "up"}, nil
	})
	v := newEnv(t, envOpts{watchers: []watcher.Watcher{fake}})
	w := v.register(vigil.RegisterRequest{Kind: vigil.KindHTTP, Predicate: obj(`{}`)})
	done := make(chan struct{})
	go func() { v.tick(t0); close(done) }()
	<-started
	got, err := v.eng.Cancel(v.ctx, w.ID)
	if err != nil || got.State != vigil.StateCancelled {
		t.Fatalf("Cancel = %v, %v; want cancelled", got, err)
	}
	close(release)
	<-done
	if s := v.get(w.ID).State; s != vigil.StateCancelled {
		t.Fatalf("state after the in-flight probe answered = %s, want cancelled", s)
	}
	msgs := v.messages("agent-1")
	if len(msgs) != 1 || msgs[0].Type != vigil.MessageCancelled {
		t.Fatalf("mailbox = %+v, want only the neutral cancel line", msgs)
	}
	// A retried cancel repeats nothing.
	if _, err := v.eng.Cancel(v.ctx, w.ID); err != nil {
		t.Fatal(err)
	}
	if n := len(v.messages("agent-1")); n != 1 {
		t.Fatalf("a second cancel left %d messages, want 1", n)
	}
}

func TestSameObservationWritesNothing(t *testing.T) {
	t.Parallel()
	fake := watchertest.NeverSettles(vigil.KindHTTP)
	v := newEnv(t, envOpts{watchers: []watcher.Watcher{fake}})
	v.register(vigil.RegisterRequest{Kind: vigil.KindHTTP, Predicate: obj(`{}`), Every: "30s", Deadline: "6h"})
	v.tick(t0) // first probe: its observation is new, one write
	before := v.store.writes.Load()
	v.tickEach(30*time.Second, t0.Add(5*time.Hour))
	if got := v.store.writes.Load() - before; got != 0 {
		t.Fatalf("%d store writes over 5 h of unchanged pending probes, want 0 (probes: %d)", got, fake.Total())
	}
	if fake.Total() < 600 {
		t.Fatalf("only %d probes ran", fake.Total())
	}
}

func TestUnavailableBacksOff(t *testing.T) {
	t.Parallel()
	fake := watchertest.Unavailable(vigil.KindHTTP, false)
	v := newEnv(t, envOpts{watchers: []watcher.Watcher{fake}})
	w := v.register(vigil.RegisterRequest{Kind: vigil.KindHTTP, Predicate: obj(`{}`), Every: "10s", Deadline: "1h"})
	var gaps []time.Duration
	last := t0
	v.tick(t0)
	for i := 0; i < 6; i++ {
		next, _ := v.sched.NextDue()
		gaps = append(gaps, next.Sub(last))
		last = next
		v.tick(next)
	}
	want := []time.Duration{20 * time.Second, 40 * time.Second, 80 * time.Second, 100 * time.Second, 100 * time.Second, 100 * time.Second}
	for i := range want {
		if gaps[i] != want[i] {
			t.Fatalf("backoff gaps = %v, want %v (every × 2^n capped at 10 × every)", gaps, want)
		}
	}
	if got := v.get(w.ID); got.State != vigil.StatePending || got.LastObservation.Verdict != vigil.VerdictUnavailable {
		t.Fatalf("unavailable watch: %s %+v", got.State, got.LastObservation)
	}
}

func TestPermanentErrorSettlesErrored(t *testing.T) {
	t.Parallel()
	v := newEnv(t, envOpts{watchers: []watcher.Watcher{watchertest.Unavailable(vigil.KindHTTP, true)}})
	w := v.register(vigil.RegisterRequest{Kind: vigil.KindHTTP, Predicate: obj(`{}`)})
	v.tick(t0)
	if got := v.get(w.ID); got.State != vigil.StateErrored {
		t.Fatalf("permanent unavailable: state %s, want errored", got.State)
	}
}

func TestMaxPollsAndStable(t *testing.T) {
	t.Parallel()
	v := newEnv(t, envOpts{watchers: []watcher.Watcher{watchertest.NeverSettles(vigil.KindHTTP), watchertest.SettlesAfter(vigil.KindTCP, 1)}})
	mp := v.register(vigil.RegisterRequest{Kind: vigil.KindHTTP, Predicate: obj(`{}`), Every: "1s", MaxPolls: 3})
	st := v.register(vigil.RegisterRequest{Kind: vigil.KindTCP, Predicate: obj(`{}`), Every: "1s", Stable: 3})
	v.tick(t0)
	v.tick(t0.Add(time.Second))
	if got := v.get(st.ID).State; got != vigil.StatePending {
		t.Fatalf("stable 3 after 2 satisfied probes: %s, want pending", got)
	}
	v.tick(t0.Add(2 * time.Second))
	if got := v.get(mp.ID); got.State != vigil.StateErrored || got.Outcome.Reason != "max_polls" {
		t.Fatalf("max_polls 3 after 3 probes: %s %+v", got.State, got.Outcome)
	}
	if got := v.get(st.ID).State; got != vigil.StateFired {
		t.Fatalf("stable 3 after 3 satisfied probes: %s, want fired", got)
	}
}
