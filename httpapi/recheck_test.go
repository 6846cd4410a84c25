package httpapi_test

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vigil-run/vigil"
	"github.com/vigil-run/vigil/httpapi"
)

// TestRevokedTokenEndsRunningRequests: a scoped token that stops
// authenticating ends its event stream and its long-poll within the
// recheck interval; the long-poll is answered 401.
func TestRevokedTokenEndsRunningRequests(t *testing.T) {
	t.Parallel()
	var valid atomic.Bool
	valid.Store(true)
	e := newEnv(t, func(o *httpapi.Options) {
		o.Recheck = 20 * time.Millisecond
		o.AuthenticateFunc = func(_ context.Context, token string) (vigil.Scope, bool, error) {
			return vigil.Scope{Recipients: []string{"r"}, TokenID: "tok_s"}, token == "vgl_s" && valid.Load(), nil
		}
	})
	e.fake.mu.Lock()
	e.fake.block = true
	e.fake.mu.Unlock()

	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	get := func(path string) (*http.Response, error) {
		req, _ := http.NewRequestWithContext(ctx, "GET", e.ts.URL+path, nil)
		req.Header.Set("Authorization", "Bearer vgl_s")
		return e.ts.Client().Do(req)
	}
	stream, err := get("/v1/events?recipient=r")
	if err != nil || stream.StatusCode != http.StatusOK {
		t.Fatalf("events: %v %v", stream, err)
	}
	defer stream.Body.Close()
	waited := make(chan *http.Response, 1)
	go func() {
		resp, err := get("/v1/watches/01J0000000000000000000000A/wait?timeout=50s")
		if err != nil {
			t.Errorf("wait: %v", err)
		}
		waited <- resp
	}()
	time.Sleep(100 * time.Millisecond) // both are running, through rechecks
	valid.Store(false)
	ended := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(stream.Body)
		for sc.Scan() {
		}
		close(ended)
	}()
	select {
	case <-ended:
	case <-time.After(5 * time.Second):
		t.Fatal("the event stream of a revoked token is still open")
	}
	select {
	case resp := <-waited:
		if resp == nil || resp.StatusCode != http.StatusUnauthorized {
			t.Fatalf("the long-poll of a revoked token = %v, want 401", resp)
		}
		resp.Body.Close()
	case <-time.After(5 * time.Second):
		t.Fatal("the long-poll of a revoked token is still running")
	}
}

// TestRevokedTokenEndsObservingRegistration: a registration waiting for
// its first observation (observe=true) when its token stops authenticating
// is answered 401, as a long-poll is, not left with no answer at all.
func TestRevokedTokenEndsObservingRegistration(t *testing.T) {
	t.Parallel()
	var calls atomic.Int32
	e := newEnv(t, func(o *httpapi.Options) {
		o.Recheck = 20 * time.Millisecond
		o.AuthenticateFunc = func(_ context.Context, token string) (vigil.Scope, bool, error) {
			// Valid for the request itself, revoked at its first re-check.
			return vigil.Scope{Recipients: []string{"r"}, TokenID: "tok_s"}, token == "vgl_s" && calls.Add(1) == 1, nil
		}
	})
	e.fake.mu.Lock()
	e.fake.block = true
	e.fake.mu.Unlock()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "POST", e.ts.URL+"/v1/watches?observe=true",
		strings.NewReader(`{"kind":"timer","recipient":"r","predicate":{"in":"1h"}}`))
	req.Header.Set("Authorization", "Bearer vgl_s")
	req.Header.Set("Content-Type", "application/json")
	resp, err := e.ts.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusUnauthorized || !strings.Contains(string(b), `"unauthorized"`) {
		t.Fatalf("an observing registration whose token was revoked = %d %q, want 401 unauthorized", resp.StatusCode, b)
	}
}
