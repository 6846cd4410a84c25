package ci_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/vigil-run/vigil"
	"github.com/vigil-run/vigil/forge"
	"github.com/vigil-run/vigil/forge/forgetest"
	"github.com/vigil-run/vigil/watcher"
	"github.com/vigil-run/vigil/watcher/ci"
)

var t0 = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

const (
	sha    = "3f2a1b0c9d8e7f60514253647586970a1b2c3d4e"
	newSHA = "9999999999999999999999999999999999999999"
	secret = "ghp_s3cr3tT0k3nDoNotLeak"
)

// setup returns a ci watcher reading srv with token.
func setup(t *testing.T, srv *forgetest.Server, token string) *ci.Watcher {
	t.Helper()
	set, err := forge.New(srv.Settings(token), forge.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(set.CloseIdleConnections)
	return ci.New(ci.Config{Forges: set})
}

func canon(t *testing.T, w *ci.Watcher, in string) json.RawMessage {
	t.Helper()
	c, err := w.Canonicalize(context.Background(), json.RawMessage(in), t0)
	if err != nil {
		t.Fatalf("Canonicalize(%s) = %v", in, err)
	}
	return c.Predicate
}

func probe(t *testing.T, w *ci.Watcher, pred json.RawMessage, now time.Time) vigil.Observation {
	t.Helper()
	obs, err := watcher.Run(context.Background(), w, watcher.Probe{WatchID: "w", Kind: vigil.KindCI, Predicate: pred, Now: now})
	if err != nil {
		t.Fatalf("Run = %v", err)
	}
	obs.At = time.Time{}
	return obs
}

func pred(repo string) string { return `{"repo":"` + repo + `","sha":"` + sha + `"}` }

func run(id int64, name, status, conclusion string) forgetest.Run {
	r := forgetest.Run{ID: id, Name: name, Status: status, Conclusion: conclusion, Started: t0.Add(-5 * time.Minute)}
	if status == "completed" {
		r.Completed = t0.Add(-time.Minute)
	}
	return r
}

func runURL(id int64) string { return fmt.Sprintf("https://github.com/acme/api/runs/%d", id) }

func TestGitHubVerdicts(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		runs     []forgetest.Run
		statuses []forgetest.Status
		checks   string
		want     vigil.Observation
	}{
		{name: "zero checks is pending, never success",
			want: vigil.Observation{Verdict: vigil.VerdictPending, Summary: "no checks have appeared yet",
				Facts: map[string]any{"checks": 0, "passed": 0, "failed": 0, "running": 0, "queued": 0}}},
		{name: "one running is pending", runs: []forgetest.Run{run(1, "build", "in_progress", "")},
			want: vigil.Observation{Verdict: vigil.VerdictPending, Summary: "1 check: 1 running (build)",
				Facts: map[string]any{"checks": 1, "passed": 0, "failed": 0, "running": 1, "queued": 0, "running_checks": []string{"build"}}}},
		{name: "all green fires", runs: []forgetest.Run{run(1, "build", "completed", "success"), run(2, "lint", "completed", "neutral"), run(3, "docs", "completed", "skipped")},
			want: vigil.Observation{Verdict: vigil.VerdictSatisfied, Summary: "all 3 checks passed",
				Facts: map[string]any{"checks": 3, "passed": 3, "failed": 0, "running": 0, "queued": 0}}},
		{name: "mixed fails naming the failed check and its URL",
			runs: []forgetest.Run{run(1, "build", "completed", "success"), run(2, "lint", "completed", "failure"), run(3, "e2e", "completed", "timed_out")},
			want: vigil.Observation{Verdict: vigil.VerdictFailed,
				Summary: "2 of 3 checks failed: e2e (timed_out, " + runURL(3) + "), lint (" + runURL(2) + ")",
				Facts: map[string]any{"checks": 3, "passed": 1, "failed": 2, "running": 0, "queued": 0, "failed_checks": []any{
					map[string]any{"name": "e2e", "result": "timed_out", "url": runURL(3)},
					map[string]any{"name": "lint", "result": "failure", "url": runURL(2)},
				}}}},
		{name: "a failure while another runs is still pending",
			runs: []forgetest.Run{run(1, "build", "queued", ""), run(2, "lint", "completed", "failure")},
			want: vigil.Observation{Verdict: vigil.VerdictPending, Summary: "2 checks: 1 failed (lint), 1 queued (build)",
				Facts: map[string]any{"checks": 2, "passed": 0, "failed": 1, "running": 0, "queued": 1, "queued_checks": []string{"build"},
					"failed_checks": []any{map[string]any{"name": "lint", "result": "failure", "url": runURL(2)}}}}},
		{name: "cancelled and action_required fail",
			runs: []forgetest.Run{run(1, "deploy", "completed", "action_required"), run(2, "build", "completed", "cancelled")},
			want: vigil.Observation{Verdict: vigil.VerdictFailed, Summary: "2 of 2 checks failed: build (cancelled, " + runURL(2) + "), deploy (action_required, " + runURL(1) + ")"}},
		{name: "check runs green and zero statuses (combined state pending) fire",
			runs: []forgetest.Run{run(1, "build", "completed", "success")},
			want: vigil.Observation{Verdict: vigil.VerdictSatisfied, Summary: "the one check passed"}},
		{name: "a pending commit status keeps it pending",
			runs:     []forgetest.Run{run(1, "build", "completed", "success")},
			statuses: []forgetest.Status{{ID: 5, Context: "ci/jenkins", State: "pending", Created: t0, Updated: t0}},
			want:     vigil.Observation{Verdict: vigil.VerdictPending, Summary: "2 checks: 1 passed, 1 running (ci/jenkins)"}},
		{name: "a failed commit status fails",
			runs:     []forgetest.Run{run(1, "build", "completed", "success")},
			statuses: []forgetest.Status{{ID: 5, Context: "ci/jenkins", State: "error", TargetURL: "https://ci.example.com/5", Created: t0, Updated: t0}},
			want:     vigil.Observation{Verdict: vigil.VerdictFailed, Summary: "1 of 2 checks failed: ci/jenkins (error, https://ci.example.com/5)"}},
		{name: "statuses alone count",
			statuses: []forgetest.Status{{ID: 5, Context: "ci/jenkins", State: "success", Created: t0, Updated: t0}},
			want:     vigil.Observation{Verdict: vigil.VerdictSatisfied, Summary: "the one check passed"}},
		{name: "a required check that never appeared keeps it pending", checks: `["build","e2e"]`,
			runs: []forgetest.Run{run(1, "build", "completed", "success"), run(2, "lint", "completed", "failure")},
			want: vigil.Observation{Verdict: vigil.VerdictPending, Summary: "2 required checks: 1 passed, 1 not yet appeared (e2e); every other check has finished: failing at 2026-11-30 12:09:00 UTC unless e2e appears",
				Facts: map[string]any{"checks": 2, "passed": 1, "failed": 0, "running": 0, "queued": 0, "missing": []string{"e2e"},
					"required": []string{"build", "e2e"}, "other_checks": 1}}},
		{name: "only required checks decide", checks: `["build"]`,
			runs: []forgetest.Run{run(1, "build", "completed", "success"), run(2, "lint", "completed", "failure")},
			want: vigil.Observation{Verdict: vigil.VerdictSatisfied, Summary: "the one required check passed"}},
		{name: "zero checks with required ones", checks: `["build"]`,
			want: vigil.Observation{Verdict: vigil.VerdictPending, Summary: "no checks have appeared yet (waiting for build)"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			srv := forgetest.New(t, forge.GitHub)
			srv.SetRuns("acme/api", sha, tc.runs...)
			srv.SetStatuses("acme/api", sha, tc.statuses...)
			w := setup(t, srv, "")
			in := pred("acme/api")
			if tc.checks != "" {
				in = `{"repo":"acme/api","sha":"` + sha + `","checks":` + tc.checks + `}`
			}
			got := probe(t, w, canon(t, w, in), t0)
			if tc.want.Facts == nil {
				got.Facts = nil // only verdict and summary are under test
			}
			want := tc.want
			want.Read = t0 // the forge's answer, read now
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("Probe (-want +got):\n%s", diff)
			}
		})
	}
}

