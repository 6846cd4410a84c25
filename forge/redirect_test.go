package forge_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/vigil-run/vigil/forge"
)

// TestRedirectToAnotherOriginKeepsTheToken: a forge (or a proxy in front
// of it) that redirects a read to another port or scheme of its host
// must not be sent the token there: net/http keeps Authorization on a
// redirect to the same host name, whatever its port or scheme (a
// plain-http listener, another service on the machine). The read fails
// as unavailable, naming the URL setting, as an off-host next link does.
func TestRedirectToAnotherOriginKeepsTheToken(t *testing.T) {
	var leaked atomic.Int32
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "" {
			leaked.Add(1)
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"total_count":0,"check_runs":[]}`)
	}))
	defer other.Close()
	forgeSrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, other.URL+r.URL.RequestURI(), http.StatusMovedPermanently)
	}))
	defer forgeSrv.Close()

	set, err := forge.New(forge.Settings{GitHub: forge.Endpoint{URL: forgeSrv.URL, Token: secret}}, forge.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer set.Close()
	c, _ := set.Client(forge.GitHub)
	_, err = c.Checks(context.Background(), "acme/api", sha, t0, fresh)
	if n := leaked.Load(); n > 0 {
		t.Fatalf("the token was sent to %s, another origin than the configured %s, %d times", other.URL, forgeSrv.URL, n)
	}
	if err == nil || forge.IsPermanent(err) || !strings.Contains(err.Error(), "forges.github.url") || strings.Contains(err.Error(), secret) {
		t.Fatalf("redirected read: %v, want a transient error naming forges.github.url", err)
	}
}

// TestRedirectWithinTheOriginIsFollowed: a renamed repository's 301 to
// the same host is followed, with the token.
func TestRedirectWithinTheOriginIsFollowed(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if p, ok := strings.CutPrefix(r.URL.Path, "/repos/acme/old/"); ok {
			http.Redirect(w, r, "/repos/acme/api/"+p+"?"+r.URL.RawQuery, http.StatusMovedPermanently)
			return
		}
		if r.Header.Get("Authorization") != "Bearer "+secret {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		switch {
		case strings.HasSuffix(r.URL.Path, "/check-runs"):
			fmt.Fprint(w, `{"total_count":1,"check_runs":[{"id":1,"name":"build","status":"completed","conclusion":"success","check_suite":{"id":7},"app":{"id":1,"slug":"ci"}}]}`)
		case strings.HasSuffix(r.URL.Path, "/check-suites"):
			fmt.Fprint(w, `{"total_count":0,"check_suites":[]}`)
		default:
			fmt.Fprint(w, `{"state":"pending","statuses":[],"total_count":0}`)
		}
	}))
	defer srv.Close()
	set, err := forge.New(forge.Settings{GitHub: forge.Endpoint{URL: srv.URL, Token: secret}}, forge.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer set.Close()
	c, _ := set.Client(forge.GitHub)
	rep, err := c.Checks(context.Background(), "acme/old", sha, t0, fresh)
	if err != nil || len(rep.Checks) != 1 {
		t.Fatalf("renamed repository: %v, %d checks, want the one check", err, len(rep.Checks))
	}
}
