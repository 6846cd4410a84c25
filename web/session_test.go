package web_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vigil-run/vigil"
	"github.com/vigil-run/vigil/engine"
	"github.com/vigil-run/vigil/store/memstore"
	"github.com/vigil-run/vigil/watcher"
	"github.com/vigil-run/vigil/web"
)

// TestPanelSessionEndsWhenTokenRevoked: a scoped session re-checks its
// token once the recheck interval has passed (on the panel's clock) and
// ends when it no longer authenticates; before that it is not asked again.
func TestPanelSessionEndsWhenTokenRevoked(t *testing.T) {
	var (
		mu    sync.Mutex
		valid = true
		asked int
		now   = time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	)
	auth := func(_ context.Context, token string) (vigil.Scope, bool, error) {
		mu.Lock()
		defer mu.Unlock()
		asked++
		return vigil.Scope{Recipients: []string{"agent-a"}}, token == "vgl_scoped" && valid, nil
	}
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	eng := engine.New(engine.Config{Store: memstore.New(), Watchers: watcher.NewRegistry()})
	p := web.New(web.Options{Service: eng, AuthenticateFunc: auth, NowFunc: clock, Recheck: time.Minute})
	srv := httptest.NewServer(p.Handler())
	defer srv.Close()
	hc := &http.Client{Jar: newJar()}
	resp, err := hc.PostForm(srv.URL+"/ui/signin", url.Values{"token": {"vgl_scoped"}})
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("sign in: %v %v", resp, err)
	}
	resp.Body.Close()
	signedIn := func() bool {
		_, body := get(t, hc, srv.URL+"/")
		return !strings.Contains(body, `id="token"`)
	}
	mu.Lock()
	valid, asked = false, 0 // revoked; the interval has not passed
	mu.Unlock()
	if !signedIn() || asked != 0 {
		t.Fatalf("within the interval: signed in %v, token asked %d times; want still in, not asked", signedIn(), asked)
	}
	mu.Lock()
	now = now.Add(time.Minute)
	mu.Unlock()
	if signedIn() {
		t.Fatalf("the session of a revoked token still opens the panel after the recheck interval")
	}
	if p.Sessions() != 0 {
		t.Errorf("%d sessions kept, want the revoked one gone", p.Sessions())
	}
}

// TestPanelSessionsBoundedPerToken: signing in again and again with one
// token keeps only that token's newest sessions, its oldest going first;
// the admin's session, and another token's, are never pushed out by it,
// not even by as many sign-ins as the panel keeps sessions.
func TestPanelSessionsBoundedPerToken(t *testing.T) {
	var (
		mu  sync.Mutex
		now = time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	)
	// Every reading of the clock is a second later, so that sessions
	// are used in a known order.
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); now = now.Add(time.Second); return now }
	auth := func(_ context.Context, token string) (vigil.Scope, bool, error) {
		return vigil.Scope{Recipients: []string{"agent-a"}, TokenID: "tok_" + token}, token == "vgl_a" || token == "vgl_b", nil
	}
	eng := engine.New(engine.Config{Store: memstore.New(), Watchers: watcher.NewRegistry()})
	p := web.New(web.Options{Service: eng, AdminToken: "adm-panel-bound", AuthenticateFunc: auth, NowFunc: clock, SessionTTL: 1000 * time.Hour})
	srv := httptest.NewServer(p.Handler())
	defer srv.Close()
	signIn := func(token string) *http.Client {
		t.Helper()
		hc := &http.Client{Jar: newJar()}
		resp, err := hc.PostForm(srv.URL+"/ui/signin", url.Values{"token": {token}})
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("sign in with %s: %v %v", token, resp, err)
		}
		resp.Body.Close()
		return hc
	}
	signedIn := func(hc *http.Client) bool {
		_, body := get(t, hc, srv.URL+"/")
		return !strings.Contains(body, `id="token"`)
	}
	admin, b := signIn("adm-panel-bound"), signIn("vgl_b")
	var a []*http.Client
	for range web.MaxSessionsPerToken + 1 {
		a = append(a, signIn("vgl_a"))
	}
	if n := p.Sessions(); n != 2+web.MaxSessionsPerToken {
		t.Errorf("%d sessions kept, want %d: the admin's, B's and A's newest %d", n, 2+web.MaxSessionsPerToken, web.MaxSessionsPerToken)
	}
	if signedIn(a[0]) {
		t.Error("A's oldest session still opens the panel past A's bound")
	}
	if !signedIn(a[len(a)-1]) {
		t.Error("A's newest session does not open the panel")
	}
	// As many sign-ins of A as the panel keeps sessions in all.
	p.OpenSessionsOf("vgl_a", vigil.Scope{Recipients: []string{"agent-a"}, TokenID: "tok_vgl_a"}, web.MaxSessions)
	if !signedIn(admin) {
		t.Error("the admin's session was pushed out by A's sign-ins")
	}
	if !signedIn(b) {
		t.Error("B's session was pushed out by A's sign-ins")
	}
	if n := p.Sessions(); n != 2+web.MaxSessionsPerToken {
		t.Errorf("%d sessions kept, want %d", n, 2+web.MaxSessionsPerToken)
	}
}
