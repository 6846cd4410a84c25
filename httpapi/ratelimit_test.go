package httpapi_test

import (
	"context"
	"net/http"
	"strconv"
	"testing"

	"github.com/vigil-run/vigil"
	"github.com/vigil-run/vigil/httpapi"
)

// TestRateLimit: a scoped token past its burst of registrations is
// answered 429 rate_limited with Retry-After; another token and the admin
// are not held back by it.
func TestRateLimit(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(o *httpapi.Options) {
		o.RegisterRate, o.RegisterBurst = 0.5, 2
		o.AuthenticateFunc = func(_ context.Context, token string) (vigil.Scope, bool, error) {
			return vigil.Scope{Recipients: []string{"r"}, TokenID: token}, token == "vgl_a" || token == "vgl_b", nil
		}
	})
	reg := func(token string) *http.Response {
		resp, _ := e.do(t, request{method: "POST", path: "/v1/watches", body: `{"kind":"timer","recipient":"r","predicate":{"in":"1m"}}`,
			header: map[string]string{"Authorization": "Bearer " + token}})
		return resp
	}
	for i := range 2 {
		if resp := reg("vgl_a"); resp.StatusCode >= 300 {
			t.Fatalf("registration %d within the burst: %s", i, resp.Status)
		}
	}
	resp := reg("vgl_a")
	if resp.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("registration past the burst: %s, want 429", resp.Status)
	}
	if n, err := strconv.Atoi(resp.Header.Get("Retry-After")); err != nil || n < 1 || n > 2 {
		t.Errorf("Retry-After = %q, want 1 or 2 seconds", resp.Header.Get("Retry-After"))
	}
	if resp := reg("vgl_b"); resp.StatusCode >= 300 {
		t.Errorf("another token: %s, want it not limited", resp.Status)
	}
	for i := range 5 {
		if resp := reg(adminToken); resp.StatusCode >= 300 {
			t.Errorf("admin registration %d: %s, want the admin not limited", i, resp.Status)
		}
	}
}

// TestTokenRoutesWithoutService: with no token service, the token routes
// are not found, even to the admin.
func TestTokenRoutesWithoutService(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	for _, r := range []request{{method: "GET", path: "/v1/tokens"}, {method: "POST", path: "/v1/tokens", body: `{"recipients":["a"]}`},
		{method: "POST", path: "/v1/tokens/tok_1/revoke"}} {
		resp, b := e.do(t, r)
		if resp.StatusCode != http.StatusNotFound || decodeError(t, b).Code != vigil.CodeNotFound {
			t.Errorf("%s %s = %s %s, want 404 not_found", r.method, r.path, resp.Status, b)
		}
	}
}

// TestLimitedService: a service wrapped with Limited shares the API's
// buckets: registrations through it count, and past the burst it answers
// rate_limited.
func TestLimitedService(t *testing.T) {
	t.Parallel()
	f := newFake()
	api := httpapi.New(httpapi.Options{Service: f, AdminToken: adminToken, RegisterRate: 0.5, RegisterBurst: 2})
	t.Cleanup(api.Close)
	svc := api.Limited(f)
	ctx := vigil.WithScope(context.Background(), vigil.Scope{Recipients: []string{"r"}, TokenID: "tok_a"})
	req := vigil.RegisterRequest{Kind: vigil.KindTimer, Recipient: "r", Predicate: []byte(`{"in":"1m"}`)}
	for i := range 2 {
		if _, err := svc.Register(ctx, req); err != nil {
			t.Fatalf("registration %d within the burst: %v", i, err)
		}
	}
	if _, err := svc.Register(ctx, req); vigil.ErrorCode(err) != vigil.CodeRateLimited {
		t.Errorf("registration past the burst = %v, want rate_limited", err)
	}
	if _, err := svc.Register(context.Background(), req); err != nil {
		t.Errorf("the admin = %v, want it not limited", err)
	}
}

// TestRateLimitBatch: each item of a batch takes a registration from the
// token's bucket, all or none: a batch that fits passes, one past what is
// left is refused whole with Retry-After, one larger than the burst is
// refused with no wait; the admin is not limited.
func TestRateLimitBatch(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(o *httpapi.Options) {
		o.RegisterRate, o.RegisterBurst = 0.001, 3 // no refill within the test
		o.AuthenticateFunc = func(_ context.Context, token string) (vigil.Scope, bool, error) {
			return vigil.Scope{Recipients: []string{"r"}, TokenID: token}, token == "vgl_a", nil
		}
	})
	item := `{"kind":"timer","recipient":"r","predicate":{"in":"1m"}}`
	batch := func(token string, n int) (*http.Response, []byte) {
		body := `{"watches":[` + item
		for range n - 1 {
			body += "," + item
		}
		return e.do(t, request{method: "POST", path: "/v1/watches/batch", body: body + `]}`,
			header: map[string]string{"Authorization": "Bearer " + token}})
	}
	if resp, b := batch("vgl_a", 4); resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") != "" ||
		decodeError(t, b).Code != vigil.CodeRateLimited {
		t.Errorf("a batch larger than the burst: %s %s (Retry-After %q), want 429 rate_limited with no Retry-After", resp.Status, b, resp.Header.Get("Retry-After"))
	}
	if resp, b := batch("vgl_a", 2); resp.StatusCode != http.StatusOK {
		t.Fatalf("a batch within the burst: %s %s", resp.Status, b)
	}
	if resp, _ := batch("vgl_a", 2); resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") == "" {
		t.Errorf("a batch past what is left: %s (Retry-After %q), want 429 with Retry-After", resp.Status, resp.Header.Get("Retry-After"))
	}
	if resp, b := batch("vgl_a", 1); resp.StatusCode != http.StatusOK {
		t.Errorf("the one registration left: %s %s, want it taken (a refused batch takes none)", resp.Status, b)
	}
	if resp, b := batch(adminToken, 10); resp.StatusCode != http.StatusOK {
		t.Errorf("the admin's batch: %s %s", resp.Status, b)
	}
}
