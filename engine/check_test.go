package engine_test

import (
	"context"
	"testing"

	"github.com/vigil-run/vigil"
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
