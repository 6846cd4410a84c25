package engine_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/vigil-run/vigil"
	"github.com/vigil-run/vigil/engine"
	"github.com/vigil-run/vigil/store/memstore"
	"github.com/vigil-run/vigil/watcher"
	"github.com/vigil-run/vigil/watcher/timer"
)

// replicas returns two engines on one store, as two daemons on one
// PostgreSQL database: a, the reader's, is Shared.
func replicas() (a, b *engine.Engine, st vigil.Store) {
	st = memstore.New()
	reg := func() *watcher.Registry { return watcher.NewRegistry(timer.New(timer.Config{})) }
	a = engine.New(engine.Config{Store: st, Watchers: reg(), Shared: true})
	b = engine.New(engine.Config{Store: st, Watchers: reg()})
	return a, b, st
}

// drain returns what ch holds once every goroutine of the bubble is
// blocked.
func drain(ch <-chan vigil.Event) []vigil.Event {
	synctest.Wait()
	var out []vigil.Event
	for {
		select {
		case ev := <-ch:
			out = append(out, ev)
		default:
			return out
		}
	}
}

// TestAnnounceWakesReaders: what another daemon committed, announced to
// this engine, wakes a mailbox long-poll, a wait on the watch and a live
// stream, each once, though it is announced twice (from its message and
// from its row).
func TestAnnounceWakesReaders(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := t.Context()
		a, b, st := replicas()
		w, err := b.Register(ctx, vigil.RegisterRequest{Kind: vigil.KindTimer, Predicate: obj(`{"in": "1h"}`), Recipient: "r"})
		if err != nil {
			t.Fatal(err)
		}
		stream, err := a.Subscribe(ctx, vigil.EventFilter{Recipient: "r"})
		if err != nil {
			t.Fatal(err)
		}
		polled := make(chan vigil.MessagesPage, 1)
		go func() {
			p, err := a.Messages(ctx, vigil.MessagesRequest{Recipient: "r", Reader: "x", Wait: time.Minute})
			if err != nil {
				t.Error(err)
			}
			polled <- p
		}()
		waited := make(chan *vigil.Watch, 1)
		go func() {
			got, err := a.Wait(ctx, w.ID, time.Minute)
			if err != nil {
				t.Error(err)
			}
			waited <- got
		}()
		synctest.Wait()
		if _, err := b.Cancel(ctx, w.ID); err != nil {
			t.Fatal(err)
		}
		// Not announced yet: nothing on a moves.
		if evs := drain(stream); len(evs) != 0 {
			t.Fatalf("before any announce the stream got %+v", evs)
		}
		page, err := st.MessagesRead(ctx, vigil.MessagesReadParams{Recipient: "r", Limit: 10})
		if err != nil || len(page.Messages) != 1 {
			t.Fatalf("MessagesRead = %+v, %v; want the cancel's message", page, err)
		}
		m := page.Messages[0]
		if !a.Wants("r", w.ID) || a.Wants("other", "w-other") {
			t.Error("Wants: want true for the subscribed recipient only")
		}
		a.Announce(m)
		if err := a.AnnounceWatch(ctx, w.ID); err != nil {
			t.Fatal(err)
		}
		a.Announce(m)
		if p := <-polled; len(p.Messages) != 1 || p.Messages[0].Seq != m.Seq {
			t.Errorf("the long-poll returned %+v, want message %d", p.Messages, m.Seq)
		}
		if got := <-waited; got.State != vigil.StateCancelled {
			t.Errorf("the wait returned %s, want cancelled", got.State)
		}
		evs := drain(stream)
		var types []string
		for _, ev := range evs {
			types = append(types, ev.Type)
		}
		want := []string{vigil.EventWatchSettled, vigil.EventMessage}
		if len(types) != 2 || types[0] != want[0] || types[1] != want[1] {
			t.Fatalf("the stream got %v, want %v once each", types, want)
		}
		if evs[1].Seq != m.Seq || evs[0].State != vigil.StateCancelled || !evs[0].Done {
			t.Errorf("events = %+v", evs)
		}
	})
}

// TestAnnounceAfterLocalPublish: a settlement this engine made and
// published, announced again (read back from the store), is not sent
// twice; nor is a registration.
func TestAnnounceAfterLocalPublish(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := t.Context()
		a, _, st := replicas()
		stream, err := a.Subscribe(ctx, vigil.EventFilter{})
		if err != nil {
			t.Fatal(err)
		}
		w, err := a.Register(ctx, vigil.RegisterRequest{Kind: vigil.KindTimer, Predicate: obj(`{"in": "1h"}`), Recipient: "r"})
		if err != nil {
			t.Fatal(err)
		}
		if err := a.AnnounceWatch(ctx, w.ID); err != nil {
			t.Fatal(err)
		}
		if _, err := a.Cancel(ctx, w.ID); err != nil {
			t.Fatal(err)
		}
		page, err := st.MessagesRead(ctx, vigil.MessagesReadParams{Recipient: "r", Limit: 10})
		if err != nil || len(page.Messages) != 1 {
			t.Fatalf("MessagesRead = %+v, %v", page, err)
		}
		a.Announce(page.Messages[0])
		if err := a.AnnounceWatch(ctx, w.ID); err != nil {
			t.Fatal(err)
		}
		var types []string
		for _, ev := range drain(stream) {
			types = append(types, ev.Type)
		}
		if want := []string{vigil.EventWatchCreated, vigil.EventWatchSettled, vigil.EventMessage}; len(types) != len(want) ||
			types[0] != want[0] || types[1] != want[1] || types[2] != want[2] {
			t.Errorf("the stream got %v, want %v once each", types, want)
		}
	})
}

