package engine_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/vigil-run/vigil"
	"github.com/vigil-run/vigil/store/memstore"
	"github.com/vigil-run/vigil/watcher"
	"github.com/vigil-run/vigil/watcher/token"
)

func newTokenEnv(t *testing.T) *env {
	return newEnv(t, envOpts{watchers: []watcher.Watcher{token.New(token.Config{})}})
}

// TestTokenCompleteOnce: registration returns the completion token once
// and stores only its hash; one completion fires the watch with its data
// and mails it; the token is never shown again.
func TestTokenCompleteOnce(t *testing.T) {
	t.Parallel()
	v := newTokenEnv(t)
	w := v.register(vigil.RegisterRequest{Kind: vigil.KindToken})
	id, secret, ok := strings.Cut(w.CompletionToken, ".")
	if !ok || id != w.ID || len(secret) != 22 {
		t.Fatalf("completion token %q: want %s.<22 base64url chars: 128 bits>", w.CompletionToken, w.ID)
	}
	if want := t0.Add(24 * time.Hour); !w.Deadline.Equal(want) {
		t.Errorf("deadline %v, want the 24 h default %v", w.Deadline, want)
	}
	stored := v.get(w.ID)
	if stored.CompletionToken != "" || strings.Contains(string(stored.Predicate), secret) || !strings.Contains(string(stored.Predicate), "token_sha256") {
		t.Fatalf("the stored watch shows %q / predicate %s: the secret must not be stored", stored.CompletionToken, stored.Predicate)
	}
	if n := v.tick(t0.Add(time.Hour)); n != 0 {
		t.Fatalf("a token watch was probed %d times before its deadline", n)
	}
	got, err := v.eng.Complete(v.ctx, vigil.CompleteRequest{Token: w.CompletionToken, Status: "success", Data: obj(`{"build":42}`)})
	if err != nil {
		t.Fatalf("Complete = %v", err)
	}
	if got.State != vigil.StateFired || got.Outcome.Observation.Facts["status"] != "success" {
		t.Fatalf("completed watch = %s %+v", got.State, got.Outcome)
	}
	if d, _ := got.Outcome.Observation.Facts["data"].(map[string]any); d["build"] == nil {
		t.Fatalf("the outcome lost the data: %+v", got.Outcome.Observation.Facts)
	}
	msgs := v.messages("agent-1")
	if len(msgs) != 1 || msgs[0].Type != vigil.MessageFired {
		t.Fatalf("mailbox = %+v, want one fired message", msgs)
	}
	if _, _, ok := v.sched.Info(w.ID); ok {
		t.Fatal("a completed watch is still scheduled")
	}
}

// TestTokenReplayAnswersToken: with a completion key, a retry of a token
// watch's registration (the same idempotency key, single or in a batch)
// answers the same completion token, which completes the watch: a caller
// that lost the first answer is not left with a watch nobody can complete.
// Without a key, or for a watch whose secret was random (made without the
// key), a replay answers none rather than a wrong one.
func TestTokenReplayAnswersToken(t *testing.T) {
	t.Parallel()
	key := []byte("0123456789abcdef0123456789abcdef")
	tokens := []watcher.Watcher{token.New(token.Config{})}
	r := vigil.RegisterRequest{Kind: vigil.KindToken, Recipient: "agent-1", IdempotencyKey: "turn-7"}

	v := newEnv(t, envOpts{watchers: tokens, completionKey: key})
	first := v.register(r)
	again := v.register(r)
	if !again.Replayed || again.ID != first.ID || again.CompletionToken == "" || again.CompletionToken != first.CompletionToken {
		t.Fatalf("replay: %s replayed=%v token %q, want %s's token %q again", again.ID, again.Replayed, again.CompletionToken, first.ID, first.CompletionToken)
	}
	res, err := v.eng.RegisterBatch(v.ctx, []vigil.RegisterRequest{r})
	if err != nil || res[0].Watch == nil || res[0].Watch.CompletionToken != first.CompletionToken {
		t.Fatalf("batch replay = %+v, %v; want the token %q again", res, err, first.CompletionToken)
	}
	if stored := v.get(first.ID); stored.CompletionToken != "" || strings.Contains(string(stored.Predicate), strings.SplitN(first.CompletionToken, ".", 2)[1]) {
		t.Fatalf("the stored watch shows its secret: %q / %s", stored.CompletionToken, stored.Predicate)
	}
	other := v.register(vigil.RegisterRequest{Kind: vigil.KindToken})
	if other.CompletionToken == first.CompletionToken || strings.SplitN(other.CompletionToken, ".", 2)[1] == strings.SplitN(first.CompletionToken, ".", 2)[1] {
		t.Fatalf("two watches share a secret: %q and %q", first.CompletionToken, other.CompletionToken)
	}
	if got, err := v.eng.Complete(v.ctx, vigil.CompleteRequest{Token: again.CompletionToken, Status: "success"}); err != nil || got.State != vigil.StateFired {
		t.Fatalf("Complete with the replayed token = %v, %v; want fired", got, err)
	}

	// Made without a key: its secret was random, and no replay can know it.
	st := memstore.New()
	plain := newEnv(t, envOpts{store: st, watchers: tokens})
	made := plain.register(r)
	if again := plain.register(r); !again.Replayed || again.CompletionToken != "" {
		t.Fatalf("replay without a key: replayed=%v token %q, want none", again.Replayed, again.CompletionToken)
	}
	keyed := newEnv(t, envOpts{store: st, watchers: tokens, completionKey: key})
	if again := keyed.register(r); !again.Replayed || again.ID != made.ID || again.CompletionToken != "" {
		t.Fatalf("replay with a key of a watch made without: replayed=%v token %q, want none (not a wrong one)", again.Replayed, again.CompletionToken)
	}
}

