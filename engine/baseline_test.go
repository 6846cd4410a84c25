package engine_test

import (
	"context"
	"encoding/json"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vigil-run/vigil"
	"github.com/vigil-run/vigil/store/memstore"
	"github.com/vigil-run/vigil/watcher"
	"github.com/vigil-run/vigil/watcher/watchertest"
)

// TestStandingChangeReportedOnce: a standing watch's shard moves while one
// replica's probe of it is running (the probe read the baseline v1 and is
// about to find v2); the replica that holds it meanwhile reports the change
// v1 → v2. When the first probe ends, its change, found against v1, is
// not reported again: one "changed" message, whatever the order.
func TestStandingChangeReportedOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	now := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	st := memstore.New()
	var title atomic.Value
	title.Store("v1")
	look := func(p watcher.Probe) vigil.Observation {
		cur := title.Load().(string)
		obs := vigil.Observation{Verdict: vigil.VerdictPending, Summary: "title " + cur, Facts: map[string]any{"title": cur}}
		if p.Last != nil && p.Last.Facts["title"] != cur {
			obs.Verdict = vigil.VerdictSatisfied
			obs.Summary = "title " + p.Last.Facts["title"].(string) + " → " + cur
		}
		return obs
	}
	var hold atomic.Bool
	entered, release := make(chan struct{}), make(chan struct{})
	slow := watchertest.Func(vigil.KindTicket, func(_ context.Context, p watcher.Probe) (vigil.Observation, error) {
		obs := look(p)
		if hold.Load() {
			entered <- struct{}{}
			<-release
		}
		return obs, nil
	})
	quick := watchertest.Func(vigil.KindTicket, func(_ context.Context, p watcher.Probe) (vigil.Observation, error) {
		return look(p), nil
	})
	clock := func() time.Time { return now }
	a := newSched(schedConfig{Store: st, Watchers: watcher.NewRegistry(slow), NowFunc: clock})
	b := newSched(schedConfig{Store: st, Watchers: watcher.NewRegistry(quick), NowFunc: clock})
	create(t, st, &vigil.Watch{ID: "w1", Kind: vigil.KindTicket, Predicate: json.RawMessage(`{"repo":"acme/api","number":7}`),
		Recipient: "r", State: vigil.StatePending, Mode: vigil.ModeUntil, Every: time.Minute, CreatedAt: now, Identity: "w1", Standing: true})
	if err := a.Prime(ctx); err != nil {
		t.Fatal(err)
	}
	a.Tick(ctx, now.Add(10*time.Minute)) // the baseline, v1
	if n := slow.Probes("w1"); n != 1 {
		t.Fatalf("the baseline took %d probes, want 1", n)
	}
	title.Store("v2")
	hold.Store(true)
	done := make(chan struct{})
	go func() {
		defer close(done)
		a.Tick(ctx, now.Add(20*time.Minute))
	}()
	<-entered
	// Meanwhile the other replica holds the shard: it primes the watch and
	// reports the change against the same baseline.
	if err := b.Prime(ctx); err != nil {
		t.Fatal(err)
	}
	b.Tick(ctx, now.Add(20*time.Minute))
	close(release)
	<-done

	zero := int64(0)
	page, err := st.MessagesRead(ctx, vigil.MessagesReadParams{Recipient: "r", After: &zero, Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	var changed []string
	for _, m := range page.Messages {
		if m.Type == vigil.MessageChanged {
			changed = append(changed, m.Text)
		}
	}
	if len(changed) != 1 {
		t.Fatalf("the change v1 → v2 was reported %d times (%q), want once", len(changed), changed)
	}
	w, err := st.WatchGet(ctx, "w1")
	if err != nil {
		t.Fatal(err)
	}
	if w.State != vigil.StatePending || w.LastObservation == nil || w.LastObservation.Facts["title"] != "v2" {
		t.Fatalf("after the change: state %s, baseline %+v; want pending with baseline v2", w.State, w.LastObservation)
	}
}

// TestStandingStaleUnchangedNotWrittenOverChange: after a change (v1 → v2)
// the next look answers pending with the same facts and a summary of its
// own, which is written (it differs from the change's). When that look was
// made by a replica that held the shard, read the baseline v2 and wrote
// only after the holder meanwhile reported v2 → v3, its write put v2 back
// over v3 unchecked, and the next probe reported v2 → v3 a second time.
// Every write of a standing watch's baseline is checked against the one it
// read: the stale look writes nothing, and each change is reported once.
func TestStandingStaleUnchangedNotWrittenOverChange(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	now := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	st := memstore.New()
	var title atomic.Value
	title.Store("v1")
	look := func(p watcher.Probe) vigil.Observation {
		cur := title.Load().(string)
		obs := vigil.Observation{Verdict: vigil.VerdictPending, Summary: "title " + cur, Facts: map[string]any{"title": cur}}
		if p.Last != nil && p.Last.Facts["title"] != cur {
			obs.Verdict = vigil.VerdictSatisfied
			obs.Summary = "title " + p.Last.Facts["title"].(string) + " → " + cur
		}
		return obs
	}
	var hold atomic.Bool
	entered, release := make(chan struct{}), make(chan struct{})
	slow := watchertest.Func(vigil.KindTicket, func(_ context.Context, p watcher.Probe) (vigil.Observation, error) {
		obs := look(p)
		if hold.Load() {
			entered <- struct{}{}
			<-release
		}
		return obs, nil
	})
	quick := watchertest.Func(vigil.KindTicket, func(_ context.Context, p watcher.Probe) (vigil.Observation, error) {
		return look(p), nil
	})
	clock := func() time.Time { return now }
	a := newSched(schedConfig{Store: st, Watchers: watcher.NewRegistry(slow), NowFunc: clock})
	b := newSched(schedConfig{Store: st, Watchers: watcher.NewRegistry(quick), NowFunc: clock})
	create(t, st, &vigil.Watch{ID: "w1", Kind: vigil.KindTicket, Predicate: json.RawMessage(`{"repo":"acme/api","number":7}`),
		Recipient: "r", State: vigil.StatePending, Mode: vigil.ModeUntil, Every: time.Minute, CreatedAt: now, Identity: "w1", Standing: true})
	if err := a.Prime(ctx); err != nil {
		t.Fatal(err)
	}
	a.Tick(ctx, now.Add(10*time.Minute)) // the baseline, v1
	title.Store("v2")
	a.Tick(ctx, now.Add(20*time.Minute)) // v1 → v2, reported
	hold.Store(true)
	done := make(chan struct{})
	go func() {
		defer close(done)
		a.Tick(ctx, now.Add(30*time.Minute)) // sees v2 unchanged, writes late
	}()
	<-entered
	hold.Store(false)
	title.Store("v3")
	if err := b.Prime(ctx); err != nil {
		t.Fatal(err)
	}
	b.Tick(ctx, now.Add(30*time.Minute)) // v2 → v3, reported
	close(release)
	<-done
	b.Tick(ctx, now.Add(40*time.Minute)) // nothing changed since v3

	zero := int64(0)
	page, err := st.MessagesRead(ctx, vigil.MessagesReadParams{Recipient: "r", After: &zero, Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	var changed []string
	for _, m := range page.Messages {
		if m.Type == vigil.MessageChanged {
			changed = append(changed, m.Text)
		}
	}
	if len(changed) != 2 || !strings.Contains(changed[0], "v1 → v2") || !strings.Contains(changed[1], "v2 → v3") {
		t.Fatalf("changed messages %q; want v1 → v2 and v2 → v3, each once", changed)
	}
	w, err := st.WatchGet(ctx, "w1")
	if err != nil {
		t.Fatal(err)
	}
	if w.LastObservation == nil || w.LastObservation.Facts["title"] != "v3" {
		t.Fatalf("baseline %+v; want v3", w.LastObservation)
	}
}
