package engine_test

import (
	"context"
	"runtime"
	"testing"
	"time"

	"github.com/vigil-run/vigil"
	"github.com/vigil-run/vigil/engine"
	"github.com/vigil-run/vigil/watcher"
	"github.com/vigil-run/vigil/watcher/watchertest"
)

// TestCheckProbesNow: Check makes one probe at once, however far the next
// one is, returns the watch as that probe left it, and the engine keeps
// the probes, newest first; a settled watch is a conflict, a timer an
// invalid request, another recipient's watch not found.
func TestCheckProbesNow(t *testing.T) {
	v := newEnv(t, envOpts{watchers: []watcher.Watcher{watchertest.SettlesAfter(vigil.KindHTTP, 3)}})
	ctx, cancel := context.WithCancel(v.ctx)
	done := make(chan error, 1)
	go func() { done <- v.eng.Run(ctx) }()
	defer func() { cancel(); <-done }()

	w := v.register(vigil.RegisterRequest{Kind: vigil.KindHTTP, Predicate: []byte(`{"url":"http://example.test/"}`),
		Every: "1h", Deadline: "24h", Observe: true})
	if w.Polls != 1 || w.State != vigil.StatePending {
		t.Fatalf("after registration: polls %d, state %s; want 1 probe, pending", w.Polls, w.State)
	}
	got, err := v.eng.Check(v.ctx, w.ID)
	if err != nil || got.State != vigil.StatePending || got.Polls != 2 {
		t.Fatalf("first Check = %+v, %v; want pending after 2 probes", got, err)
	}
	got, err = v.eng.Check(v.ctx, w.ID)
	if err != nil || got.State != vigil.StateFired || got.Polls != 3 {
		t.Fatalf("second Check = %+v, %v; want fired by the 3rd probe", got, err)
	}
	if _, err := v.eng.Check(v.ctx, w.ID); vigil.ErrorCode(err) != vigil.CodeConflict {
		t.Errorf("Check of a fired watch: %v; want conflict", err)
	}
	probes, err := v.eng.Probes(v.ctx, w.ID)
	if err != nil || len(probes) != 3 || probes[0].Verdict != vigil.VerdictSatisfied || probes[2].Summary != "not yet" {
		t.Errorf("Probes = %+v, %v; want 3, newest (satisfied) first", probes, err)
	}

	other := vigil.WithScope(v.ctx, vigil.Scope{Recipients: []string{"someone-else"}})
	if _, err := v.eng.Check(other, w.ID); vigil.ErrorCode(err) != vigil.CodeNotFound {
		t.Errorf("Check by another recipient's token: %v; want not_found", err)
	}
	if _, err := v.eng.Probes(other, w.ID); vigil.ErrorCode(err) != vigil.CodeNotFound {
		t.Errorf("Probes by another recipient's token: %v; want not_found", err)
	}
	tm := v.register(vigil.RegisterRequest{Kind: vigil.KindTimer, Predicate: []byte(`{"in":"1h"}`)})
	if _, err := v.eng.Check(v.ctx, tm.ID); vigil.ErrorCode(err) != vigil.CodeInvalidRequest {
		t.Errorf("Check of a timer: %v; want invalid_request", err)
	}
	if _, err := v.eng.Check(v.ctx, "no-such-watch"); vigil.ErrorCode(err) != vigil.CodeNotFound {
		t.Errorf("Check of an unknown id: %v; want not_found", err)
	}
}

// TestCheckCountsOnlyLaterProbes: a Check that comes while a probe is
// looking is not answered by that probe, even on a clock that has not
// moved since it started; it is answered by the one probe its poke makes,
// and no probe more is made.
func TestCheckCountsOnlyLaterProbes(t *testing.T) {
	v, w, gated, started, release := gatedWatch(t)
	type answer struct {
		w   *vigil.Watch
		err error
	}
	check := func() chan answer {
		c := make(chan answer, 1)
		go func() {
			got, err := v.eng.Check(v.ctx, w.ID)
			c <- answer{got, err}
		}()
		return c
	}
	first := check()
	<-started // the first Check's probe is looking
	second := check()
	// Both wait: the probe looking now must answer the first alone.
	for v.eng.CheckWaiters(w.ID) < 2 {
		runtime.Gosched()
	}
	release <- struct{}{}
	a := <-first
	if a.err != nil || a.w.Polls != 2 {
		t.Fatalf("first Check = %+v, %v; want the 2nd probe", a.w, a.err)
	}
	<-started // the probe the second Check's poke made
	select {
	case b := <-second:
		t.Fatalf("second Check answered by the probe that was looking when it came: %+v, %v", b.w, b.err)
	default:
	}
	release <- struct{}{}
	b := <-second
	if b.err != nil || b.w.Polls != 3 {
		t.Fatalf("second Check = %+v, %v; want the 3rd probe", b.w, b.err)
	}
	if l, ok := v.sched.Live(w.ID); !ok || !l.NextDue.After(v.clock.Now()) {
		t.Errorf("after both Checks: live %+v, %v; want the next probe in an hour, not one more now", l, ok)
	}
	if n := gated.Probes(w.ID); n != 3 {
		t.Errorf("%d probes; want 3", n)
	}
	if held := v.eng.WaitedWatches(); held != 0 {
		t.Errorf("after both Checks the probe log holds %d waited watches; want none", held)
	}
}

