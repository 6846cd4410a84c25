package engine_test

import (
	"context"
	"encoding/json"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vigil-run/vigil"
	"github.com/vigil-run/vigil/engine"
	"github.com/vigil-run/vigil/store/memstore"
	"github.com/vigil-run/vigil/watcher"
	"github.com/vigil-run/vigil/watcher/watchertest"
)

// reviewing is a folder watcher stand-in whose predicates with "review"
// run a program (Canonical.Exec), like a folder watch's on_change.
type reviewing struct{ *watchertest.Fake }

func (r reviewing) Canonicalize(ctx context.Context, raw json.RawMessage, now time.Time) (watcher.Canonical, error) {
	c, err := r.Fake.Canonicalize(ctx, raw, now)
	c.Exec = strings.Contains(string(raw), "review")
	return c, err
}

// TestScopeExecPredicate: a predicate that runs a program although its
// kind does not (a folder reviewer) needs the token's exec scope too.
func TestScopeExecPredicate(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := engine.New(engine.Config{Store: memstore.New(), NowFunc: (&clock{t: t0}).Now,
		Watchers: watcher.NewRegistry(reviewing{watchertest.NeverSettles(vigil.KindFolder)})})
	if err := e.Prime(ctx); err != nil {
		t.Fatal(err)
	}
	reg := func(exec bool, pred string) error {
		s := vigil.Scope{Recipients: []string{"a"}, Exec: exec, TokenID: "t"}
		_, err := e.Register(vigil.WithScope(ctx, s), vigil.RegisterRequest{Kind: vigil.KindFolder, Recipient: "a", Predicate: json.RawMessage(pred)})
		return err
	}
	if err := reg(false, `{"review":true}`); vigil.ErrorCode(err) != vigil.CodeForbidden || !strings.Contains(vigil.ErrorMessage(err), "exec scope") {
		t.Errorf("reviewer without the exec scope = %v, want forbidden naming the exec scope", err)
	}
	if err := reg(false, `{"plain":true}`); err != nil {
		t.Errorf("folder without a reviewer, no exec scope = %v, want it allowed", err)
	}
	if err := reg(true, `{"review":true}`); err != nil {
		t.Errorf("reviewer with the exec scope = %v, want it allowed", err)
	}
	if _, err := e.Register(ctx, vigil.RegisterRequest{Kind: vigil.KindFolder, Recipient: "b", Predicate: json.RawMessage(`{"review":1}`)}); err != nil {
		t.Errorf("reviewer by the admin = %v, want it allowed", err)
	}
}

// TestCheckOfAProgramNeedsExec: a check-now of a watch whose kind runs a
// program (command, run, schedule) runs it at a time the caller chooses,
// so a token without the exec scope is refused (forbidden, naming the
// scope, no field), as its registration would be; a token with it, and
// the admin, may check it. It was allowed.
func TestCheckOfAProgramNeedsExec(t *testing.T) {
	var runs atomic.Int64
	cmd := watchertest.Func(vigil.KindCommand, func(context.Context, watcher.Probe) (vigil.Observation, error) {
		runs.Add(1)
		return vigil.Observation{Verdict: vigil.VerdictPending, Summary: "not yet"}, nil
	})
	v := newEnv(t, envOpts{watchers: []watcher.Watcher{cmd, watchertest.NeverSettles(vigil.KindHTTP)}})
	defer runEngine(v)()
	w := v.register(vigil.RegisterRequest{Kind: vigil.KindCommand, Predicate: obj(`{"argv":["make","deploy"]}`), Recipient: "a", Every: "1h", Deadline: "24h"})
	plain := vigil.WithScope(v.ctx, vigil.Scope{Recipients: []string{"a"}, TokenID: "t"})
	exec := vigil.WithScope(v.ctx, vigil.Scope{Recipients: []string{"a"}, Exec: true, TokenID: "t"})
	// The checks that may run it first: each returns once a probe that
	// started after it was recorded, so the first probe (made as the
	// watch was armed) is over, and the next is an hour away.
	for _, name := range []string{"exec token", "admin"} {
		ctx := map[string]context.Context{"exec token": exec, "admin": v.ctx}[name]
		if got, err := v.eng.Check(ctx, w.ID); err != nil || got.State != vigil.StatePending {
			t.Errorf("Check by the %s = %+v, %v; want the pending watch, checked", name, got, err)
		}
	}
	before := runs.Load()
	_, err := v.eng.Check(plain, w.ID)
	if vigil.ErrorCode(err) != vigil.CodeForbidden || !strings.Contains(vigil.ErrorMessage(err), "exec scope") || vigil.ErrorField(err) != "" {
		t.Fatalf("Check of a command watch by a token without exec = %v (field %q), want forbidden naming the exec scope, no field", err, vigil.ErrorField(err))
	}
	if runs.Load() != before {
		t.Fatal("the refused check ran the program")
	}
	h := v.register(vigil.RegisterRequest{Kind: vigil.KindHTTP, Predicate: obj(`{"url":"http://example.test/"}`), Recipient: "a", Every: "1h"})
	if _, err := v.eng.Check(plain, h.ID); err != nil {
		t.Errorf("Check of an http watch by a token without exec = %v, want it allowed", err)
	}
}