func TestGiteaAndGitLab(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name      string
		p         forge.Provider
		statuses  []forgetest.Status
		pipelines []forgetest.Pipeline
		want      vigil.Observation
	}{
		{name: "gitea zero statuses", p: forge.Gitea,
			want: vigil.Observation{Verdict: vigil.VerdictPending, Summary: "no checks have appeared yet"}},
		{name: "gitea green", p: forge.Gitea, statuses: []forgetest.Status{
			{ID: 1, Context: "ci / test (push)", State: "success", TargetURL: "https://gitea.example.com/acme/api/actions/runs/7/jobs/0", Created: t0, Updated: t0},
			{ID: 2, Context: "ci / lint (push)", State: "warning", Created: t0, Updated: t0}},
			want: vigil.Observation{Verdict: vigil.VerdictSatisfied, Summary: "all 2 checks passed"}},
		{name: "gitea pending", p: forge.Gitea, statuses: []forgetest.Status{
			{ID: 1, Context: "ci / test (push)", State: "pending", Created: t0, Updated: t0}},
			want: vigil.Observation{Verdict: vigil.VerdictPending, Summary: "1 check: 1 running (ci / test (push))"}},
		{name: "gitea failing", p: forge.Gitea, statuses: []forgetest.Status{
			{ID: 1, Context: "ci / test (push)", State: "failure", TargetURL: "https://gitea.example.com/acme/api/actions/runs/7/jobs/0", Created: t0, Updated: t0},
			{ID: 2, Context: "ci / lint (push)", State: "success", Created: t0, Updated: t0}},
			want: vigil.Observation{Verdict: vigil.VerdictFailed, Summary: "1 of 2 checks failed: ci / test (push) (https://gitea.example.com/acme/api/actions/runs/7/jobs/0)"}},
		{name: "gitlab no pipeline yet", p: forge.GitLab,
			want: vigil.Observation{Verdict: vigil.VerdictPending, Summary: "no checks have appeared yet"}},
		{name: "gitlab running", p: forge.GitLab, pipelines: []forgetest.Pipeline{{ID: 47, Status: "running", Source: "push", Created: t0, Updated: t0}},
			want: vigil.Observation{Verdict: vigil.VerdictPending, Summary: "1 check: 1 running (pipeline)"}},
		{name: "gitlab green", p: forge.GitLab, pipelines: []forgetest.Pipeline{{ID: 47, Status: "success", Source: "push", Created: t0, Updated: t0}},
			want: vigil.Observation{Verdict: vigil.VerdictSatisfied, Summary: "the one check passed"}},
		{name: "gitlab failing", p: forge.GitLab, pipelines: []forgetest.Pipeline{{ID: 47, Name: "Build pipeline", Status: "failed", Source: "push", Created: t0, Updated: t0}},
			want: vigil.Observation{Verdict: vigil.VerdictFailed, Summary: "1 of 1 checks failed: Build pipeline (https://gitlab.example.com/acme/api/-/pipelines/47)"}},
		{name: "gitlab: a re-run supersedes the failed pipeline", p: forge.GitLab, pipelines: []forgetest.Pipeline{
			{ID: 47, Status: "failed", Source: "push", Created: t0.Add(-time.Hour), Updated: t0.Add(-time.Hour)},
			{ID: 48, Status: "success", Source: "push", Created: t0, Updated: t0}},
			want: vigil.Observation{Verdict: vigil.VerdictSatisfied, Summary: "the one check passed"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			srv := forgetest.New(t, tc.p)
			srv.SetStatuses("acme/api", sha, tc.statuses...)
			srv.SetPipelines("acme/api", sha, tc.pipelines...)
			w := setup(t, srv, "")
			got := probe(t, w, canon(t, w, `{"provider":"`+string(tc.p)+`","repo":"acme/api","sha":"`+sha+`"}`), t0)
			got.Facts = nil
			want := tc.want
			want.Read = t0 // the forge's answer, read now
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("Probe (-want +got):\n%s", diff)
			}
		})
	}
}

