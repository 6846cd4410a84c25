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
