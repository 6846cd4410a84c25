package forge_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/vigil-run/vigil/forge"
	"github.com/vigil-run/vigil/forge/forgetest"
)

var t0 = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

const (
	sha     = "3f2a1b0c9d8e7f60514253647586970a1b2c3d4e"
	otherSH = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
	fresh   = 30 * time.Second
	secret  = "ghp_s3cr3tT0k3nDoNotLeak"
)

func client(t *testing.T, srv *forgetest.Server, token string) *forge.Client {
	t.Helper()
	set, err := forge.New(srv.Settings(token), forge.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(set.CloseIdleConnections)
	c, ok := set.Client(srv.Provider)
	if !ok {
		t.Fatalf("provider %s not configured", srv.Provider)
	}
	return c
}

func checksPath(repo, sha string) string { return "/repos/" + repo + "/commits/" + sha + "/check-runs" }

func TestSharedReadsAndETag(t *testing.T) {
	t.Parallel()
	srv := forgetest.New(t, forge.GitHub)
	srv.SetRuns("acme/api", sha, forgetest.Run{ID: 1, Name: "build", Status: "in_progress", Started: t0})
	c := client(t, srv, "")
	ctx := context.Background()
	read := func(now time.Time) []forge.Check {
		t.Helper()
		r, err := c.Checks(ctx, "acme/api", sha, now, fresh)
		if err != nil {
			t.Fatalf("Checks at %v: %v", now, err)
		}
		return r.Checks
	}
	first := read(t0)
	read(t0.Add(10 * time.Second)) // within the window: from the cache
	if got := srv.Hits(checksPath("acme/api", sha)); got != 1 {
		t.Fatalf("two reads within the window made %d requests, want 1", got)
	}
	again := read(t0.Add(fresh))
	if got := srv.Hits(checksPath("acme/api", sha)); got != 2 {
		t.Fatalf("a read after the window made %d requests in all, want 2", got)
	}
	hs := srv.Headers(checksPath("acme/api", sha))
	if hs[0].Get("If-None-Match") != "" || hs[1].Get("If-None-Match") == "" {
		t.Fatalf("If-None-Match = %q then %q, want none then the ETag", hs[0].Get("If-None-Match"), hs[1].Get("If-None-Match"))
	}
	if diff := cmp.Diff(first, again); diff != "" {
		t.Fatalf("the 304 did not give back the cached checks (-first +again):\n%s", diff)
	}
	// A change is seen after the window, not before.
	srv.SetRuns("acme/api", sha, forgetest.Run{ID: 1, Name: "build", Status: "completed", Conclusion: "success", Started: t0})
	if got := read(t0.Add(fresh + time.Second)); got[0].State != forge.StateRunning {
		t.Fatalf("within the window the state is %s, want the cached running", got[0].State)
	}
	if got := read(t0.Add(2 * fresh)); got[0].State != forge.StatePassed {
		t.Fatalf("after the window the state is %s, want passed", got[0].State)
	}
}

// TestConcurrentMissesCoalesce proves three concurrent misses make one
// request: the server holds the first request until the other two
// readers have missed the cache and joined it.
func TestConcurrentMissesCoalesce(t *testing.T) {
	t.Parallel()
	srv := forgetest.New(t, forge.GitHub)
	srv.SetRuns("acme/api", sha, forgetest.Run{ID: 1, Name: "build", Status: "queued", Started: t0})
	c := client(t, srv, "")
	var misses atomic.Int32
	joined := make(chan struct{})
	forge.SetMissHook(c, func(key string) {
		if strings.HasSuffix(key, "/check-runs?filter=latest&per_page=100") && misses.Add(1) == 3 {
			close(joined)
		}
	})
	srv.Intercept(func(w http.ResponseWriter, r *http.Request) bool {
		if strings.HasSuffix(r.URL.Path, "/check-runs") {
			select {
			case <-joined:
			case <-time.After(10 * time.Second): // a failure bound, not a schedule
			}
		}
		return false
	})
	var wg sync.WaitGroup
	errs := make(chan error, 3)
	for range 3 {
		wg.Go(func() {
			_, err := c.Checks(context.Background(), "acme/api", sha, t0, fresh)
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if got := srv.Hits(checksPath("acme/api", sha)); got != 1 {
		t.Fatalf("three concurrent reads made %d requests, want 1", got)
	}
}

// TestSharedReadOutlivesACallerGivingUp: concurrent misses of one URL
// share one request, and that request is no single caller's. When the
// watch that started it gives up (its probe's timeout, the watch
// cancelled), that watch stops waiting at once, and a watch that joined
// the request, whose own context is live, still gets the answer: one
// watch's cancellation does not make another's read fail.
func TestSharedReadOutlivesACallerGivingUp(t *testing.T) {
	t.Parallel()
	srv := forgetest.New(t, forge.GitHub)
	srv.SetRuns("acme/api", sha, forgetest.Run{ID: 1, Name: "build", Status: "completed", Conclusion: "success", Started: t0})
	c := client(t, srv, "")
	joined := make(chan struct{}, 2)
	forge.SetMissHook(c, func(key string) {
		if strings.Contains(key, "/check-runs?") {
			joined <- struct{}{}
		}
	})
	arrived := make(chan struct{}, 1)
	release := make(chan struct{})
	srv.Intercept(func(w http.ResponseWriter, r *http.Request) bool {
		if strings.HasSuffix(r.URL.Path, "/check-runs") {
			select {
			case arrived <- struct{}{}:
			default: // a second request: the hit count below says so
			}
			select {
			case <-release:
			case <-r.Context().Done():
			case <-time.After(10 * time.Second): // a failure bound, not a schedule
			}
		}
		return false
	})

	ctxA, cancelA := context.WithCancel(context.Background())
	defer cancelA()
	doneA := make(chan error, 1)
	go func() {
		_, err := c.Checks(ctxA, "acme/api", sha, t0, fresh)
		doneA <- err
	}()
	<-joined  // A started the shared request
	<-arrived // and the server holds it
	type result struct {
		rep forge.Report
		err error
	}
	doneB := make(chan result, 1)
	go func() {
		rep, err := c.Checks(context.Background(), "acme/api", sha, t0, fresh)
		doneB <- result{rep, err}
	}()
	<-joined // B joined A's request, still in flight

	cancelA()
	if err := <-doneA; !errors.Is(err, context.Canceled) {
		t.Fatalf("A gave up while the request was held: %v, want context.Canceled at once", err)
	}
	close(release)
	b := <-doneB
	if b.err != nil {
		t.Fatalf("B's context is live, yet its read failed with %v (A gave up)", b.err)
	}
	if len(b.rep.Checks) != 1 || b.rep.Checks[0].State != forge.StatePassed {
		t.Fatalf("B read %+v, want the one successful check", b.rep.Checks)
	}
	if got := srv.Hits(checksPath("acme/api", sha)); got != 1 {
		t.Fatalf("%d requests, want 1: B shares A's", got)
	}
}

// silentForge is a transport that never answers: each request waits for
// its context to end.
type silentForge struct{ sent, ended atomic.Int32 }

func (s *silentForge) RoundTrip(r *http.Request) (*http.Response, error) {
	s.sent.Add(1)
	defer s.ended.Add(1)
	<-r.Context().Done()
	return nil, r.Context().Err()
}

// TestSharedReadBoundedByRequestTimeout: a shared request runs on no
// caller's context, so it is RequestTimeout that ends it when the forge
// never answers, whether or not anyone still waits: a caller that joins it
// after the one that started it gave up waits out the rest of
// RequestTimeout, no more, and gets "no response" (held for the window
// like any failed read), and nothing is left running (synctest fails on
// a goroutine still blocked).
func TestSharedReadBoundedByRequestTimeout(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		rt := &silentForge{}
		set, err := forge.New(forge.Settings{GitHub: forge.Endpoint{URL: "https://forge.example"}},
			forge.Options{HTTPClient: &http.Client{Transport: rt}})
		if err != nil {
			t.Fatal(err)
		}
		c, _ := set.Client(forge.GitHub)
		start := time.Now()

		ctxA, cancelA := context.WithCancel(t.Context())
		doneA := make(chan error, 1)
		go func() {
			_, err := c.Checks(ctxA, "acme/api", sha, t0, fresh)
			doneA <- err
		}()
		synctest.Wait() // A's request is sent and waits for an answer
		cancelA()
		if err := <-doneA; !errors.Is(err, context.Canceled) {
			t.Fatalf("A gave up: %v, want context.Canceled", err)
		}

		time.Sleep(5 * time.Second) // the bubble's clock: B comes later
		_, err = c.Checks(t.Context(), "acme/api", sha, t0, fresh)
		var fe *forge.Error
		if !errors.As(err, &fe) || fe.Kind != forge.KindUnavailable || !strings.Contains(err.Error(), "no response within 15s") {
			t.Fatalf("B joined the silent request: %v, want unavailable, no response within 15s", err)
		}
		if got := time.Since(start); got != forge.RequestTimeout {
			t.Fatalf("B's read ended %v after the request was sent, want RequestTimeout (%v)", got, forge.RequestTimeout)
		}
		if _, err2 := c.Checks(t.Context(), "acme/api", sha, t0.Add(fresh/2), fresh); err2 == nil || err2.Error() != err.Error() {
			t.Fatalf("within the window: %v, want the held failure %v", err2, err)
		}
		if got := rt.sent.Load(); got != 1 {
			t.Fatalf("%d requests sent, want 1", got)
		}
	})
}

// TestCloseEndsSharedReads: a shared request runs on no caller's context,
// so closing the Set (the daemon on its way out) is what ends one still in
// flight after its callers gave up, at once rather than RequestTimeout
// later; synctest fails on a goroutine still blocked.
func TestCloseEndsSharedReads(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		rt := &silentForge{}
		set, err := forge.New(forge.Settings{GitHub: forge.Endpoint{URL: "https://forge.example"}},
			forge.Options{HTTPClient: &http.Client{Transport: rt}})
		if err != nil {
			t.Fatal(err)
		}
		c, _ := set.Client(forge.GitHub)
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error, 1)
		go func() {
			_, err := c.Checks(ctx, "acme/api", sha, t0, fresh)
			done <- err
		}()
		synctest.Wait() // the request is sent and waits for an answer
		cancel()
		<-done
		start := time.Now()
		set.Close()
		synctest.Wait() // the shared read has ended: nothing is left blocked
		if rt.sent.Load() != 1 || rt.ended.Load() != 1 || time.Since(start) != 0 {
			t.Fatalf("%d requests sent, %d ended %v after Close; want the one, ended at once", rt.sent.Load(), rt.ended.Load(), time.Since(start))
		}
	})
}