func TestBranchResolvedOnceAtRegistration(t *testing.T) {
	t.Parallel()
	for _, p := range forge.Providers() {
		t.Run(string(p), func(t *testing.T) {
			t.Parallel()
			srv := forgetest.New(t, p)
			srv.SetRef("acme/api", "main", sha)
			srv.SetRuns("acme/api", sha, run(1, "build", "completed", "success"))
			srv.SetStatuses("acme/api", sha, forgetest.Status{ID: 1, Context: "build", State: "success", Created: t0, Updated: t0})
			srv.SetPipelines("acme/api", sha, forgetest.Pipeline{ID: 1, Name: "build", Status: "success", Created: t0, Updated: t0})
			w := setup(t, srv, "")
			got := canon(t, w, `{"provider":"`+string(p)+`","repo":"Acme/API","sha":"main"}`)
			want := `{"provider":"` + string(p) + `","repo":"acme/api","sha":"` + sha + `","stall":"30m"}`
			if string(got) != want {
				t.Fatalf("Canonicalize(branch) = %s, want %s", got, want)
			}
			if short := canon(t, w, `{"provider":"`+string(p)+`","repo":"acme/api","sha":"3f2a1b0"}`); string(short) != want {
				t.Fatalf("Canonicalize(short SHA) = %s, want %s", short, want)
			}
			// A later push moves the branch to a red commit: the watch keeps
			// its commit and its answer.
			srv.SetRef("acme/api", "main", newSHA)
			srv.SetRuns("acme/api", newSHA, run(2, "build", "completed", "failure"))
			srv.SetStatuses("acme/api", newSHA, forgetest.Status{ID: 2, Context: "build", State: "failure", Created: t0, Updated: t0})
			srv.SetPipelines("acme/api", newSHA, forgetest.Pipeline{ID: 2, Name: "build", Status: "failed", Created: t0, Updated: t0})
			if obs := probe(t, w, got, t0); obs.Verdict != vigil.VerdictSatisfied {
				t.Fatalf("after a push to the branch: %+v, want the resolved commit's satisfied", obs)
			}
		})
	}
}

