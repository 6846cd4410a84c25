package engine_test

import (
	"context"
	"encoding/json"
	"strings"
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