func TestRateLimitBlocksEveryRead(t *testing.T) {
	t.Parallel()
	srv := forgetest.New(t, forge.GitHub)
	srv.SetRuns("acme/api", sha)
	srv.SetRuns("acme/web", otherSH)
	c := client(t, srv, "")
	reset := t0.Add(10 * time.Minute)
	var limited atomic.Bool
	limited.Store(true)
	srv.Intercept(func(w http.ResponseWriter, r *http.Request) bool {
		if !limited.Load() {
			return false
		}
		w.Header().Set("X-RateLimit-Limit", "60")
		w.Header().Set("X-RateLimit-Remaining", "0")
		w.Header().Set("X-RateLimit-Reset", strconv.FormatInt(reset.Unix(), 10))
		w.WriteHeader(http.StatusForbidden)
		fmt.Fprint(w, `{"message":"API rate limit exceeded for 127.0.0.1.","documentation_url":"https://docs.github.com/rest/overview/resources-in-the-rest-api#rate-limiting"}`)
		return true
	})
	ctx := context.Background()
	for _, at := range []time.Duration{0, time.Minute, 5 * time.Minute, 10*time.Minute - time.Second} {
		for _, repo := range []string{"acme/api", "acme/web"} {
			s := sha
			if repo == "acme/web" {
				s = otherSH
			}
			_, err := c.Checks(ctx, repo, s, t0.Add(at), fresh)
			var fe *forge.Error
			if !errors.As(err, &fe) || fe.Kind != forge.KindRateLimited || fe.Permanent() || !fe.Until.Equal(reset) {
				t.Fatalf("read of %s at +%v: %v, want rate limited until %v", repo, at, err, reset)
			}
			if want := "github rate limit reached; reads resume at 2026-11-30 12:10:00 UTC"; err.Error() != want {
				t.Fatalf("error = %q, want %q", err, want)
			}
		}
	}
	if got := srv.TotalHits(); got != 1 {
		t.Fatalf("%d requests while rate limited, want 1", got)
	}
	limited.Store(false)
	if _, err := c.Checks(ctx, "acme/web", otherSH, reset, fresh); err != nil {
		t.Fatalf("read at the reset: %v", err)
	}
}