func TestSharedReadsPerInterval(t *testing.T) {
	t.Parallel()
	srv := forgetest.New(t, forge.GitHub)
	srv.SetRuns("acme/api", sha, run(1, "build", "in_progress", ""))
	w := setup(t, srv, "")
	// Two watches on one commit: different predicates, one upstream read.
	a := canon(t, w, pred("acme/api"))
	b := canon(t, w, `{"repo":"acme/api","sha":"`+sha+`","checks":["build"]}`)
	probe(t, w, a, t0)
	probe(t, w, b, t0.Add(5*time.Second))
	path := "/repos/acme/api/commits/" + sha + "/check-runs"
	if got := srv.Hits(path); got != 1 {
		t.Fatalf("two watches on one commit within an interval made %d requests, want 1", got)
	}
	probe(t, w, b, t0.Add(30*time.Second))
	probe(t, w, a, t0.Add(35*time.Second))
	if got := srv.Hits(path); got != 2 {
		t.Fatalf("after one interval: %d requests in all, want 2", got)
	}

	// Three concurrent probes at a new interval: one request (coalesced,
	// or answered from the cache the first one filled).
	var wg sync.WaitGroup
	for range 3 {
		wg.Go(func() { probe(t, w, a, t0.Add(time.Minute)) })
	}
	wg.Wait()
	if got := srv.Hits(path); got != 3 {
		t.Fatalf("three concurrent probes made %d requests, want 1", got-2)
	}
}

func TestETagKeepsObservation(t *testing.T) {
	t.Parallel()
	srv := forgetest.New(t, forge.GitHub)
	srv.SetRuns("acme/api", sha, run(1, "build", "in_progress", ""), run(2, "lint", "completed", "success"))
	w := setup(t, srv, "")
	p := canon(t, w, pred("acme/api"))
	first := probe(t, w, p, t0)
	second := probe(t, w, p, t0.Add(time.Minute))
	path := "/repos/acme/api/commits/" + sha + "/check-runs"
	hs := srv.Headers(path)
	if len(hs) != 2 || hs[1].Get("If-None-Match") == "" {
		t.Fatalf("the second read sent If-None-Match %q (%d reads), want the ETag", hs[len(hs)-1].Get("If-None-Match"), len(hs))
	}
	if !first.Same(&second) {
		t.Fatalf("a 304 changed the observation:\n%+v\n%+v", first, second)
	}
}

