package httpapi_test

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/vigil-run/vigil"
	"github.com/vigil-run/vigil/httpapi"
)

// TestRateTakeFunc: with RateTakeFunc the limit's buckets are where it
// keeps them: each registration of a scoped token asks it (key, rate,
// burst, how many), its refusal is 429 rate_limited with its wait in
// Retry-After, and its failure is an internal error, not a refusal.
func TestRateTakeFunc(t *testing.T) {
	t.Parallel()
	type call struct {
		key      string
		rate     float64
		burst, n int
	}
	var (
		mu    sync.Mutex
		calls []call
		next  = func() (bool, time.Duration, error) { return true, 0, nil }
	)
	e := newEnv(t, func(o *httpapi.Options) {
		o.RegisterRate, o.RegisterBurst = 2, 5
		o.AuthenticateFunc = func(_ context.Context, token string) (vigil.Scope, bool, error) {
			return vigil.Scope{Recipients: []string{"r"}, TokenID: "tok_a"}, token == "vgl_a", nil
		}
		o.RateTakeFunc = func(_ context.Context, key string, rate float64, burst, n int, _ time.Time) (bool, time.Duration, error) {
			mu.Lock()
			defer mu.Unlock()
			calls = append(calls, call{key, rate, burst, n})
			return next()
		}
	})
	reg := func() *http.Response {
		resp, _ := e.do(t, request{method: "POST", path: "/v1/watches", body: `{"kind":"timer","recipient":"r","predicate":{"in":"1m"}}`,
			header: map[string]string{"Authorization": "Bearer vgl_a"}})
		return resp
	}
	if resp := reg(); resp.StatusCode >= 300 {
		t.Fatalf("a registration the bucket allows: %s", resp.Status)
	}
	mu.Lock()
	next = func() (bool, time.Duration, error) { return false, 2500 * time.Millisecond, nil }
	mu.Unlock()
	resp := reg()
	if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") != "3" {
		t.Errorf("a registration the bucket refuses: %s, Retry-After %q; want 429, 3", resp.Status, resp.Header.Get("Retry-After"))
	}
	mu.Lock()
	next = func() (bool, time.Duration, error) { return false, 0, errors.New("database down") }
	mu.Unlock()
	if resp := reg(); resp.StatusCode != http.StatusInternalServerError || resp.Header.Get("Retry-After") != "" {
		t.Errorf("a registration the bucket cannot answer: %s, Retry-After %q; want 500, none", resp.Status, resp.Header.Get("Retry-After"))
	}
	if resp := reg(); resp.StatusCode == http.StatusCreated {
		t.Error("a registration the bucket cannot answer was made")
	}
	mu.Lock()
	defer mu.Unlock()
	for i, c := range calls {
		if c != (call{"tok_a", 2, 5, 1}) {
			t.Errorf("call %d = %+v, want the token's id, rate 2, burst 5, 1", i, c)
		}
	}
	if len(calls) != 4 {
		t.Errorf("%d calls, want one a registration", len(calls))
	}
}