func TestRetryAfter(t *testing.T) {
	t.Parallel()
	srv := forgetest.New(t, forge.GitLab)
	srv.SetPipelines("acme/api", sha)
	c := client(t, srv, "")
	srv.Intercept(func(w http.ResponseWriter, r *http.Request) bool {
		w.Header().Set("Retry-After", "120")
		w.Header().Set("RateLimit-Remaining", "0")
		w.WriteHeader(http.StatusTooManyRequests)
		fmt.Fprint(w, `{"message":"Retry later"}`)
		return true
	})
	_, err := c.Checks(context.Background(), "acme/api", sha, t0, fresh)
	var fe *forge.Error
	if !errors.As(err, &fe) || fe.Kind != forge.KindRateLimited || !fe.Until.Equal(t0.Add(2*time.Minute)) {
		t.Fatalf("429 with Retry-After 120: %v, want rate limited until +2m", err)
	}
	if _, err := c.Checks(context.Background(), "acme/api", sha, t0.Add(119*time.Second), fresh); !errors.As(err, &fe) || fe.Kind != forge.KindRateLimited {
		t.Fatalf("before Retry-After passed: %v", err)
	}
	if srv.TotalHits() != 1 {
		t.Fatalf("%d requests, want 1", srv.TotalHits())
	}
}