// TestTokenCompleteTwice: the second completion (and one after failure)
// is a conflict that changes nothing and mails nothing.
func TestTokenCompleteTwice(t *testing.T) {
	t.Parallel()
	v := newTokenEnv(t)
	w := v.register(vigil.RegisterRequest{Kind: vigil.KindToken})
	first, err := v.eng.Complete(v.ctx, vigil.CompleteRequest{Token: w.CompletionToken, Status: "failure"})
	if err != nil || first.State != vigil.StateFailed {
		t.Fatalf("first Complete = %v, %v; want failed", first, err)
	}
	_, err = v.eng.Complete(v.ctx, vigil.CompleteRequest{Token: w.CompletionToken, Status: "success"})
	if !errors.Is(err, vigil.ErrConflict) || !strings.Contains(err.Error(), "already") {
		t.Fatalf("second Complete = %v, want a conflict saying it was already used", err)
	}
	if got := v.get(w.ID); got.State != vigil.StateFailed {
		t.Fatalf("after the second completion the watch is %s, want failed still", got.State)
	}
	if msgs := v.messages("agent-1"); len(msgs) != 1 {
		t.Fatalf("mailbox has %d messages, want 1", len(msgs))
	}
}

func TestTokenUnknown(t *testing.T) {
	t.Parallel()
	v := newTokenEnv(t)
	w := v.register(vigil.RegisterRequest{Kind: vigil.KindToken})
	timerW := v.register(vigil.RegisterRequest{Kind: vigil.KindTimer, Predicate: obj(`{"in":"1h"}`)})
	id, secret, _ := strings.Cut(w.CompletionToken, ".")
	for _, tok := range []string{"", "nonsense", id, id + ".", id + ".AAAAAAAAAAAAAAAAAAAAAA", "01NOSUCHWATCH." + secret, timerW.ID + "." + secret, secret} {
		_, err := v.eng.Complete(v.ctx, vigil.CompleteRequest{Token: tok, Status: "success"})
		if vigil.ErrorCode(err) != vigil.CodeNotFound || err.Error() != "no such completion token" {
			t.Errorf("Complete(%q) = %v, want not_found with one message for every wrong token", tok, err)
		}
	}
	for _, bad := range []vigil.CompleteRequest{{Token: w.CompletionToken, Status: "done"}, {Token: w.CompletionToken, Status: "success", Data: obj(`[1]`)}} {
		if _, err := v.eng.Complete(v.ctx, bad); vigil.ErrorCode(err) != vigil.CodeInvalidRequest {
			t.Errorf("Complete(%+v) = %v, want invalid_request", bad, err)
		}
	}
	if got := v.get(w.ID); got.State != vigil.StatePending {
		t.Fatalf("wrong tokens changed the watch: %s", got.State)
	}
}