func TestNetworkErrorIsUnavailable(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	set, err := forge.New(forge.Settings{GitHub: forge.Endpoint{URL: "http://" + addr, Token: secret}}, forge.Options{})
	if err != nil {
		t.Fatal(err)
	}
	w := ci.New(ci.Config{Forges: set})
	got := probe(t, w, canon(t, w, pred("acme/api")), t0)
	if got.Verdict != vigil.VerdictUnavailable || got.Permanent || !strings.Contains(got.Reason, "connection refused") {
		t.Fatalf("probe of a forge that is down = %+v, want unavailable, not permanent", got)
	}
	if strings.Contains(got.Reason, secret) {
		t.Fatalf("reason shows the token: %s", got.Reason)
	}
}

func TestRateLimitedForEveryWatch(t *testing.T) {
	t.Parallel()
	srv := forgetest.New(t, forge.GitHub)
	srv.SetRuns("acme/api", sha, run(1, "build", "completed", "success"))
	srv.SetRuns("acme/web", sha, run(1, "build", "completed", "success"))
	reset := t0.Add(15 * time.Minute)
	limited := true
	var mu sync.Mutex
	srv.Intercept(func(w http.ResponseWriter, r *http.Request) bool {
		mu.Lock()
		defer mu.Unlock()
		if !limited {
			return false
		}
		w.Header().Set("X-RateLimit-Remaining", "0")
		w.Header().Set("X-RateLimit-Reset", strconv.FormatInt(reset.Unix(), 10))
		w.WriteHeader(http.StatusForbidden)
		fmt.Fprint(w, `{"message":"API rate limit exceeded"}`)
		return true
	})
	w := setup(t, srv, "")
	watches := []json.RawMessage{canon(t, w, pred("acme/api")), canon(t, w, `{"repo":"acme/api","sha":"`+sha+`","checks":["build"]}`), canon(t, w, pred("acme/web"))}
	for step := time.Duration(0); step < 15*time.Minute; step += time.Minute {
		for _, p := range watches {
			got := probe(t, w, p, t0.Add(step))
			if got.Verdict != vigil.VerdictUnavailable || got.Permanent || !strings.Contains(got.Reason, "reads resume at 2026-11-30 12:15:00 UTC") {
				t.Fatalf("at +%v: %+v, want unavailable until the reset", step, got)
			}
		}
	}
	if n := srv.TotalHits(); n != 1 {
		t.Fatalf("%d requests while rate limited, want 1", n)
	}
	mu.Lock()
	limited = false
	mu.Unlock()
	if got := probe(t, w, watches[0], reset); got.Verdict != vigil.VerdictSatisfied {
		t.Fatalf("after the reset: %+v", got)
	}
}

func TestGhostCheck(t *testing.T) {
	t.Parallel()
	srv := forgetest.New(t, forge.GitHub)
	srv.SetRuns("acme/api", sha,
		forgetest.Run{ID: 1, Name: "build", Status: "completed", Conclusion: "success", Started: t0.Add(-time.Hour), Completed: t0.Add(-50 * time.Minute)},
		forgetest.Run{ID: 2, Name: "deploy", Status: "queued", Started: t0.Add(-45 * time.Minute)},
		forgetest.Run{ID: 3, Name: "e2e", Status: "in_progress", Started: t0.Add(-10 * time.Minute)},
	)
	w := setup(t, srv, "")
	got := probe(t, w, canon(t, w, pred("acme/api")), t0)
	want := "3 checks: 1 passed, 1 running (e2e), 1 queued (deploy); stalled, no update for over 30m: deploy"
	if got.Verdict != vigil.VerdictPending || got.Summary != want {
		t.Fatalf("Probe = %s %q, want pending %q", got.Verdict, got.Summary, want)
	}
	st := []any{map[string]any{"name": "deploy", "state": "queued", "since": "2026-11-30T11:15:00.000Z"}}
	if diff := cmp.Diff(st, got.Facts["stalled"]); diff != "" {
		t.Fatalf("stalled facts (-want +got):\n%s", diff)
	}
	// A longer stall setting: not yet a ghost.
	got = probe(t, w, canon(t, w, `{"repo":"acme/api","sha":"`+sha+`","stall":"1h"}`), t0)
	if strings.Contains(got.Summary, "stalled") {
		t.Fatalf("with stall 1h: %q, want no ghost", got.Summary)
	}
	// The observation does not change from one probe to the next while
	// the ghost stays: nothing is written.
	a := probe(t, w, canon(t, w, pred("acme/api")), t0.Add(time.Minute))
	b := probe(t, w, canon(t, w, pred("acme/api")), t0.Add(2*time.Minute))
	if !a.Same(&b) {
		t.Fatalf("a ghost changes the observation every probe:\n%+v\n%+v", a, b)
	}
}

