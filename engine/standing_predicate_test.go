package engine_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/vigil-run/vigil"
	"github.com/vigil-run/vigil/watcher"
	"github.com/vigil-run/vigil/watcher/folder"
	"github.com/vigil-run/vigil/watcher/watchertest"
)

// perPredicate is a folder-like fake whose predicate decides whether its
// watch is standing, and which asks for a long event-driven interval.
type perPredicate struct {
	*watchertest.Fake
}

func (f perPredicate) Canonicalize(ctx context.Context, raw json.RawMessage, now time.Time) (watcher.Canonical, error) {
	c, err := f.Fake.Canonicalize(ctx, raw, now)
	if err != nil {
		return c, err
	}
	var p struct {
		Standing bool `json:"standing"`
	}
	_ = json.Unmarshal(raw, &p)
	c.Standing, c.Every = p.Standing, time.Hour
	return c, nil
}

// TestPredicateMakesWatchStanding: a kind that is not standing by default
// registers a standing watch when its canonical predicate says so: no
// default deadline, a given deadline or mode unless refused; a one-shot
// predicate of the same kind keeps the kind's deadline. Canonical.Every
// replaces the kind's default interval but not one the caller gives.
func TestPredicateMakesWatchStanding(t *testing.T) {
	t.Parallel()
	fake := perPredicate{watchertest.NeverSettles(vigil.KindFolder)}
	v := newEnv(t, envOpts{watchers: []watcher.Watcher{fake}})

	standing := v.register(vigil.RegisterRequest{Kind: vigil.KindFolder, Predicate: obj(`{"path":"/x","standing":true}`)})
	if !standing.Standing || !standing.Deadline.IsZero() || standing.Every != time.Hour {
		t.Fatalf("standing predicate: standing %v, deadline %v, every %v; want standing, no deadline, every 1h", standing.Standing, standing.Deadline, standing.Every)
	}
	oneShot := v.register(vigil.RegisterRequest{Kind: vigil.KindFolder, Predicate: obj(`{"path":"/x"}`)})
	spec := folder.Descriptor().Spec
	if oneShot.Standing || !oneShot.Deadline.Equal(t0.Add(spec.Deadline)) {
		t.Fatalf("one-shot predicate: standing %v, deadline %v; want one-shot with the kind's deadline", oneShot.Standing, oneShot.Deadline)
	}
	given := v.register(vigil.RegisterRequest{Kind: vigil.KindFolder, Predicate: obj(`{"path":"/y"}`), Every: "30s"})
	if given.Every != 30*time.Second {
		t.Fatalf("every given by the caller = %v, want 30s", given.Every)
	}
	for _, r := range []vigil.RegisterRequest{
		{Kind: vigil.KindFolder, Predicate: obj(`{"path":"/z","standing":true}`), Deadline: "1h"},
		{Kind: vigil.KindFolder, Predicate: obj(`{"path":"/z","standing":true}`), Mode: vigil.ModeUnless},
	} {
		r.Recipient = "agent-1"
		if _, err := v.eng.Register(v.ctx, r); vigil.ErrorCode(err) != vigil.CodeInvalidRequest {
			t.Errorf("Register(standing, deadline %q, mode %q) = %v, want invalid_request", r.Deadline, r.Mode, err)
		}
	}
	// Standing means it is never settled by its deadline or its answers.
	v.tick(t0.Add(8 * 24 * time.Hour))
	if got := v.get(standing.ID).State; got != vigil.StatePending {
		t.Fatalf("standing watch is %s after 8 days, want pending", got)
	}
}