// TestTokenExpiry: with no completion the watch expires at its deadline
// through the normal path, and a completion after that is a conflict.
func TestTokenExpiry(t *testing.T) {
	t.Parallel()
	v := newTokenEnv(t)
	w := v.register(vigil.RegisterRequest{Kind: vigil.KindToken, Deadline: "2h"})
	if next, _, _ := v.sched.Info(w.ID); !next.Equal(t0.Add(2 * time.Hour)) {
		t.Fatalf("a token watch is next due %v, want only at its deadline", next)
	}
	v.tick(t0.Add(2 * time.Hour))
	if got := v.get(w.ID); got.State != vigil.StateExpired {
		t.Fatalf("at the deadline the watch is %s, want expired", got.State)
	}
	if _, err := v.eng.Complete(v.ctx, vigil.CompleteRequest{Token: w.CompletionToken, Status: "success"}); !errors.Is(err, vigil.ErrConflict) {
		t.Fatalf("Complete after expiry = %v, want conflict", err)
	}
	if msgs := v.messages("agent-1"); len(msgs) != 1 || msgs[0].Type != vigil.MessageExpired {
		t.Fatalf("mailbox = %+v, want one expired message", msgs)
	}
}

// TestTokenCanonicalizeRefusesFields: the predicate is empty; a caller
// cannot choose its own hash.
func TestTokenCanonicalizeRefusesFields(t *testing.T) {
	t.Parallel()
	v := newTokenEnv(t)
	_, err := v.eng.Register(v.ctx, vigil.RegisterRequest{Kind: vigil.KindToken, Recipient: "r", Predicate: obj(`{"token_sha256":"00"}`)})
	if vigil.ErrorCode(err) != vigil.CodeInvalidPredicate {
		t.Fatalf("Register with a chosen hash = %v, want invalid_predicate", err)
	}
}

// TestTokenCompleteRace: completions racing each other settle the watch
// once; every loser is told so.
func TestTokenCompleteRace(t *testing.T) {
	t.Parallel()
	v := newTokenEnv(t)
	w := v.register(vigil.RegisterRequest{Kind: vigil.KindToken})
	const n = 8
	errs := make(chan error, n)
	for range n {
		go func() {
			_, err := v.eng.Complete(v.ctx, vigil.CompleteRequest{Token: w.CompletionToken, Status: "success"})
			errs <- err
		}()
	}
	won := 0
	for range n {
		switch err := <-errs; {
		case err == nil:
			won++
		case !errors.Is(err, vigil.ErrConflict):
			t.Errorf("a racing completion = %v, want nil or conflict", err)
		}
	}
	if won != 1 {
		t.Fatalf("%d completions won, want exactly 1", won)
	}
	if msgs := v.messages("agent-1"); len(msgs) != 1 {
		t.Fatalf("mailbox has %d messages, want 1", len(msgs))
	}
}

// TestTokenCompletionAfterDeadlineExpires: a deadline is final. A
// completion that comes after it, while the expiry due at the deadline
// has not been processed yet, answers conflict saying the watch expired,
// and changes nothing: the expiry follows, mailed once. It fired the
// watch. One that comes at the deadline itself is in time, as the final
// probe's answer would be.
func TestTokenCompletionAfterDeadlineExpires(t *testing.T) {
	t.Parallel()
	v := newTokenEnv(t)
	late := v.register(vigil.RegisterRequest{Kind: vigil.KindToken, Deadline: "1h", Note: "late"})
	v.clock.Set(t0.Add(time.Hour + time.Second)) // past the deadline; no tick yet
	_, err := v.eng.Complete(v.ctx, vigil.CompleteRequest{Token: late.CompletionToken, Status: "success"})
	var ve *vigil.Error
	if !errors.As(err, &ve) || ve.Code != vigil.CodeConflict || !strings.Contains(ve.Message, "expired") {
		t.Fatalf("a completion after the deadline: Complete = %v, want conflict saying the watch expired", err)
	}
	if got := v.get(late.ID).State; got != vigil.StatePending {
		t.Fatalf("a completion after the deadline left the watch %s; want it untouched for its expiry", got)
	}
	v.tick(t0.Add(time.Hour + time.Second))
	if got := v.get(late.ID); got.State != vigil.StateExpired {
		t.Fatalf("after its deadline's turn the watch is %s, want expired", got.State)
	}
	msgs := v.messages("agent-1")
	if len(msgs) != 1 || msgs[0].Type != vigil.MessageExpired {
		t.Fatalf("mailbox = %+v, want one expired message", msgs)
	}

	// At the deadline itself: in time.
	w := v.register(vigil.RegisterRequest{Kind: vigil.KindToken, Deadline: "1h", Note: "buzzer"})
	v.clock.Set(w.Deadline)
	got, err := v.eng.Complete(v.ctx, vigil.CompleteRequest{Token: w.CompletionToken, Status: "success"})
	if err != nil || got.State != vigil.StateFired {
		t.Fatalf("a completion at the deadline: %v, %v; want fired", got, err)
	}
}