func TestFailuresAreHeldForTheWindow(t *testing.T) {
	t.Parallel()
	srv := forgetest.New(t, forge.GitHub)
	srv.SetRuns("acme/api", sha)
	c := client(t, srv, "")
	var down atomic.Bool
	down.Store(true)
	srv.Intercept(func(w http.ResponseWriter, r *http.Request) bool {
		if down.Load() {
			w.WriteHeader(http.StatusBadGateway)
			fmt.Fprint(w, `{"message":"Server Error"}`)
			return true
		}
		return false
	})
	ctx := context.Background()
	_, err := c.Checks(ctx, "acme/api", sha, t0, fresh)
	if err == nil || forge.IsPermanent(err) || !strings.Contains(err.Error(), "HTTP 502") {
		t.Fatalf("502: %v, want a transient error saying HTTP 502", err)
	}
	down.Store(false)
	if _, err2 := c.Checks(ctx, "acme/api", sha, t0.Add(20*time.Second), fresh); err2 == nil || err2.Error() != err.Error() {
		t.Fatalf("within the window: %v, want the held failure %v", err2, err)
	}
	if got := srv.TotalHits(); got != 1 {
		t.Fatalf("%d requests within the window of a failure, want 1", got)
	}
	if _, err := c.Checks(ctx, "acme/api", sha, t0.Add(fresh), fresh); err != nil {
		t.Fatalf("after the window: %v", err)
	}
}

func TestPermanentErrorsSayWhatToFix(t *testing.T) {
	t.Parallel()
	srv := forgetest.New(t, forge.GitHub)
	srv.SetRuns("acme/api", sha)
	ctx := context.Background()

	_, err := client(t, srv, "").Checks(ctx, "acme/gone", sha, t0, fresh)
	if !forge.IsNotFound(err) || !forge.IsPermanent(err) || !strings.Contains(err.Error(), "forges.github.token (VIGIL_GITHUB_TOKEN)") {
		t.Fatalf("missing repository: %v, want a permanent not found naming the token setting", err)
	}

	srv.Token = "the-right-one"
	_, err = client(t, srv, secret).Checks(ctx, "acme/api", sha, t0, fresh)
	var fe *forge.Error
	if !errors.As(err, &fe) || fe.Kind != forge.KindUnauthorized || !fe.Permanent() ||
		!strings.Contains(err.Error(), "rejected the configured token") || !strings.Contains(err.Error(), "forges.github.token") {
		t.Fatalf("bad token: %v, want a permanent 401 saying to fix the token setting", err)
	}
}

// TestTokenNeverInErrors sends a forge that echoes the token back in
// every way it can and checks no error carries it.
func TestTokenNeverInErrors(t *testing.T) {
	t.Parallel()
	for _, p := range forge.Providers() {
		t.Run(string(p), func(t *testing.T) {
			t.Parallel()
			srv := forgetest.New(t, p)
			srv.SetRuns("acme/api", sha)
			srv.SetPipelines("acme/api", sha)
			srv.SetTicket("acme/api", 7, forgetest.Ticket{Title: "x", State: "open", Comments: []string{"a"}})
			c := client(t, srv, secret)
			for i, code := range []int{401, 403, 404, 422, 429, 500, 502} {
				srv.Intercept(func(w http.ResponseWriter, r *http.Request) bool {
					w.WriteHeader(code)
					fmt.Fprintf(w, `{"message":"token %s is %s"}`, r.Header.Get("Authorization"), secret)
					return true
				})
				now := t0.Add(time.Duration(i) * time.Hour) // past any block
				_, err1 := c.Checks(context.Background(), "acme/api", sha, now, fresh)
				_, err2 := c.Ticket(context.Background(), forge.TicketQuery{Repo: "acme/api", Number: 7, Type: ticketType(p)}, now, fresh)
				_, err3 := c.ResolveRef(context.Background(), "acme/api", "main", now)
				for _, err := range []error{err1, err2, err3} {
					if err == nil {
						t.Fatalf("HTTP %d: no error", code)
					}
					if strings.Contains(err.Error(), secret) {
						t.Fatalf("HTTP %d: error shows the token: %v", code, err)
					}
				}
			}
		})
	}
}

func ticketType(p forge.Provider) string {
	if p == forge.GitLab {
		return forge.TypeIssue
	}
	return ""
}

func TestPagination(t *testing.T) {
	t.Parallel()
	srv := forgetest.New(t, forge.GitHub)
	var runs []forgetest.Run
	for i := range 150 {
		runs = append(runs, forgetest.Run{ID: int64(i + 1), Name: fmt.Sprintf("job-%03d", i), Status: "completed", Conclusion: "success", Started: t0})
	}
	srv.SetRuns("acme/api", sha, runs...)
	r, err := client(t, srv, "").Checks(context.Background(), "acme/api", sha, t0, fresh)
	if err != nil {
		t.Fatal(err)
	}
	if cs := r.Checks; len(cs) != 150 || srv.Hits(checksPath("acme/api", sha)) != 2 {
		t.Fatalf("got %d checks in %d requests, want 150 in 2 pages", len(cs), srv.Hits(checksPath("acme/api", sha)))
	}

	// A next link to another host is not followed with the token.
	other := forgetest.New(t, forge.GitHub)
	srv2 := forgetest.New(t, forge.GitHub)
	srv2.SetRuns("acme/api", sha, runs...)
	srv2.Intercept(func(w http.ResponseWriter, r *http.Request) bool {
		if strings.HasSuffix(r.URL.Path, "/check-runs") {
			w.Header().Set("Link", `<`+other.URL+`/repos/acme/api/commits/`+sha+`/check-runs?page=2>; rel="next"`)
		}
		return false
	})
	if _, err := client(t, srv2, secret).Checks(context.Background(), "acme/api", sha, t0, fresh); err == nil || forge.IsPermanent(err) {
		t.Fatalf("a listing cut at a link to another host: err %v, want a transient error, never its first page alone", err)
	}
	if other.TotalHits() != 0 {
		t.Fatalf("a next link to another host was followed")
	}
}

