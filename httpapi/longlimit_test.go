package httpapi_test

import (
	"context"
	"io"
	"net/http"
	"testing"

	"github.com/vigil-run/vigil"
	"github.com/vigil-run/vigil/httpapi"
)

// TestLongCallsBoundedPerToken: a scoped token holds at most MaxLongCalls
// event streams and long-polls at once; the one past it is answered 429
// rate_limited with Retry-After, a short request of the same token and
// another token's stream still get in, the admin is not bounded, and a
// stream that ends frees its slot.
func TestLongCallsBoundedPerToken(t *testing.T) {
	t.Parallel()
	const max = 3
	e := newEnv(t, func(o *httpapi.Options) {
		o.MaxLongCalls = max
		o.AuthenticateFunc = func(_ context.Context, token string) (vigil.Scope, bool, error) {
			return vigil.Scope{TokenID: "tok_" + token}, token == "vgl_a" || token == "vgl_b", nil
		}
	})
	e.fake.set(func(f *fake) { f.block = true })
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	// open sends GET path with token and returns the response once its
	// header is in, its body still open, and the cancel that ends it.
	open := func(token, path string) (*http.Response, context.CancelFunc) {
		t.Helper()
		rctx, rcancel := context.WithCancel(ctx)
		req, err := http.NewRequestWithContext(rctx, "GET", e.ts.URL+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := e.ts.Client().Do(req)
		if err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
		t.Cleanup(func() { resp.Body.Close() })
		return resp, func() { rcancel(); resp.Body.Close() }
	}
	var closers []context.CancelFunc
	for i := range max {
		resp, stop := open("vgl_a", "/v1/events")
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("stream %d of %d: %s", i+1, max, resp.Status)
		}
		closers = append(closers, stop)
	}
	refused := func(what, path string) {
		t.Helper()
		resp, stop := open("vgl_a", path)
		defer stop()
		if resp.StatusCode != http.StatusTooManyRequests {
			t.Fatalf("%s past the bound: %s, want 429 rate_limited", what, resp.Status)
		}
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusTooManyRequests || decodeError(t, b).Code != vigil.CodeRateLimited {
			t.Fatalf("%s past the bound: %s %s, want 429 rate_limited", what, resp.Status, b)
		}
		if resp.Header.Get("Retry-After") == "" {
			t.Errorf("%s past the bound: no Retry-After", what)
		}
	}
	refused("a stream", "/v1/events")
	refused("a wait", "/v1/watches/w1/wait?timeout=1m")
	refused("a mailbox long-poll", "/v1/recipients/r/messages?wait=1m")
	if resp, b := e.do(t, request{method: "GET", path: "/v1/recipients/r/messages", header: map[string]string{"Authorization": "Bearer vgl_a"}}); resp.StatusCode != http.StatusOK {
		t.Errorf("a read without wait: %s %s, want it not bounded", resp.Status, b)
	}
	var others []context.CancelFunc
	resp, stop := open("vgl_b", "/v1/events")
	if resp.StatusCode != http.StatusOK {
		t.Errorf("another token's stream: %s, want 200", resp.Status)
	}
	others = append(others, stop)
	for i := range max + 1 {
		resp, stop := open(adminToken, "/v1/events")
		if resp.StatusCode != http.StatusOK {
			t.Errorf("admin stream %d: %s, want the admin not bounded", i+1, resp.Status)
		}
		others = append(others, stop)
	}
	// A stream its client closes frees its slot.
	before := e.api.LongCalls()
	closers[0]()
	waitFor(t, func() bool { return e.api.LongCalls() < before })
	resp, stop = open("vgl_a", "/v1/events")
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("a stream once one of the token's closed: %s, want 200", resp.Status)
	}
	stop()
	for _, c := range append(closers[1:], others...) {
		c()
	}
	waitFor(t, func() bool { return e.api.LongCalls() == 0 })
}