// TestRunningCheckRunIsNotAGhost: a GitHub check run in progress has a
// runner working on it. The API gives a check run no update time, and when
// it started says nothing of whether it is still alive, so a 45-minute e2e
// job is not a ghost (SPEC §2.1: a check that stays queued or in progress
// with no update for longer than stall, so that an agent is not left
// waiting on a runner that will never come); a run queued as long, which
// no runner has taken, still is.
func TestRunningCheckRunIsNotAGhost(t *testing.T) {
	t.Parallel()
	srv := forgetest.New(t, forge.GitHub)
	srv.SetRuns("acme/api", sha,
		forgetest.Run{ID: 1, Name: "build", Status: "completed", Conclusion: "success", Started: t0.Add(-50 * time.Minute), Completed: t0.Add(-46 * time.Minute)},
		forgetest.Run{ID: 2, Name: "e2e", Status: "in_progress", Started: t0.Add(-45 * time.Minute)},
		forgetest.Run{ID: 3, Name: "deploy", Status: "queued", Started: t0.Add(-45 * time.Minute)},
	)
	w := setup(t, srv, "")
	got := probe(t, w, canon(t, w, pred("acme/api")), t0)
	want := "3 checks: 1 passed, 1 running (e2e), 1 queued (deploy); stalled, no update for over 30m: deploy"
	if got.Verdict != vigil.VerdictPending || got.Summary != want {
		t.Fatalf("Probe = %s %q, want pending %q", got.Verdict, got.Summary, want)
	}
	st := []any{map[string]any{"name": "deploy", "state": "queued", "since": "2026-11-30T11:15:00.000Z"}}
	if diff := cmp.Diff(st, got.Facts["stalled"]); diff != "" {
		t.Fatalf("stalled facts (-want +got):\n%s", diff)
	}
	// Hours in, the job is still running, not stalled.
	if got = probe(t, w, canon(t, w, pred("acme/api")), t0.Add(3*time.Hour)); got.Summary != want {
		t.Fatalf("3 h later: %q, want %q", got.Summary, want)
	}
}

func TestPermanentErrors(t *testing.T) {
	t.Parallel()
	srv := forgetest.New(t, forge.GitHub)
	srv.SetRuns("acme/api", sha)
	w := setup(t, srv, "")
	got := probe(t, w, canon(t, w, pred("acme/gone")), t0)
	if got.Verdict != vigil.VerdictUnavailable || !got.Permanent || !strings.Contains(got.Reason, "not found") || !strings.Contains(got.Reason, "VIGIL_GITHUB_TOKEN") {
		t.Fatalf("missing repository: %+v, want permanent, saying what to fix", got)
	}
	srv.Token = "right"
	w = setup(t, srv, secret)
	got = probe(t, w, canon(t, w, pred("acme/api")), t0)
	if !got.Permanent || !strings.Contains(got.Reason, "rejected the configured token") || strings.Contains(got.Reason, secret) {
		t.Fatalf("bad token: %+v, want permanent, naming the setting and not the token", got)
	}
}

