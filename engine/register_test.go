package engine_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vigil-run/vigil"
	"github.com/vigil-run/vigil/watcher"
	"github.com/vigil-run/vigil/watcher/watchertest"
)

func TestIdentityDedup(t *testing.T) {
	t.Parallel()
	v := newEnv(t, envOpts{watchers: []watcher.Watcher{watchertest.NeverSettles(vigil.KindHTTP)}})
	a := v.register(vigil.RegisterRequest{Kind: vigil.KindHTTP, Predicate: obj(`{"url":"x","n":1}`), Note: "first"})
	b := v.register(vigil.RegisterRequest{Kind: vigil.KindHTTP, Predicate: obj(`{"n":1, "url":"x"}`), Note: "second", Every: "20s"})
	if a.Existing || !b.Existing || a.ID != b.ID {
		t.Fatalf("second registration of the same condition: existing=%v id %s vs %s; want existing, same id", b.Existing, b.ID, a.ID)
	}
	other := v.register(vigil.RegisterRequest{Kind: vigil.KindHTTP, Predicate: obj(`{"url":"x","n":1}`), Recipient: "agent-2"})
	if other.Existing || other.ID == a.ID {
		t.Fatal("another recipient watching the same thing must get its own watch")
	}
	unless := v.register(vigil.RegisterRequest{Kind: vigil.KindHTTP, Predicate: obj(`{"url":"x","n":1}`), Mode: vigil.ModeUnless})
	if unless.Existing {
		t.Fatal("mode unless is a different question from until")
	}
}

func TestIdempotencyReplayAndConflict(t *testing.T) {
	t.Parallel()
	v := newEnv(t, envOpts{})
	r := vigil.RegisterRequest{Kind: vigil.KindTimer, Predicate: obj(`{"in":"10m"}`), IdempotencyKey: "turn-18-call-3", Recipient: "agent-1"}
	first := v.register(r)
	v.clock.Add(3 * time.Second) // "in 10m" now means another instant: the replay must not care
	again := v.register(r)
	if !again.Replayed || again.ID != first.ID {
		t.Fatalf("retry with the same key: replayed=%v id %s; want replayed %s", again.Replayed, again.ID, first.ID)
	}
	r.Note = "different body"
	_, err := v.eng.Register(v.ctx, r)
	if vigil.ErrorCode(err) != vigil.CodeIdempotencyConflict {
		t.Fatalf("same key, different body: err %v, want idempotency_conflict", err)
	}
	page, _ := v.eng.Watches(v.ctx, vigil.ListRequest{})
	if len(page.Watches) != 1 {
		t.Fatalf("%d watches after a replay and a conflict, want 1", len(page.Watches))
	}
	// After 24 h the key is free again.
	v.clock.Add(25 * time.Hour)
	later := v.register(vigil.RegisterRequest{Kind: vigil.KindTimer, Predicate: obj(`{"in":"10m"}`), IdempotencyKey: "turn-18-call-3", Recipient: "agent-1", Note: "new day"})
	if later.Replayed {
		t.Fatal("an idempotency key older than 24 h still replays")
	}
}

func TestPerRecipientCapUnderConcurrency(t *testing.T) {
	t.Parallel()
	l := vigil.DefaultLimits()
	l.MaxActivePerRecipient = 7
	v := newEnv(t, envOpts{limits: &l})
	var wg sync.WaitGroup
	var mu sync.Mutex
	codes := map[vigil.Code]int{}
	for i := range 20 {
		wg.Go(func() {
			_, err := v.eng.Register(context.Background(), vigil.RegisterRequest{Kind: vigil.KindTimer,
				Predicate: obj(fmt.Sprintf(`{"at":"2026-11-30T13:00:%02dZ"}`, i)), Recipient: "agent-1"})
			mu.Lock()
			codes[vigil.ErrorCode(err)]++
			mu.Unlock()
		})
	}
	wg.Wait()
	if codes[""] != 7 || codes[vigil.CodeQuotaExceeded] != 13 {
		t.Fatalf("20 concurrent registrations under a cap of 7: %v; want 7 ok and 13 quota_exceeded", codes)
	}
}