// TestRewake: a message written while no event could come in is found by
// a long-poll that Rewake wakes; a Rewake that finds nothing new leaves
// the long-poll and the wait waiting.
func TestRewake(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := t.Context()
		a, b, _ := replicas()
		w, err := b.Register(ctx, vigil.RegisterRequest{Kind: vigil.KindTimer, Predicate: obj(`{"in": "1h"}`), Recipient: "r"})
		if err != nil {
			t.Fatal(err)
		}
		polled := make(chan vigil.MessagesPage, 1)
		go func() {
			p, _ := a.Messages(ctx, vigil.MessagesRequest{Recipient: "r", Reader: "x", Wait: time.Minute})
			polled <- p
		}()
		waited := make(chan *vigil.Watch, 1)
		go func() {
			got, _ := a.Wait(ctx, w.ID, time.Minute)
			waited <- got
		}()
		synctest.Wait()
		start := time.Now()
		a.Rewake()
		synctest.Wait()
		select {
		case p := <-polled:
			t.Fatalf("a Rewake with nothing new ended the long-poll with %+v", p)
		case got := <-waited:
			t.Fatalf("a Rewake with nothing new ended the wait with %s", got.State)
		default:
		}
		if _, err := b.Cancel(ctx, w.ID); err != nil {
			t.Fatal(err)
		}
		a.Rewake()
		if p := <-polled; len(p.Messages) != 1 {
			t.Errorf("after Rewake the long-poll returned %d messages, want 1", len(p.Messages))
		}
		if got := <-waited; got.State != vigil.StateCancelled {
			t.Errorf("after Rewake the wait returned %s, want cancelled", got.State)
		}
		if el := time.Since(start); el != 0 {
			t.Errorf("woken after %s of the bubble's time, want at once", el)
		}
	})
}

// TestNotSharedUnchanged: an engine not Shared sends what it publishes
// as before, and an announce is sent as it comes: a watch.settled
// announced twice goes out twice (no dedup), while its message, read
// from the mailbox, goes out once.
func TestNotSharedUnchanged(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		_, b, st := replicas()
		stream, err := b.Subscribe(ctx, vigil.EventFilter{})
		if err != nil {
			t.Fatal(err)
		}
		m, err := st.MessageCreate(ctx, &vigil.Message{ID: "m", Recipient: "r", WatchID: "w", Type: vigil.MessageFired, Text: "fired", CreatedAt: time.Now()})
		if err != nil {
			t.Fatal(err)
		}
		b.Announce(m)
		b.Announce(m)
		count := map[string]int{}
		for _, ev := range drain(stream) {
			count[ev.Type]++
		}
		if count[vigil.EventWatchSettled] != 2 || count[vigil.EventMessage] != 1 || len(count) != 2 {
			t.Errorf("not shared: the stream got %v, want watch.settled twice (no dedup) and its message once", count)
		}
	})
}

// TestCreatedAfterSettledNotSent: on a shared store, a watch's creation
// heard after its settlement (another daemon's registration whose
// notification came after a cancel made in between) is not sent: the
// stream does not say a watch began after saying it ended.
func TestCreatedAfterSettledNotSent(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := t.Context()
		a, b, st := replicas()
		stream, err := a.Subscribe(ctx, vigil.EventFilter{})
		if err != nil {
			t.Fatal(err)
		}
		w, err := b.Register(ctx, vigil.RegisterRequest{Kind: vigil.KindTimer, Predicate: obj(`{"in": "1h"}`), Recipient: "r"})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := b.Cancel(ctx, w.ID); err != nil {
			t.Fatal(err)
		}
		page, err := st.MessagesRead(ctx, vigil.MessagesReadParams{Recipient: "r", Limit: 10})
		if err != nil || len(page.Messages) != 1 {
			t.Fatalf("MessagesRead = %+v, %v", page, err)
		}
		a.Announce(page.Messages[0]) // the cancel, heard first
		a.AnnounceCreated(w)         // the registration, heard late
		var types []string
		for _, ev := range drain(stream) {
			types = append(types, ev.Type)
		}
		if want := []string{vigil.EventWatchSettled, vigil.EventMessage}; len(types) != len(want) || types[0] != want[0] || types[1] != want[1] {
			t.Errorf("the stream got %v, want %v", types, want)
		}
	})
}