// TestGitHubChecksKeys: a re-run replaces its run; a check run and a
// commit status of one name are two checks, both counted, as GitHub
// requires both.
func TestGitHubChecksKeys(t *testing.T) {
	t.Parallel()
	srv := forgetest.New(t, forge.GitHub)
	srv.SetRuns("acme/api", sha,
		forgetest.Run{ID: 1, Name: "build", Status: "completed", Conclusion: "failure", Started: t0.Add(-time.Hour), Completed: t0.Add(-50 * time.Minute)},
		forgetest.Run{ID: 2, Name: "build", Status: "in_progress", Started: t0.Add(-5 * time.Minute)}, // the re-run
		forgetest.Run{ID: 3, Name: "lint", Status: "completed", Conclusion: "timed_out", Started: t0.Add(-time.Hour), Completed: t0.Add(-time.Minute)},
		forgetest.Run{ID: 4, Name: "docs", Status: "queued", Started: t0.Add(-time.Minute)},
	)
	srv.SetStatuses("acme/api", sha,
		forgetest.Status{ID: 9, Context: "ci/jenkins", State: "success", TargetURL: "https://ci.example.com/9", Created: t0, Updated: t0},
		forgetest.Status{ID: 10, Context: "lint", State: "success", Created: t0, Updated: t0}, // newer than the check run of that name
	)
	r, err := client(t, srv, "").Checks(context.Background(), "acme/api", sha, t0, fresh)
	if err != nil {
		t.Fatal(err)
	}
	type row struct{ Name, Group, State, Result, Source string }
	var got []row
	for _, c := range r.Checks {
		got = append(got, row{c.Name, c.Group, string(c.State), c.Result, c.Source})
	}
	want := []row{
		{"build", "GitHub Actions", "running", "in_progress", "check_run"},
		{"ci/jenkins", "commit status", "passed", "success", "status"},
		{"docs", "GitHub Actions", "queued", "queued", "check_run"},
		{"lint", "GitHub Actions", "failed", "timed_out", "check_run"},
		{"lint", "commit status", "passed", "success", "status"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("checks (-want +got):\n%s", diff)
	}
	if r.Checks[1].URL != "https://ci.example.com/9" || !strings.HasPrefix(r.Checks[0].URL, "https://github.com/acme/api/runs/") {
		t.Fatalf("URLs: %q, %q", r.Checks[0].URL, r.Checks[1].URL)
	}
	if r.Provider != forge.GitHub || len(r.Ignored) != 0 {
		t.Fatalf("report: provider %s, ignored %v", r.Provider, r.Ignored)
	}
}

// TestGiteaPaging: Gitea's combined status is read page by page (page
// and limit 50) until X-Total-Count, as Gitea sends no Link header; a
// commit with no statuses (an empty document, no X-Total-Count) is one
// request.
func TestGiteaPaging(t *testing.T) {
	t.Parallel()
	srv := forgetest.New(t, forge.Gitea)
	var sts []forgetest.Status
	for i := range 120 {
		sts = append(sts, forgetest.Status{ID: int64(i + 1), Context: fmt.Sprintf("ci / job-%03d (push)", i), State: "success", Created: t0, Updated: t0})
	}
	srv.SetStatuses("acme/api", sha, sts...)
	srv.SetStatuses("acme/api", otherSH)
	c := client(t, srv, "")
	var mu sync.Mutex
	var queries []string
	srv.Intercept(func(w http.ResponseWriter, r *http.Request) bool {
		mu.Lock()
		defer mu.Unlock()
		queries = append(queries, r.URL.RawQuery)
		return false
	})
	r, err := c.Checks(context.Background(), "acme/api", sha, t0, fresh)
	if err != nil {
		t.Fatal(err)
	}
	path := "/repos/acme/api/commits/" + sha + "/status"
	if len(r.Checks) != 120 || srv.Hits(path) != 3 {
		t.Fatalf("got %d checks in %d requests, want 120 in 3 pages", len(r.Checks), srv.Hits(path))
	}
	mu.Lock()
	if diff := cmp.Diff([]string{"limit=50&page=1", "limit=50&page=2", "limit=50&page=3"}, queries); diff != "" {
		t.Fatalf("queries (-want +got):\n%s", diff)
	}
	mu.Unlock()
	r, err = c.Checks(context.Background(), "acme/api", otherSH, t0, fresh)
	if err != nil || len(r.Checks) != 0 || srv.Hits("/repos/acme/api/commits/"+otherSH+"/status") != 1 {
		t.Fatalf("no statuses: %v, %v in %d requests, want none in 1", r.Checks, err, srv.Hits("/repos/acme/api/commits/"+otherSH+"/status"))
	}
	// A Gitea older than 1.17 answers an empty body for no statuses.
	srv.Intercept(func(w http.ResponseWriter, r *http.Request) bool {
		w.WriteHeader(http.StatusOK)
		return true
	})
	if r, err := c.Checks(context.Background(), "acme/api", otherSH, t0.Add(time.Hour), fresh); err != nil || len(r.Checks) != 0 {
		t.Fatalf("an empty body: %v, %v, want no checks", r.Checks, err)
	}
}

func TestResolveRef(t *testing.T) {
	t.Parallel()
	for _, p := range forge.Providers() {
		t.Run(string(p), func(t *testing.T) {
			t.Parallel()
			srv := forgetest.New(t, p)
			srv.SetRef("acme/api", "main", sha)
			srv.SetRef("acme/api", "feature/x", otherSH)
			c := client(t, srv, "")
			ctx := context.Background()
			for ref, want := range map[string]string{"main": sha, "3f2a1b0": sha, "feature/x": otherSH} {
				got, err := c.ResolveRef(ctx, "acme/api", ref, t0)
				if err != nil || got != want {
					t.Errorf("ResolveRef(%s) = %q, %v; want %s", ref, got, err, want)
				}
			}
			// A branch moves: resolving reads past the cache.
			srv.SetRef("acme/api", "main", otherSH)
			if got, _ := c.ResolveRef(ctx, "acme/api", "main", t0); got != otherSH {
				t.Errorf("after a push ResolveRef(main) = %q, want the new head", got)
			}
			if _, err := c.ResolveRef(ctx, "acme/api", "nope", t0); !forge.IsNotFound(err) {
				t.Errorf("ResolveRef(nope) = %v, want not found", err)
			}
		})
	}
}

func TestTickets(t *testing.T) {
	t.Parallel()
	body := "Steps to reproduce"
	for _, tc := range []struct {
		p    forge.Provider
		typ  string
		set  forgetest.Ticket
		want forge.Ticket
	}{
		{forge.GitHub, "", forgetest.Ticket{Title: "Bug", Body: body, State: "open", Comments: []string{"ada", "vigil-bot", "bob"}},
			forge.Ticket{Kind: "issue", Title: "Bug", State: "open", Comments: 2, URL: "https://github.com/acme/api/issues/7"}},
		{forge.GitHub, "", forgetest.Ticket{Title: "Fix", Body: body, State: "open", Pull: true, Draft: true, Comments: []string{"VIGIL-BOT"}},
			forge.Ticket{Kind: "pull_request", Title: "Fix", State: "open", Draft: true, Comments: 0, URL: "https://github.com/acme/api/pull/7"}},
		{forge.GitHub, "", forgetest.Ticket{Title: "Fix", Body: body, Pull: true, Merged: true},
			forge.Ticket{Kind: "pull_request", Title: "Fix", State: "merged", URL: "https://github.com/acme/api/pull/7"}},
		{forge.Gitea, "", forgetest.Ticket{Title: "Bug", Body: body, State: "open", Comments: []string{"ada", "vigil-bot"}},
			forge.Ticket{Kind: "issue", Title: "Bug", State: "open", Comments: 1, URL: "https://gitea.example.com/acme/api/issues/7"}},
		{forge.Gitea, "", forgetest.Ticket{Title: "Fix", Body: body, State: "open", Pull: true, Draft: true},
			forge.Ticket{Kind: "pull_request", Title: "Fix", State: "open", Draft: true, URL: "https://gitea.example.com/acme/api/issues/7"}},
		{forge.GitLab, forge.TypeIssue, forgetest.Ticket{Title: "Bug", Body: body, State: "opened", Comments: []string{"ada", "vigil-bot", "ada"}, System: map[int]bool{2: true}},
			forge.Ticket{Kind: "issue", Title: "Bug", State: "open", Comments: 1, URL: "https://gitlab.example.com/acme/api/-/issues/7"}},
		{forge.GitLab, forge.TypeMergeRequest, forgetest.Ticket{Title: "Fix", Body: body, State: "merged", MergeRequest: true, Draft: true, Comments: []string{"bob"}},
			forge.Ticket{Kind: "merge_request", Title: "Fix", State: "merged", Draft: true, Comments: 1, URL: "https://gitlab.example.com/acme/api/-/merge_requests/7"}},
	} {
		srv := forgetest.New(t, tc.p)
		srv.Token, srv.Login = "tok", "vigil-bot"
		srv.SetTicket("acme/api", 7, tc.set)
		c := client(t, srv, "tok")
		got, err := c.Ticket(context.Background(), forge.TicketQuery{Repo: "acme/api", Number: 7, Type: tc.typ}, t0, fresh)
		if err != nil {
			t.Fatalf("%s: %v", tc.p, err)
		}
		want := tc.want
		want.BodySHA256 = got.BodySHA256
		want.Read = t0 // read from the forge now
		if diff := cmp.Diff(&want, got); diff != "" {
			t.Errorf("%s Ticket (-want +got):\n%s", tc.p, diff)
		}
		if sum := sha256.Sum256([]byte(body)); got.BodySHA256 != hex.EncodeToString(sum[:]) {
			t.Errorf("%s: body digest %q, want the SHA-256 of the body", tc.p, got.BodySHA256)
		}
		// The login is read once.
		if _, err := c.Ticket(context.Background(), forge.TicketQuery{Repo: "acme/api", Number: 7, Type: tc.typ}, t0.Add(time.Hour), fresh); err != nil {
			t.Fatal(err)
		}
		if n := srv.Hits("/user"); n != 1 {
			t.Errorf("%s: /user read %d times, want once", tc.p, n)
		}
	}
}

func TestSettings(t *testing.T) {
	t.Parallel()
	d := forge.DefaultSettings()
	if d.GitHub.URL != "https://api.github.com" || d.GitLab.URL != "https://gitlab.com/api/v4" || d.Gitea.URL != "" {
		t.Fatalf("DefaultSettings() = %+v", d)
	}
	for _, tc := range []struct {
		s    forge.Settings
		want string
	}{
		{forge.Settings{Gitea: forge.Endpoint{URL: "gitea.example.com"}}, "forges.gitea.url"},
		{forge.Settings{GitHub: forge.Endpoint{URL: "ftp://x"}}, "forges.github.url"},
		{forge.Settings{GitLab: forge.Endpoint{URL: "https://u:hunter2@gitlab.example.com?x=1"}}, "forges.gitlab.url"},
		{forge.Settings{GitHub: forge.Endpoint{URL: "https://api.github.com", Token: "a b"}}, "forges.github.token"},
	} {
		err := tc.s.Validate()
		if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "hunter2") {
			t.Errorf("Validate(%v) = %v, want an error naming %s without the password", tc.s, err, tc.want)
		}
	}
	e := forge.Endpoint{URL: "https://u:hunter2@x.example.com", Token: secret}
	for _, s := range []string{fmt.Sprint(e), fmt.Sprintf("%+v", e), fmt.Sprintf("%#v", e), fmt.Sprintf("%v", forge.Settings{GitHub: e})} {
		if strings.Contains(s, secret) || strings.Contains(s, "hunter2") {
			t.Errorf("formatted endpoint shows a secret: %s", s)
		}
	}
	// The site address of a Gitea or GitLab works: the API path is added.
	for _, p := range []forge.Provider{forge.Gitea, forge.GitLab} {
		srv := forgetest.New(t, p)
		srv.SetRef("acme/api", "main", sha)
		if got, err := client(t, srv, "").ResolveRef(context.Background(), "acme/api", "main", t0); err != nil || got != sha {
			t.Errorf("%s at its site URL: %q, %v", p, got, err)
		}
	}
}

