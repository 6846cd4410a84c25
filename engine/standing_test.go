package engine_test

import (
	"context"
	"encoding/json"
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

// standingFake is a fake whose predicates make their watches standing,
// as a folder predicate with "standing": true does.
type standingFake struct{ *watchertest.Fake }

func (f standingFake) Canonicalize(ctx context.Context, raw json.RawMessage, now time.Time) (watcher.Canonical, error) {
	c, err := f.Fake.Canonicalize(ctx, raw, now)
	c.Standing = true
	return c, err
}

// TestStandingWatchRefusesWhatItWouldIgnore: a standing watch never fires
// and is never given up on, so max_polls, max_errors, stable and
// stable_for are refused at registration (invalid_request, naming the
// field), alone and in a batch, for a standing kind and for a predicate
// that makes its watch standing, and nothing is written. Taken, they were
// kept on the row and never applied.
func TestStandingWatchRefusesWhatItWouldIgnore(t *testing.T) {
	t.Parallel()
	folder := standingFake{watchertest.NeverSettles(vigil.KindFolder)}
	v := newEnv(t, envOpts{watchers: []watcher.Watcher{watchertest.NeverSettles(vigil.KindTicket), folder, watchertest.NeverSettles(vigil.KindHTTP)}})
	asks := []struct {
		field string
		set   func(*vigil.RegisterRequest)
	}{
		{"max_polls", func(r *vigil.RegisterRequest) { r.MaxPolls = 3 }},
		{"max_errors", func(r *vigil.RegisterRequest) { r.MaxErrors = 2 }},
		{"stable", func(r *vigil.RegisterRequest) { r.Stable = 2 }},
		{"stable_for", func(r *vigil.RegisterRequest) { r.StableFor = "60s" }},
	}
	for _, kind := range []vigil.Kind{vigil.KindTicket, vigil.KindFolder} {
		for _, a := range asks {
			r := vigil.RegisterRequest{Kind: kind, Predicate: obj(`{"repo":"acme/api","number":7}`), Recipient: "agent-1"}
			a.set(&r)
			before := v.store.writes.Load()
			_, err := v.eng.Register(v.ctx, r)
			var ve *vigil.Error
			if !errors.As(err, &ve) || ve.Code != vigil.CodeInvalidRequest || ve.Field != a.field || !strings.Contains(ve.Message, "standing") {
				t.Fatalf("standing %s watch with %s: Register = %v, want invalid_request on field %s saying why", kind, a.field, err, a.field)
			}
			res, err := v.eng.RegisterBatch(v.ctx, []vigil.RegisterRequest{r})
			if err != nil {
				t.Fatal(err)
			}
			if !errors.As(res[0].Err, &ve) || ve.Code != vigil.CodeInvalidRequest || ve.Field != a.field {
				t.Fatalf("standing %s watch with %s in a batch: %s %v, want refused on field %s", kind, a.field, res[0].Status, res[0].Err, a.field)
			}
			if n := v.store.writes.Load() - before; n != 0 {
				t.Fatalf("a refusal wrote %d times", n)
			}
		}
	}
	// Unset (or zero) they are no question: registered.
	w := v.register(vigil.RegisterRequest{Kind: vigil.KindTicket, Predicate: obj(`{"repo":"acme/api","number":7}`), StableFor: "0s"})
	if !w.Standing || w.MaxPolls != 0 || w.Stable != 0 || w.StableFor != 0 {
		t.Fatalf("a plain standing registration: %+v", w)
	}
	// A one-shot watch takes them.
	o := v.register(vigil.RegisterRequest{Kind: vigil.KindHTTP, Predicate: obj(`{}`), MaxPolls: 3, MaxErrors: 2, Stable: 2, StableFor: "60s"})
	if o.MaxPolls != 3 || o.MaxErrors != 2 || o.Stable != 2 || o.StableFor != time.Minute {
		t.Fatalf("a one-shot watch lost what it asked for: %+v", o)
	}
}

// TestStandingLateBaselineSaysSo: a standing watch whose first checks
// could not tell (the forge was down at registration) took its baseline
// from the first check that could, silently; a change made between the
// registration and that check was folded into it and never reported. The
// late baseline is written with a "note" saying when it was read and that
// a change made before then is not reported; a baseline read at
// registration leaves none.
func TestStandingLateBaselineSaysSo(t *testing.T) {
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

	// Read at registration: no note.
	onTime := v.register(vigil.RegisterRequest{Kind: vigil.KindTicket, Predicate: obj(`{"repo":"acme/api","number":1}`)})
	v.tick(t0)
	if msgs := v.messages("agent-1"); len(msgs) != 0 {
		t.Fatalf("a baseline read at registration mailed %+v", msgs)
	}
	if _, err := v.eng.Cancel(v.ctx, onTime.ID); err != nil {
		t.Fatal(err)
	}
	before := len(v.messages("agent-1"))

	down.Store(true)
	w := v.register(vigil.RegisterRequest{Kind: vigil.KindTicket, Predicate: obj(`{"repo":"acme/api","number":7}`)})
	v.tick(t0) // could not tell
	title.Store("v2")
	down.Store(false)
	v.tick(t0.Add(2 * time.Minute)) // the first read: v2, late
	msgs := v.messages("agent-1")[before:]
	if len(msgs) != 1 || msgs[0].Type != vigil.MessageNote || msgs[0].WatchID != w.ID {
		t.Fatalf("after a late baseline the mailbox holds %+v, want one note of watch %s", msgs, w.ID)
	}
	for _, want := range []string{"first read at 2026", "2m0s after the watch was registered", "1 check before could not tell", "not reported"} {
		if !strings.Contains(msgs[0].Text, want) {
			t.Fatalf("the note reads %q, want it to say %q", msgs[0].Text, want)
		}
	}
	if got := v.get(w.ID).LastObservation; got == nil || got.Facts["title"] != "v2" {
		t.Fatalf("baseline %+v, want v2", got)
	}
	// Said once: later reads and changes are as ever.
	v.tick(t0.Add(4 * time.Minute))
	title.Store("v3")
	v.tick(t0.Add(6 * time.Minute))
	msgs = v.messages("agent-1")[before:]
	if len(msgs) != 2 || msgs[1].Type != vigil.MessageChanged || !strings.Contains(msgs[1].Text, "title v2 → v3") {
		t.Fatalf("mailbox %+v, want the note then one change v2 → v3", msgs)
	}
}
