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