func TestRefusalsWriteNothing(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name  string
		req   vigil.RegisterRequest
		code  vigil.Code
		field string
	}{
		{"unknown kind", vigil.RegisterRequest{Kind: "hologram"}, vigil.CodeUnknownKind, "kind"},
		{"no kind", vigil.RegisterRequest{}, vigil.CodeInvalidRequest, "kind"},
		{"malformed predicate", vigil.RegisterRequest{Kind: vigil.KindTimer, Predicate: obj(`{"in":"soon"}`)}, vigil.CodeInvalidPredicate, "predicate.in"},
		{"unknown predicate field", vigil.RegisterRequest{Kind: vigil.KindTimer, Predicate: obj(`{"in":"1m","colour":"red"}`)}, vigil.CodeInvalidPredicate, "predicate.colour"},
		{"interval below floor", vigil.RegisterRequest{Kind: vigil.KindHTTP, Predicate: obj(`{}`), Every: "500ms"}, vigil.CodeIntervalTooSmall, "every"},
		{"deadline beyond ceiling", vigil.RegisterRequest{Kind: vigil.KindHTTP, Predicate: obj(`{}`), Deadline: "8d"}, vigil.CodeDeadlineOutOfRange, "deadline"},
		{"deadline in the past", vigil.RegisterRequest{Kind: vigil.KindHTTP, Predicate: obj(`{}`), Deadline: "2020-01-01T00:00:00Z"}, vigil.CodeDeadlineOutOfRange, "deadline"},
		{"deadline zero", vigil.RegisterRequest{Kind: vigil.KindHTTP, Predicate: obj(`{}`), Deadline: "0s"}, vigil.CodeDeadlineOutOfRange, "deadline"},
		{"bad duration", vigil.RegisterRequest{Kind: vigil.KindHTTP, Predicate: obj(`{}`), Every: "often"}, vigil.CodeInvalidRequest, "every"},
		{"timer too far", vigil.RegisterRequest{Kind: vigil.KindTimer, Predicate: obj(`{"in":"9d"}`)}, vigil.CodeDeadlineOutOfRange, "predicate.at"},
		{"bad mode", vigil.RegisterRequest{Kind: vigil.KindHTTP, Predicate: obj(`{}`), Mode: "maybe"}, vigil.CodeInvalidRequest, "mode"},
		{"bad recipient", vigil.RegisterRequest{Kind: vigil.KindHTTP, Predicate: obj(`{}`), Recipient: "a/b"}, vigil.CodeInvalidRequest, "recipient"},
		{"predicate too big", vigil.RegisterRequest{Kind: vigil.KindHTTP, Predicate: obj(`{"x":"` + strings.Repeat("a", 130<<10) + `"}`)}, vigil.CodeInvalidPredicate, "predicate"},
		{"note too big", vigil.RegisterRequest{Kind: vigil.KindHTTP, Predicate: obj(`{}`), Note: strings.Repeat("n", 5000)}, vigil.CodeInvalidRequest, "note"},
		{"chain too deep", vigil.RegisterRequest{Kind: vigil.KindHTTP, Predicate: obj(`{}`), ChainDepth: 4}, vigil.CodeChainTooDeep, ""},
		{"every on a timer", vigil.RegisterRequest{Kind: vigil.KindTimer, Predicate: obj(`{"in":"1m"}`), Every: "5s"}, vigil.CodeInvalidRequest, "every"},
	}
	v := newEnv(t, envOpts{watchers: []watcher.Watcher{watchertest.NeverSettles(vigil.KindHTTP)}})
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if c.req.Recipient == "" {
				c.req.Recipient = "agent-1"
			}
			before := v.store.writes.Load()
			_, err := v.eng.Register(v.ctx, c.req)
			var ve *vigil.Error
			if !errors.As(err, &ve) || ve.Code != c.code || ve.Field != c.field {
				t.Fatalf("Register = %v (%#v), want code %s field %q", err, ve, c.code, c.field)
			}
			if ve.Message == "" {
				t.Fatal("a refusal without a sentence")
			}
			if n := v.store.writes.Load() - before; n != 0 {
				t.Fatalf("a refusal wrote %d times", n)
			}
		})
	}
	if v.sched.Len() != 0 {
		t.Fatal("a refusal armed the scheduler")
	}
}

func TestObserveAnswersAtCreation(t *testing.T) {
	t.Parallel()
	v := newEnv(t, envOpts{watchers: []watcher.Watcher{watchertest.SettlesAfter(vigil.KindHTTP, 1), watchertest.NeverSettles(vigil.KindTCP)}})
	// Run the loop so the first probe happens while Register waits.
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- v.eng.Run(ctx) }()
	defer func() { cancel(); <-done }()

	w := v.register(vigil.RegisterRequest{Kind: vigil.KindHTTP, Predicate: obj(`{}`), Observe: true})
	if w.State != vigil.StateFired || !w.AnsweredAtCreation || w.Outcome == nil {
		t.Fatalf("observe on an already-true condition: state %s answered=%v; want fired, answered_at_creation", w.State, w.AnsweredAtCreation)
	}
	if msgs := v.messages("agent-1"); len(msgs) != 0 {
		t.Fatalf("an answer returned at creation was also mailed: %+v", msgs)
	}
	p := v.register(vigil.RegisterRequest{Kind: vigil.KindTCP, Predicate: obj(`{}`), Observe: true})
	if p.State != vigil.StatePending || p.LastObservation == nil || p.LastObservation.Verdict != vigil.VerdictPending {
		t.Fatalf("observe on a pending condition: state %s last %+v; want pending with the first observation", p.State, p.LastObservation)
	}
}
