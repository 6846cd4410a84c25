package forge_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/vigil-run/vigil"
	"github.com/vigil-run/vigil/forge"
	"github.com/vigil-run/vigil/watcher/ci"
)

// TestOffHostNextLinkIsNotTheEnd: a listing whose rel="next" link
// names the API under another spelling of its host (a proxy's, a
// default port written out) must not be judged from its first page: a
// failing check on page 2 would be dropped and the commit called green.
func TestOffHostNextLinkIsNotTheEnd(t *testing.T) {
	const sha = "3f2a1b0c9d8e7f60514253647586970a1b2c3d4e"
	var srv *httptest.Server
	srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		switch {
		case strings.HasSuffix(r.URL.Path, "/check-runs") && r.URL.Query().Get("page") == "2":
			fmt.Fprint(w, `{"total_count":2,"check_runs":[{"id":2,"name":"e2e","status":"completed","conclusion":"failure",
				"started_at":"2026-11-30T11:00:00Z","completed_at":"2026-11-30T11:05:00Z","check_suite":{"id":7},"app":{"id":15368,"slug":"github-actions"}}]}`)
		case strings.HasSuffix(r.URL.Path, "/check-runs"):
			// The same server, under another spelling of its host.
			other := strings.Replace(srv.URL, "127.0.0.1", "localhost", 1)
			w.Header().Set("Link", `<`+other+r.URL.Path+`?filter=latest&per_page=100&page=2>; rel="next", <`+other+r.URL.Path+`?filter=latest&per_page=100&page=2>; rel="last"`)
			fmt.Fprint(w, `{"total_count":2,"check_runs":[{"id":1,"name":"build","status":"completed","conclusion":"success",
				"started_at":"2026-11-30T11:00:00Z","completed_at":"2026-11-30T11:05:00Z","check_suite":{"id":7},"app":{"id":15368,"slug":"github-actions"}}]}`)
		case strings.HasSuffix(r.URL.Path, "/check-suites"):
			fmt.Fprint(w, `{"total_count":1,"check_suites":[{"id":7,"status":"completed","conclusion":"failure","app":{"id":15368,"slug":"github-actions"},
				"created_at":"2026-11-30T11:00:00Z","updated_at":"2026-11-30T11:05:00Z","latest_check_runs_count":2}]}`)
		case strings.HasSuffix(r.URL.Path, "/status"):
			fmt.Fprint(w, `{"state":"pending","statuses":[],"total_count":0}`)
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	set, err := forge.New(forge.Settings{GitHub: forge.Endpoint{URL: srv.URL}}, forge.Options{})
	if err != nil {
		t.Fatal(err)
	}
	c, _ := set.Client(forge.GitHub)
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	rep, err := c.Checks(context.Background(), "acme/api", sha, now, 30*time.Second)
	if err != nil {
		return // not judged in part: fine
	}
	obs := ci.Judge(rep, nil, 30*time.Minute, now)
	if obs.Verdict == vigil.VerdictSatisfied {
		t.Fatalf("page 2 (a failed e2e) was dropped and the commit judged green: %d checks, %q", len(rep.Checks), obs.Summary)
	}
}
