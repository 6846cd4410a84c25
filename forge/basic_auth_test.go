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

// basicAuthForge is a forge behind a proxy that wants basic auth on every
// request, in the shape of the real APIs: its Link headers name the host
// it was asked for, absolute and without the credentials, as GitHub's and
// GitLab's do. A request without them is answered 401 and counted.
func basicAuthForge(t *testing.T, user, pass string, handle func(w http.ResponseWriter, r *http.Request, base string)) (*httptest.Server, *atomic.Int32) {
	t.Helper()
	var refused atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if u, p, ok := r.BasicAuth(); !ok || u != user || p != pass {
			refused.Add(1)
			w.Header().Set("WWW-Authenticate", `Basic realm="forge"`)
			http.Error(w, `{"message":"Requires authentication"}`, http.StatusUnauthorized)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		handle(w, r, "http://"+r.Host)
	}))
	t.Cleanup(srv.Close)
	return srv, &refused
}

func withUser(rawURL, user, pass string) string {
	return strings.Replace(rawURL, "://", "://"+user+":"+pass+"@", 1)
}

// TestBasicAuthCarriedToNextPages: a forge URL given with user:pass@
// sends them on every page of a listing, not on the first alone: page 2
// of the check runs (a failed e2e) and of the check suites are read, and
// the commit is not judged from page 1.
func TestBasicAuthCarriedToNextPages(t *testing.T) {
	t.Parallel()
	srv, refused := basicAuthForge(t, "ci-reader", "pa55", func(w http.ResponseWriter, r *http.Request, base string) {
		page2 := r.URL.Query().Get("page") == "2"
		next := func() {
			w.Header().Set("Link", `<`+base+r.URL.Path+`?per_page=100&page=2>; rel="next", <`+base+r.URL.Path+`?per_page=100&page=2>; rel="last"`)
		}
		switch {
		case strings.HasSuffix(r.URL.Path, "/check-runs") && page2:
			fmt.Fprint(w, `{"total_count":2,"check_runs":[{"id":2,"name":"e2e","status":"completed","conclusion":"failure",
				"started_at":"2026-11-30T11:00:00Z","completed_at":"2026-11-30T11:05:00Z","check_suite":{"id":7},"app":{"id":15368,"slug":"github-actions"}}]}`)
		case strings.HasSuffix(r.URL.Path, "/check-runs"):
			next()
			fmt.Fprint(w, `{"total_count":2,"check_runs":[{"id":1,"name":"build","status":"completed","conclusion":"success",
				"started_at":"2026-11-30T11:00:00Z","completed_at":"2026-11-30T11:05:00Z","check_suite":{"id":7},"app":{"id":15368,"slug":"github-actions"}}]}`)
		case strings.HasSuffix(r.URL.Path, "/check-suites") && page2:
			fmt.Fprint(w, `{"total_count":1,"check_suites":[]}`)
		case strings.HasSuffix(r.URL.Path, "/check-suites"):
			next()
			fmt.Fprint(w, `{"total_count":1,"check_suites":[{"id":7,"status":"completed","conclusion":"failure","app":{"id":15368,"slug":"github-actions"},
				"created_at":"2026-11-30T11:00:00Z","updated_at":"2026-11-30T11:05:00Z","latest_check_runs_count":2}]}`)
		case strings.HasSuffix(r.URL.Path, "/status"):
			fmt.Fprint(w, `{"state":"pending","statuses":[],"total_count":0}`)
		default:
			http.NotFound(w, r)
		}
	})
	set, err := forge.New(forge.Settings{GitHub: forge.Endpoint{URL: withUser(srv.URL, "ci-reader", "pa55")}}, forge.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer set.Close()
	c, _ := set.Client(forge.GitHub)
	rep, err := c.Checks(context.Background(), "acme/api", sha, t0, fresh)
	if err != nil {
		t.Fatalf("checks behind basic auth: %v (%d requests refused for want of the credentials)", err, refused.Load())
	}
	if n := refused.Load(); n > 0 {
		t.Fatalf("%d requests were sent without the URL's credentials", n)
	}
	names := make([]string, len(rep.Checks))
	for i, ch := range rep.Checks {
		names[i] = ch.Name + "=" + string(ch.State)
	}
	if got := strings.Join(names, ","); got != "build=passed,e2e=failed" {
		t.Fatalf("checks: %s, want build=passed,e2e=failed (page 2 read)", got)
	}
	if strings.Contains(fmt.Sprint(set), "pa55") {
		t.Fatal("the password is shown")
	}
}

// TestBasicAuthCarriedOnGitLabPages: GitLab's pipelines listing pages by
// Link too; its page 2 is read with the URL's credentials.
func TestBasicAuthCarriedOnGitLabPages(t *testing.T) {
	t.Parallel()
	srv, refused := basicAuthForge(t, "u", "p", func(w http.ResponseWriter, r *http.Request, base string) {
		if !strings.HasSuffix(r.URL.Path, "/pipelines") {
			http.NotFound(w, r)
			return
		}
		if r.URL.Query().Get("page") == "2" {
			fmt.Fprint(w, `[{"id":2,"status":"failed","ref":"main","source":"push","created_at":"2026-11-30T11:00:00Z","updated_at":"2026-11-30T11:05:00Z","web_url":"x"}]`)
			return
		}
		w.Header().Set("Link", `<`+base+r.URL.EscapedPath()+`?page=2&per_page=100&sha=`+sha+`>; rel="next"`)
		fmt.Fprint(w, `[{"id":1,"status":"success","ref":"other","source":"push","created_at":"2026-11-30T11:00:00Z","updated_at":"2026-11-30T11:05:00Z","web_url":"x"}]`)
	})
	set, err := forge.New(forge.Settings{GitLab: forge.Endpoint{URL: withUser(srv.URL, "u", "p")}}, forge.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer set.Close()
	c, _ := set.Client(forge.GitLab)
	rep, err := c.Checks(context.Background(), "acme/api", sha, t0, fresh)
	if err != nil || refused.Load() > 0 {
		t.Fatalf("pipelines behind basic auth: %v, %d requests without the credentials", err, refused.Load())
	}
	if len(rep.Checks) != 2 {
		t.Fatalf("%d checks, want the pipelines of both pages", len(rep.Checks))
	}
}

// TestBasicAuthNotSentToAnotherOrigin: a next link to another origin is
// not followed (the listing is not judged in part), and the credentials
// never reach it.
func TestBasicAuthNotSentToAnotherOrigin(t *testing.T) {
	t.Parallel()
	var leaked atomic.Int32
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "" {
			leaked.Add(1)
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"total_count":0,"check_runs":[]}`)
	}))
	defer other.Close()
	srv, _ := basicAuthForge(t, "u", "p", func(w http.ResponseWriter, r *http.Request, base string) {
		w.Header().Set("Link", `<`+other.URL+r.URL.Path+`?per_page=100&page=2>; rel="next"`)
		fmt.Fprint(w, `{"total_count":2,"check_runs":[],"check_suites":[],"statuses":[]}`)
	})
	set, err := forge.New(forge.Settings{GitHub: forge.Endpoint{URL: withUser(srv.URL, "u", "p")}}, forge.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer set.Close()
	c, _ := set.Client(forge.GitHub)
	if _, err := c.Checks(context.Background(), "acme/api", sha, t0, fresh); err == nil {
		t.Fatal("a listing whose next page is on another origin was judged")
	}
	if n := leaked.Load(); n > 0 {
		t.Fatalf("credentials sent to another origin %d times", n)
	}
}

// TestBasicAuthCarriedOnSameOriginRedirect: an absolute redirect within
// the origin (a renamed repository, a Location the proxy writes out in
// full) is followed with the URL's credentials.
func TestBasicAuthCarriedOnSameOriginRedirect(t *testing.T) {
	t.Parallel()
	srv, refused := basicAuthForge(t, "u", "p", func(w http.ResponseWriter, r *http.Request, base string) {
		if p, ok := strings.CutPrefix(r.URL.Path, "/repos/acme/old/"); ok {
			http.Redirect(w, r, base+"/repos/acme/api/"+p+"?"+r.URL.RawQuery, http.StatusMovedPermanently)
			return
		}
		switch {
		case strings.HasSuffix(r.URL.Path, "/check-runs"):
			fmt.Fprint(w, `{"total_count":1,"check_runs":[{"id":1,"name":"build","status":"completed","conclusion":"success","check_suite":{"id":7},"app":{"id":1,"slug":"ci"}}]}`)
		case strings.HasSuffix(r.URL.Path, "/check-suites"):
			fmt.Fprint(w, `{"total_count":0,"check_suites":[]}`)
		default:
			fmt.Fprint(w, `{"state":"pending","statuses":[],"total_count":0}`)
		}
	})
	set, err := forge.New(forge.Settings{GitHub: forge.Endpoint{URL: withUser(srv.URL, "u", "p")}}, forge.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer set.Close()
	c, _ := set.Client(forge.GitHub)
	rep, err := c.Checks(context.Background(), "acme/old", sha, t0, fresh)
	if err != nil || len(rep.Checks) != 1 || refused.Load() > 0 {
		t.Fatalf("renamed repository behind basic auth: %v, %d checks, %d requests without the credentials", err, len(rep.Checks), refused.Load())
	}
}

// TestBasicAuthRefusedSaysSo: a 401 from a forge whose URL carries
// user:pass@ names the URL's setting (the proxy refused its credentials)
// beside the token's, with or without a token, and never the password.
func TestBasicAuthRefusedSaysSo(t *testing.T) {
	t.Parallel()
	srv, _ := basicAuthForge(t, "ci-reader", "pa55", func(w http.ResponseWriter, r *http.Request, base string) {
		http.NotFound(w, r)
	})
	for _, token := range []string{"", "a-token"} {
		set, err := forge.New(forge.Settings{GitHub: forge.Endpoint{URL: withUser(srv.URL, "ci-reader", "wrong-pass"), Token: token}}, forge.Options{})
		if err != nil {
			t.Fatal(err)
		}
		c, _ := set.Client(forge.GitHub)
		_, err = c.Checks(context.Background(), "acme/api", sha, t0, fresh)
		set.Close()
		if err == nil || !forge.IsPermanent(err) || !strings.Contains(err.Error(), "forges.github.url (VIGIL_GITHUB_URL)") ||
			!strings.Contains(err.Error(), "credentials in its URL") || strings.Contains(err.Error(), "wrong-pass") {
			t.Errorf("token %q: a 401 behind basic auth: %v, want a permanent error naming the URL's credentials and setting, not the password", token, err)
		}
	}
}
