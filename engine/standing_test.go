package engine_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vigil-run/vigil"
	"github.com/vigil-run/vigil/watcher"
	"github.com/vigil-run/vigil/watcher/watchertest"
)

// TestStandingWatchReportsEachChange drives a standing kind with a fake
// whose world the test edits: the first look is a silent baseline, each
// change is one "changed" message written with its new baseline, an
// unavailable answer never replaces the baseline, and only cancel ends it.
func TestStandingWatchReportsEachChange(t *testing.T) {
	t.Parallel()
	var title atomic.Value
	title.Store("v1")
	var down atomic.Bool
	fake := watchertest.Func(vigil.KindTicket, func(ctx context.Context, p watcher.Probe) (vigil.Observation, error) {
		if down.Load() {
			return vigil.Observation{}, errors.New("forge unreachable")
		}
		now := title.Load().(string)
		obs := vigil.Observation{Verdict: vigil.VerdictPending, Summary: "title " + now, Facts: map[string]any{"title": now}}
		if p.Last != nil && p.Last.Facts["title"] != now {
			obs.Verdict = vigil.VerdictSatisfied
			obs.Summary = "title " + p.Last.Facts["title"].(string) + " → " + now
		}
		return obs, nil
	})
	v := newEnv(t, envOpts{watchers: []watcher.Watcher{fake}})
	w := v.register(vigil.RegisterRequest{Kind: vigil.KindTicket, Predicate: obj(`{"repo":"acme/api","number":7}`)})
	if !w.Deadline.IsZero() || !w.Standing {
		t.Fatalf("a standing watch got deadline %v, standing %v", w.Deadline, w.Standing)
	}
	v.tick(t0)
	if msgs := v.messages("agent-1"); len(msgs) != 0 {
		t.Fatalf("the baseline mailed %+v", msgs)
	}
	step := t0
	next := func() { step = step.Add(time.Minute); v.tick(step) }
	next() // unchanged
	title.Store("v2")
	next()
	next() // unchanged again
	down.Store(true)
	next() // could not tell: the baseline stays v2
	down.Store(false)
	title.Store("v3")
	next()
	next() // the outage backed the watch off to 2 min
	msgs := v.messages("agent-1")
	if len(msgs) != 2 || msgs[0].Type != vigil.MessageChanged || msgs[1].Text == msgs[0].Text {
		t.Fatalf("mailbox = %+v, want two changed messages", msgs)
	}
	if want := "title v2 → v3"; !strings.Contains(msgs[1].Text, want) {
		t.Fatalf("second change reads %q, want it to say %q (the baseline survived the outage)", msgs[1].Text, want)
	}
	v.tick(step.Add(30 * 24 * time.Hour))
	if got := v.get(w.ID).State; got != vigil.StatePending {
		t.Fatalf("a standing watch is %s after 30 days, want pending until cancelled", got)
	}
	if _, err := v.eng.Cancel(v.ctx, w.ID); err != nil {
		t.Fatal(err)
	}
	if got := v.get(w.ID).State; got != vigil.StateCancelled {
		t.Fatalf("after cancel: %s", got)
	}
}