func TestCanonicalizeRefusals(t *testing.T) {
	t.Parallel()
	srv := forgetest.New(t, forge.GitHub)
	srv.SetRef("acme/api", "main", sha)
	w := setup(t, srv, "")
	for _, tc := range []struct{ in, field, has string }{
		{`{"repo":"acme","sha":"` + sha + `"}`, "predicate.repo", "owner/name"},
		{`{"repo":"acme/api/x","sha":"` + sha + `"}`, "predicate.repo", "owner/name"},
		{`{"repo":"ac me/api","sha":"` + sha + `"}`, "predicate.repo", "owner/name"},
		{`{"sha":"` + sha + `"}`, "predicate.repo", "required"},
		{`{"repo":"acme/api"}`, "predicate.sha", "required"},
		{`{"repo":"acme/api","sha":"no such branch"}`, "predicate.sha", "full 40-hex SHA"},
		{`{"repo":"acme/api","sha":"nope"}`, "predicate.sha", "neither a full 40-hex SHA nor a branch"},
		{`{"repo":"acme/api","sha":"` + sha + `","provider":"bitbucket"}`, "predicate.provider", "github, gitea or gitlab"},
		{`{"repo":"acme/api","sha":"` + sha + `","checks":[""]}`, "predicate.checks[0]", "empty"},
		{`{"repo":"acme/api","sha":"` + sha + `","stall":"soon"}`, "predicate.stall", "duration"},
		{`{"repo":"acme/api","sha":"` + sha + `","stall":"-1m"}`, "predicate.stall", "duration"},
		{`{"repo":"acme/api","sha":"` + sha + `","branch":"main"}`, "predicate.branch", "not a known field"},
	} {
		_, err := w.Canonicalize(context.Background(), json.RawMessage(tc.in), t0)
		if vigil.ErrorCode(err) != vigil.CodeInvalidPredicate || vigil.ErrorField(err) != tc.field || !strings.Contains(vigil.ErrorMessage(err), tc.has) {
			t.Errorf("Canonicalize(%s) = %v (field %q), want invalid_predicate on %s mentioning %q", tc.in, err, vigil.ErrorField(err), tc.field, tc.has)
		}
	}
}

func TestCanonicalForm(t *testing.T) {
	t.Parallel()
	w := ci.New(ci.Config{})
	for _, in := range []string{
		`{"repo":"Acme/Api","sha":"` + strings.ToUpper(sha) + `","checks":["test","build","test"],"stall":"1800s"}`,
		`{"provider":"GitHub","repo":"acme/api","sha":"` + sha + `","checks":["build","test"]}`,
	} {
		got := canon(t, w, in)
		want := `{"checks":["build","test"],"provider":"github","repo":"acme/api","sha":"` + sha + `","stall":"30m"}`
		if string(got) != want {
			t.Errorf("Canonicalize(%s) = %s, want %s", in, got, want)
		}
	}
}

func TestAdmitNeedsConfiguredProvider(t *testing.T) {
	t.Parallel()
	set, err := forge.New(forge.Settings{GitHub: forge.Endpoint{URL: forge.DefaultGitHubURL}}, forge.Options{})
	if err != nil {
		t.Fatal(err)
	}
	w := ci.New(ci.Config{Forges: set})
	p := canon(t, w, `{"provider":"gitea","repo":"acme/api","sha":"`+sha+`"}`)
	err = w.Admit(context.Background(), p)
	if vigil.ErrorCode(err) != vigil.CodeWatchUnobservable || !strings.Contains(err.Error(), "forges.gitea.url (VIGIL_GITEA_URL)") {
		t.Fatalf("Admit(gitea, unconfigured) = %v, want watch_unobservable naming forges.gitea.url", err)
	}
	if err := w.Admit(context.Background(), canon(t, w, pred("acme/api"))); err != nil {
		t.Fatalf("Admit(github) = %v", err)
	}
	// A ref to resolve on an unconfigured provider is refused the same way.
	_, err = w.Canonicalize(context.Background(), json.RawMessage(`{"provider":"gitea","repo":"acme/api","sha":"main"}`), t0)
	if vigil.ErrorCode(err) != vigil.CodeWatchUnobservable {
		t.Fatalf("Canonicalize(gitea ref, unconfigured) = %v, want watch_unobservable", err)
	}
}

func TestWrongKind(t *testing.T) {
	t.Parallel()
	w := ci.New(ci.Config{})
	_, err := w.Probe(context.Background(), watcher.Probe{Kind: vigil.KindHTTP, Predicate: json.RawMessage(pred("acme/api"))})
	if err == nil || !strings.Contains(err.Error(), "wrong kind") {
		t.Errorf("Probe(http predicate) = %v, want ErrWrongKind", err)
	}
}
