package token_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/vigil-run/vigil"
	"github.com/vigil-run/vigil/watcher"
	"github.com/vigil-run/vigil/watcher/token"
)

func TestCanonicalizeMakesAFreshSecretAndKeepsOnlyItsHash(t *testing.T) {
	t.Parallel()
	w := token.New(token.Config{})
	a, err := w.Canonicalize(context.Background(), json.RawMessage(`{}`), time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := w.Canonicalize(context.Background(), json.RawMessage(`{}`), time.Time{})
	if a.Secret == b.Secret || string(a.Predicate) == string(b.Predicate) {
		t.Fatal("two registrations share a secret or a predicate")
	}
	if len(a.Secret) != 22 || strings.Contains(string(a.Predicate), a.Secret) {
		t.Fatalf("secret %q (want 22 base64url chars) / predicate %s (must not hold it)", a.Secret, a.Predicate)
	}
	if !w.CheckSecret(a.Predicate, a.Secret) || w.CheckSecret(a.Predicate, b.Secret) || w.CheckSecret(a.Predicate, "") || w.CheckSecret(json.RawMessage(`{}`), a.Secret) {
		t.Fatal("CheckSecret accepts the wrong secret or refuses the right one")
	}
	if _, err := w.Canonicalize(context.Background(), json.RawMessage(`{"secret":"x"}`), time.Time{}); vigil.ErrorCode(err) != vigil.CodeInvalidPredicate {
		t.Fatalf("a field in the predicate = %v, want invalid_predicate", err)
	}
}

func TestProbeIsPendingAndCompletionDecides(t *testing.T) {
	t.Parallel()
	w := token.New(token.Config{})
	obs, err := watcher.Run(context.Background(), w, watcher.Probe{Kind: vigil.KindToken, Predicate: json.RawMessage(`{}`)})
	if err != nil || obs.Verdict != vigil.VerdictPending {
		t.Fatalf("Probe = %+v, %v; want pending", obs, err)
	}
	if _, err := w.Probe(context.Background(), watcher.Probe{Kind: vigil.KindHTTP}); err == nil {
		t.Fatal("a probe of the wrong kind did not fail")
	}
	if v := w.Completion("success", json.RawMessage(`{"a":1}`)); v.Verdict != vigil.VerdictSatisfied || v.Facts["data"] == nil {
		t.Fatalf("success = %+v", v)
	}
	if v := w.Completion("failure", nil); v.Verdict != vigil.VerdictFailed {
		t.Fatalf("failure = %+v", v)
	}
}