func TestParseRepoAndRef(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		p       forge.Provider
		in, out string
	}{
		{forge.GitHub, "Acme/API", "acme/api"},
		{forge.Gitea, "acme/api.go", "acme/api.go"},
		{forge.GitLab, "group/sub/project", "group/sub/project"},
		{forge.GitHub, "acme", ""},
		{forge.GitHub, "acme/api/x", ""},
		{forge.GitHub, "acme/", ""},
		{forge.GitHub, "ac me/api", ""},
		{forge.GitHub, "acme/..", ""},
		{forge.GitLab, "group", ""},
	} {
		got, err := forge.ParseRepo(tc.p, tc.in)
		if (err != nil) != (tc.out == "") || got != tc.out {
			t.Errorf("ParseRepo(%s, %q) = %q, %v; want %q", tc.p, tc.in, got, err, tc.out)
		}
	}
	for ref, ok := range map[string]bool{"main": true, "feature/x": true, "v1.2.3": true, "3f2a1b0": true,
		"": false, "-rf": false, "a..b": false, "a b": false, "a~1": false, "HEAD@{1}": false, "a:b": false} {
		if err := forge.ValidRef(ref); (err == nil) != ok {
			t.Errorf("ValidRef(%q) = %v, want ok %v", ref, err, ok)
		}
	}
	if !forge.IsFullSHA(sha) || forge.IsFullSHA("3F2A1B0C9D8E7F60514253647586970A1B2C3D4E") || forge.IsFullSHA("3f2a1b0") {
		t.Error("IsFullSHA")
	}
}