func probesOf(t *testing.T, v *env, id string) []engine.Probe {
	t.Helper()
	ps, err := v.eng.Probes(v.ctx, id)
	if err != nil {
		t.Fatalf("Probes: %v", err)
	}
	return ps
}

// TestCheckAnsweredBySettlement: a Check waiting for its probe while the
// watch is cancelled returns the cancelled watch at once, not when its
// wait runs out (the cancelled watch is never probed again).
func TestCheckAnsweredBySettlement(t *testing.T) {
	v, w, _, started, release := gatedWatch(t)
	type answer struct {
		w   *vigil.Watch
		err error
	}
	checked := make(chan answer, 1)
	go func() {
		got, err := v.eng.Check(v.ctx, w.ID)
		checked <- answer{got, err}
	}()
	<-started // the probe Check asked for is looking
	if _, err := v.eng.Cancel(v.ctx, w.ID); err != nil {
		t.Fatal(err)
	}
	select {
	case a := <-checked:
		if a.err != nil || a.w.State != vigil.StateCancelled {
			t.Errorf("Check = %+v, %v; want the cancelled watch", a.w, a.err)
		}
	case <-time.After(30 * time.Second): // a hang guard, not a timing claim
		t.Fatal("Check still waits for a probe after its watch was cancelled")
	}
	release <- struct{}{}
}

// gatedWatch starts an engine whose http probes each wait to be let go,
// and registers one http watch, due hourly, whose first probe has been let
// go and recorded. A probe sends the watch's id on started as it starts
// looking and ends (not yet) when release is sent; the test's end cancels
// the probes it leaves, and stops the engine.
func gatedWatch(t *testing.T) (v *env, w *vigil.Watch, gated *watchertest.Fake, started <-chan string, release chan<- struct{}) {
	t.Helper()
	start, let := make(chan string), make(chan struct{})
	gated = watchertest.Func(vigil.KindHTTP, func(ctx context.Context, p watcher.Probe) (vigil.Observation, error) {
		select {
		case start <- p.WatchID:
		case <-ctx.Done():
			return vigil.Observation{}, ctx.Err()
		}
		select {
		case <-let:
		case <-ctx.Done():
			return vigil.Observation{}, ctx.Err()
		}
		return vigil.Observation{Verdict: vigil.VerdictPending, At: p.Now, Summary: "not yet"}, nil
	})
	v = newEnv(t, envOpts{watchers: []watcher.Watcher{gated}})
	ctx, cancel := context.WithCancel(v.ctx)
	done := make(chan error, 1)
	go func() { done <- v.eng.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	w = v.register(vigil.RegisterRequest{Kind: vigil.KindHTTP, Predicate: []byte(`{"url":"http://example.test/"}`),
		Every: "1h", Deadline: "24h"})
	<-start // a new watch's first probe runs at once
	let <- struct{}{}
	for len(probesOf(t, v, w.ID)) < 1 {
		runtime.Gosched()
	}
	return v, w, gated, start, let
}

// TestCheckOfAWatchSettledAsItWasRead: a Check that found its watch
// pending and live, whose watch then settled (here a cancel; a probe
// already looking, as a daemon's first one at its start) before the
// Check listened for its settlement, returns the settled watch at once.
// It waited out MaxWait before ("did not finish within"): the settlement
// was announced to nobody it heard, and a settled watch is never probed.
func TestCheckOfAWatchSettledAsItWasRead(t *testing.T) {
	l := vigil.DefaultLimits()
	l.MaxWait = 2 * time.Second // what the Check waited out before: a failure, not a timing claim
	v := newEnv(t, envOpts{watchers: []watcher.Watcher{watchertest.SettlesAfter(vigil.KindHTTP, 100)}, limits: &l})
	ctx, cancel := context.WithCancel(v.ctx)
	done := make(chan error, 1)
	go func() { done <- v.eng.Run(ctx) }()
	defer func() { cancel(); <-done }()
	w := v.register(vigil.RegisterRequest{Kind: vigil.KindHTTP, Predicate: []byte(`{"url":"http://example.test/"}`),
		Every: "1h", Deadline: "24h", Observe: true})
	v.eng.BeforeCheckWait(func(id string) {
		if _, err := v.eng.Cancel(v.ctx, id); err != nil {
			t.Errorf("Cancel: %v", err)
		}
	})
	got, err := v.eng.Check(v.ctx, w.ID)
	if err != nil || got.State != vigil.StateCancelled {
		t.Fatalf("Check = %+v, %v; want the cancelled watch", got, err)
	}
}