func TestMerge(t *testing.T) {
	t.Parallel()
	got := forge.Merge([]forge.Check{
		{Name: "b", Key: "kb", State: forge.StateFailed, Started: t0, ID: 1},
		{Name: "a", Key: "ka", State: forge.StatePassed, Started: t0, ID: 1},
		{Name: "b", Key: "kb", State: forge.StateRunning, Started: t0.Add(time.Minute), ID: 0},
		{Name: "a", Key: "ka", State: forge.StateFailed, Started: t0, ID: 2},
		{Name: "a", Group: "Lint", Key: "ka2", State: forge.StatePassed, Started: t0.Add(time.Hour), ID: 3},
	})
	want := []forge.Check{
		{Name: "a", Key: "ka", State: forge.StateFailed, Started: t0, ID: 2},
		{Name: "a", Group: "Lint", Key: "ka2", State: forge.StatePassed, Started: t0.Add(time.Hour), ID: 3},
		{Name: "b", Key: "kb", State: forge.StateRunning, Started: t0.Add(time.Minute), ID: 0},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Merge (-want +got):\n%s", diff)
	}
}

// TestOwnLogin: the login vigil's comments are written as is the one
// configured (forges.PROVIDER.login), without asking the forge; else the
// token's, from /user; else, for a GitHub App installation token whose
// /user answers 403, its bot user from GraphQL's viewer.
func TestOwnLogin(t *testing.T) {
	t.Parallel()
	ticket := forgetest.Ticket{Title: "A", State: "open", Comments: []string{"ada", "vigil-agent[bot]", "vigil-bot"}}
	for _, tc := range []struct {
		name       string
		app, login string
		want       int
		user, gql  int
	}{
		{name: "a user token", want: 1, user: 1}, // vigil-agent[bot] is a bot
		{name: "an App installation token", app: "vigil-agent", want: 2, user: 1, gql: 1},
		{name: "configured", login: "vigil-agent[bot]", want: 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			srv := forgetest.New(t, forge.GitHub)
			srv.Token, srv.Login, srv.App = "tok", "vigil-bot", tc.app
			srv.SetTicket("acme/api", 7, ticket)
			e := srv.Endpoint("tok")
			e.Login = tc.login
			set, err := forge.New(forge.Settings{GitHub: e}, forge.Options{})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(set.CloseIdleConnections)
			c, _ := set.Client(forge.GitHub)
			got, err := c.Ticket(context.Background(), forge.TicketQuery{Repo: "acme/api", Number: 7}, t0, fresh)
			if err != nil {
				t.Fatal(err)
			}
			if got.Comments != tc.want || srv.Hits("/user") != tc.user || srv.Hits("/graphql") != tc.gql {
				t.Fatalf("comments %d, /user read %d times, GraphQL %d; want %d, %d, %d", got.Comments, srv.Hits("/user"), srv.Hits("/graphql"), tc.want, tc.user, tc.gql)
			}
		})
	}
	for base, want := range map[string]string{
		"https://api.github.com":         "https://api.github.com/graphql",
		"https://ghe.example.com/api/v3": "https://ghe.example.com/api/graphql",
	} {
		set, err := forge.New(forge.Settings{GitHub: forge.Endpoint{URL: base}}, forge.Options{})
		if err != nil {
			t.Fatal(err)
		}
		c, _ := set.Client(forge.GitHub)
		if got := forge.GraphQLURL(c); got != want {
			t.Errorf("GraphQL URL of %s = %s, want %s", base, got, want)
		}
	}
	if err := (forge.Settings{GitHub: forge.Endpoint{URL: forge.DefaultGitHubURL, Login: "my app"}}).Validate(); err == nil || !strings.Contains(err.Error(), "forges.github.login") {
		t.Errorf("a login with a space: %v, want an error naming forges.github.login", err)
	}
}

// TestReportReadIsTheUpstreamRead: a report answered from the cache
// carries the time of the read it repeats; one read again (a 304
// confirming the body included) carries the new read's.
func TestReportReadIsTheUpstreamRead(t *testing.T) {
	t.Parallel()
	srv := forgetest.New(t, forge.GitHub)
	srv.SetRuns("acme/api", sha, forgetest.Run{ID: 1, Name: "build", Status: "completed", Conclusion: "success", Started: t0, Completed: t0})
	c := client(t, srv, "")
	for _, step := range []struct{ at, read time.Duration }{
		{0, 0}, {10 * time.Second, 0}, {20 * time.Second, 0}, {fresh, fresh}, {fresh + 10*time.Second, fresh},
	} {
		r, err := c.Checks(context.Background(), "acme/api", sha, t0.Add(step.at), fresh)
		if err != nil {
			t.Fatal(err)
		}
		if want := t0.Add(step.read); !r.Read.Equal(want) {
			t.Errorf("Checks at +%s: Read = %v, want %v", step.at, r.Read, want)
		}
	}
}
