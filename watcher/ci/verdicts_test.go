package ci_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/vigil-run/vigil"
	"github.com/vigil-run/vigil/forge"
	"github.com/vigil-run/vigil/forge/forgetest"
	"github.com/vigil-run/vigil/watcher"
	"github.com/vigil-run/vigil/watcher/ci"
)

// ghCase is a GitHub commit as the forge shows it, and the verdict and
// summary it must give.
type ghCase struct {
	name      string
	runs      []forgetest.Run
	suites    []forgetest.Suite
	workflows []forgetest.WorkflowRun
	statuses  []forgetest.Status
	checks    string
	verdict   vigil.Verdict
	summary   string
}

func (tc ghCase) run(t *testing.T) vigil.Observation {
	t.Helper()
	srv := forgetest.New(t, forge.GitHub)
	srv.SetRuns("acme/api", sha, tc.runs...)
	srv.SetSuites("acme/api", sha, tc.suites...)
	srv.SetWorkflowRuns("acme/api", sha, tc.workflows...)
	srv.SetStatuses("acme/api", sha, tc.statuses...)
	w := setup(t, srv, "")
	in := pred("acme/api")
	if tc.checks != "" {
		in = `{"repo":"acme/api","sha":"` + sha + `","checks":` + tc.checks + `}`
	}
	got := probe(t, w, canon(t, w, in), t0)
	if got.Verdict != tc.verdict || got.Summary != tc.summary {
		t.Errorf("Probe = %s %q\nwant    %s %q", got.Verdict, got.Summary, tc.verdict, tc.summary)
	}
	return got
}

// at is a run of the GitHub Actions suite given, started ago before t0.
func at(id, suite int64, name, status, conclusion string, ago time.Duration) forgetest.Run {
	r := forgetest.Run{ID: id, Suite: suite, Name: name, Status: status, Conclusion: conclusion, Started: t0.Add(-ago)}
	if status == "completed" {
		r.Completed = r.Started.Add(2 * time.Minute)
	}
	return r
}

func wf(id, workflow, suite int64, name, event string, ago time.Duration) forgetest.WorkflowRun {
	return forgetest.WorkflowRun{ID: id, WorkflowID: workflow, Suite: suite, Name: name, Event: event, Status: "completed", Conclusion: "success", Created: t0.Add(-ago)}
}

// TestGitHubSameNameChecks: checks of one name are one check only when
// they are runs of one workflow (for one event); a commit status and a
// check run of one name are two checks, as GitHub requires both.
func TestGitHubSameNameChecks(t *testing.T) {
	t.Parallel()
	for _, tc := range []ghCase{
		{name: "two workflows with a job called test: the failed one counts",
			runs: []forgetest.Run{at(1, 10, "test", "completed", "failure", 10*time.Minute), at(2, 20, "test", "completed", "success", 9*time.Minute)},
			workflows: []forgetest.WorkflowRun{
				wf(100, 1000, 10, "CI", "push", 11*time.Minute), wf(200, 2000, 20, "Lint", "push", 10*time.Minute)},
			verdict: vigil.VerdictFailed, summary: "1 of 2 checks failed: test [CI] (" + runURL(1) + ")"},
		{name: "a failed check run and a later successful commit status of its name",
			runs:     []forgetest.Run{at(1, 10, "lint", "completed", "failure", 10*time.Minute)},
			statuses: []forgetest.Status{{ID: 9, Context: "lint", State: "success", Created: t0, Updated: t0}},
			verdict:  vigil.VerdictFailed, summary: "1 of 2 checks failed: lint [GitHub Actions] (" + runURL(1) + ")"},
		{name: "a newer run of the same workflow replaces the older",
			runs: []forgetest.Run{at(1, 10, "build", "completed", "failure", 30*time.Minute), at(2, 20, "build", "completed", "success", 5*time.Minute)},
			workflows: []forgetest.WorkflowRun{
				wf(100, 1000, 10, "CI", "push", 31*time.Minute), wf(101, 1000, 20, "CI", "push", 6*time.Minute)},
			verdict: vigil.VerdictSatisfied, summary: "the one check passed"},
		{name: "one workflow run for two events is two checks",
			runs: []forgetest.Run{at(1, 10, "build", "completed", "failure", 30*time.Minute), at(2, 20, "build", "completed", "success", 5*time.Minute)},
			workflows: []forgetest.WorkflowRun{
				wf(100, 1000, 10, "CI", "push", 31*time.Minute), wf(101, 1000, 20, "CI", "pull_request", 6*time.Minute)},
			verdict: vigil.VerdictFailed, summary: "1 of 2 checks failed: build [CI] (" + runURL(1) + ")"},
		{name: "without the workflow runs (no Actions read), two suites are two checks",
			runs:    []forgetest.Run{at(1, 10, "build", "completed", "failure", 30*time.Minute), at(2, 20, "build", "completed", "success", 5*time.Minute)},
			verdict: vigil.VerdictFailed, summary: "1 of 2 checks failed: build [GitHub Actions] (" + runURL(1) + ")"},
		{name: "required checks: every check of the name decides", checks: `["test"]`,
			runs: []forgetest.Run{at(1, 10, "test", "completed", "failure", 10*time.Minute), at(2, 20, "test", "completed", "success", 9*time.Minute)},
			workflows: []forgetest.WorkflowRun{
				wf(100, 1000, 10, "CI", "push", 11*time.Minute), wf(200, 2000, 20, "Lint", "push", 10*time.Minute)},
			verdict: vigil.VerdictFailed, summary: "1 of 2 required checks failed: test [CI] (" + runURL(1) + ")"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.run(t)
		})
	}
}

// TestGitHubCheckSuites: a suite that is still to run holds the watch, a
// suite that failed before it made a run fails it, and a queued suite of
// an app that has added no run to the commit is not waited for, and said.
func TestGitHubCheckSuites(t *testing.T) {
	t.Parallel()
	green := at(1, 10, "build", "completed", "success", 10*time.Minute)
	for _, tc := range []ghCase{
		{name: "a queued Actions suite with no runs yet holds the watch",
			runs:      []forgetest.Run{green},
			suites:    []forgetest.Suite{{ID: 30, Status: "queued", Created: t0.Add(-time.Minute), Updated: t0.Add(-time.Minute)}},
			workflows: []forgetest.WorkflowRun{wf(100, 1000, 10, "CI", "push", 11*time.Minute), {ID: 300, WorkflowID: 3000, Suite: 30, Name: "Deploy", Event: "push", Status: "queued", Created: t0.Add(-time.Minute)}},
			verdict:   vigil.VerdictPending, summary: "2 checks: 1 passed, 1 queued (workflow Deploy)"},
		{name: "an in-progress suite whose runs so far passed holds the watch",
			runs:    []forgetest.Run{green},
			suites:  []forgetest.Suite{{ID: 10, Status: "in_progress", Created: t0.Add(-11 * time.Minute), Updated: t0.Add(-8 * time.Minute)}},
			verdict: vigil.VerdictPending, summary: "2 checks: 1 passed, 1 running (GitHub Actions suite 10)"},
		{name: "a suite that failed at startup with no runs fails the watch",
			runs:      []forgetest.Run{green},
			suites:    []forgetest.Suite{{ID: 30, Status: "completed", Conclusion: "startup_failure", Created: t0.Add(-5 * time.Minute), Updated: t0.Add(-5 * time.Minute)}},
			workflows: []forgetest.WorkflowRun{wf(100, 1000, 10, "CI", "push", 11*time.Minute), {ID: 300, WorkflowID: 3000, Suite: 30, Name: "Release", Event: "push", Status: "completed", Conclusion: "startup_failure", Created: t0.Add(-5 * time.Minute)}},
			verdict:   vigil.VerdictFailed, summary: "1 of 2 checks failed: workflow Release (startup_failure, https://github.com/acme/api/actions/runs/300)"},
		{name: "a newer run of the workflow supersedes its startup failure",
			runs: []forgetest.Run{green, at(2, 31, "release", "completed", "success", 3*time.Minute)},
			suites: []forgetest.Suite{
				{ID: 30, Status: "completed", Conclusion: "startup_failure", Created: t0.Add(-9 * time.Minute), Updated: t0.Add(-9 * time.Minute)}},
			workflows: []forgetest.WorkflowRun{wf(100, 1000, 10, "CI", "push", 11*time.Minute),
				{ID: 300, WorkflowID: 3000, Suite: 30, Name: "Release", Event: "push", Status: "completed", Conclusion: "startup_failure", Created: t0.Add(-9 * time.Minute)},
				wf(301, 3000, 31, "Release", "push", 4*time.Minute)},
			verdict: vigil.VerdictSatisfied, summary: "all 2 checks passed"},
		{name: "a newer run of the workflow, queued while the older one was cancelled after it, holds the watch",
			// The workflow ran again for the same event (a label added to
			// the pull request); its concurrency group cancelled the older
			// run after the newer one was queued, so the older suite was
			// updated last. The newer run is what decides.
			runs: []forgetest.Run{green, at(2, 30, "deploy", "completed", "cancelled", 6*time.Minute)},
			suites: []forgetest.Suite{
				{ID: 30, Status: "completed", Conclusion: "cancelled", Created: t0.Add(-7 * time.Minute), Updated: t0.Add(-time.Minute)},
				{ID: 31, Status: "queued", Created: t0.Add(-2 * time.Minute), Updated: t0.Add(-2 * time.Minute)}},
			workflows: []forgetest.WorkflowRun{wf(100, 1000, 10, "CI", "push", 11*time.Minute),
				{ID: 300, WorkflowID: 3000, Suite: 30, Name: "Deploy", Event: "pull_request", Status: "completed", Conclusion: "cancelled", Created: t0.Add(-7 * time.Minute)},
				{ID: 301, WorkflowID: 3000, Suite: 31, Name: "Deploy", Event: "pull_request", Status: "queued", Created: t0.Add(-2 * time.Minute)}},
			verdict: vigil.VerdictPending, summary: "3 checks: 1 passed, 1 failed (deploy), 1 queued (workflow Deploy)"},
		{name: "a queued suite of an app with no runs is not waited for, and said",
			runs:    []forgetest.Run{green},
			suites:  []forgetest.Suite{{ID: 40, App: "codecov", Status: "queued", Created: t0.Add(-11 * time.Minute), Updated: t0.Add(-11 * time.Minute)}},
			verdict: vigil.VerdictSatisfied, summary: "the one check passed; not waiting for codecov: its check suite is queued, and the app has added no check run to this commit"},
		{name: "a queued suite of an app that has runs on the commit is waited for",
			runs: []forgetest.Run{green, {ID: 5, Suite: 50, App: "circleci-checks", Name: "unit", Status: "completed", Conclusion: "success", Started: t0.Add(-9 * time.Minute), Completed: t0.Add(-8 * time.Minute)}},
			suites: []forgetest.Suite{{ID: 51, App: "circleci-checks", Status: "queued", Created: t0.Add(-2 * time.Minute), Updated: t0.Add(-2 * time.Minute)},
				{ID: 50, App: "circleci-checks", Status: "completed", Conclusion: "success", Created: t0.Add(-9 * time.Minute), Updated: t0.Add(-8 * time.Minute)}},
			verdict: vigil.VerdictPending, summary: "3 checks: 2 passed, 1 queued (circleci-checks suite 51)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got := tc.run(t)
			if strings.Contains(tc.summary, "codecov") {
				if diff := fmt.Sprint(got.Facts["ignored_suites"]); diff != "[codecov]" {
					t.Errorf("facts ignored_suites = %s, want [codecov]", diff)
				}
			}
		})
	}
}

// TestGiteaPagesTheCombinedStatus: Gitea pages the combined status with
// page and limit, sends X-Total-Count and no Link header; an early
// failure on the second page fails the watch.
func TestGiteaPagesTheCombinedStatus(t *testing.T) {
	t.Parallel()
	srv := forgetest.New(t, forge.Gitea)
	var sts []forgetest.Status
	for i := range 60 {
		st := forgetest.Status{ID: int64(i + 1), Context: fmt.Sprintf("ci / job-%02d (push)", i), State: "success", Created: t0, Updated: t0}
		if i == 0 {
			st.State, st.TargetURL = "failure", "https://gitea.example.com/acme/api/actions/runs/7/jobs/0"
		}
		sts = append(sts, st)
	}
	srv.SetStatuses("acme/api", sha, sts...)
	w := setup(t, srv, "")
	got := probe(t, w, canon(t, w, `{"provider":"gitea","repo":"acme/api","sha":"`+sha+`"}`), t0)
	want := "1 of 60 checks failed: ci / job-00 (push) (https://gitea.example.com/acme/api/actions/runs/7/jobs/0)"
	if got.Verdict != vigil.VerdictFailed || got.Summary != want {
		t.Fatalf("Probe = %s %q, want failed %q", got.Verdict, got.Summary, want)
	}
	if n := srv.Hits("/repos/acme/api/commits/" + sha + "/status"); n != 2 {
		t.Fatalf("%d requests for 60 statuses, want 2 pages of 50", n)
	}
}

// TestGitLabPipelineKeys: pipelines are one check per ref, source and
// name; only a newer pipeline of the same key replaces an older one.
func TestGitLabPipelineKeys(t *testing.T) {
	t.Parallel()
	p := func(id int64, status, source, ref string, ago time.Duration) forgetest.Pipeline {
		return forgetest.Pipeline{ID: id, Status: status, Source: source, Ref: ref, Created: t0.Add(-ago), Updated: t0.Add(-ago + time.Minute)}
	}
	url := func(id int64) string { return fmt.Sprintf("https://gitlab.example.com/acme/api/-/pipelines/%d", id) }
	for _, tc := range []struct {
		name      string
		pipelines []forgetest.Pipeline
		mr        *forgetest.Ticket
		verdict   vigil.Verdict
		summary   string
	}{
		{name: "a failed tag pipeline is not hidden by a later branch pipeline",
			pipelines: []forgetest.Pipeline{p(1, "failed", "push", "v1.0.0", 20*time.Minute), p(2, "success", "push", "main", 10*time.Minute)},
			verdict:   vigil.VerdictFailed, summary: "1 of 2 checks failed: pipeline [push on v1.0.0] (" + url(1) + ")"},
		{name: "a failed API pipeline is not hidden by a later push pipeline",
			pipelines: []forgetest.Pipeline{p(1, "failed", "api", "main", 20*time.Minute), p(2, "success", "push", "main", 10*time.Minute)},
			verdict:   vigil.VerdictFailed, summary: "1 of 2 checks failed: pipeline [api on main] (" + url(1) + ")"},
		{name: "a failed schedule and a passing trigger pipeline",
			pipelines: []forgetest.Pipeline{p(1, "failed", "schedule", "main", 20*time.Minute), p(2, "success", "trigger", "main", 10*time.Minute)},
			verdict:   vigil.VerdictFailed, summary: "1 of 2 checks failed: pipeline [schedule on main] (" + url(1) + ")"},
		{name: "a failed child pipeline fails the watch though its parent passed",
			pipelines: []forgetest.Pipeline{p(1, "success", "push", "main", 20*time.Minute), p(2, "failed", "parent_pipeline", "main", 19*time.Minute)},
			verdict:   vigil.VerdictFailed, summary: "1 of 2 checks failed: pipeline [child pipeline #2] (" + url(2) + ")"},
		{name: "the merge request pipeline after a failed branch pipeline counts, as GitLab's widget shows",
			pipelines: []forgetest.Pipeline{p(1, "failed", "push", "feature", 20*time.Minute), p(2, "success", "merge_request_event", "refs/merge-requests/3/head", 19*time.Minute)},
			mr:        &forgetest.Ticket{Title: "Feature", State: "opened", MergeRequest: true, SourceBranch: "feature"},
			verdict:   vigil.VerdictSatisfied, summary: "the one check passed"},
		{name: "a branch pipeline after a failed merge request pipeline counts",
			pipelines: []forgetest.Pipeline{p(1, "failed", "merge_request_event", "refs/merge-requests/3/head", 20*time.Minute), p(2, "success", "push", "feature", 19*time.Minute)},
			mr:        &forgetest.Ticket{Title: "Feature", State: "opened", MergeRequest: true, SourceBranch: "feature"},
			verdict:   vigil.VerdictSatisfied, summary: "the one check passed"},
		{name: "a merge request pipeline of another branch is its own check",
			pipelines: []forgetest.Pipeline{p(1, "failed", "merge_request_event", "refs/merge-requests/3/head", 20*time.Minute), p(2, "success", "push", "main", 19*time.Minute)},
			mr:        &forgetest.Ticket{Title: "Feature", State: "opened", MergeRequest: true, SourceBranch: "feature"},
			verdict:   vigil.VerdictFailed, summary: "1 of 2 checks failed: pipeline [merge request !3] (" + url(1) + ")"},
		{name: "a retried pipeline of one key replaces the failed one",
			pipelines: []forgetest.Pipeline{p(1, "failed", "push", "main", 20*time.Minute), p(2, "success", "push", "main", 10*time.Minute)},
			verdict:   vigil.VerdictSatisfied, summary: "the one check passed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			srv := forgetest.New(t, forge.GitLab)
			srv.SetPipelines("acme/api", sha, tc.pipelines...)
			if tc.mr != nil {
				srv.SetTicket("acme/api", 3, *tc.mr)
			}
			w := setup(t, srv, "")
			got := probe(t, w, canon(t, w, `{"provider":"gitlab","repo":"acme/api","sha":"`+sha+`"}`), t0)
			if got.Verdict != tc.verdict || got.Summary != tc.summary {
				t.Errorf("Probe = %s %q\nwant    %s %q", got.Verdict, got.Summary, tc.verdict, tc.summary)
			}
		})
	}
}

// TestGitLabManual: a pipeline blocked on a manual job is never called a
// test failure: it fails the watch with a sentence that says it waits
// for a person.
func TestGitLabManual(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name      string
		pipelines []forgetest.Pipeline
		summary   string
	}{
		{name: "alone", pipelines: []forgetest.Pipeline{{ID: 47, Name: "Deploy", Status: "manual", Source: "push", Created: t0, Updated: t0}},
			summary: "1 of 1 checks is waiting for a manual job, which nothing starts but a person: Deploy (https://gitlab.example.com/acme/api/-/pipelines/47)"},
		{name: "with a failure", pipelines: []forgetest.Pipeline{
			{ID: 47, Name: "Deploy", Status: "manual", Source: "push", Created: t0, Updated: t0},
			{ID: 48, Name: "Nightly", Status: "failed", Source: "schedule", Created: t0, Updated: t0}},
			summary: "1 of 2 checks failed: Nightly (https://gitlab.example.com/acme/api/-/pipelines/48); 1 is waiting for a manual job, which nothing starts but a person: Deploy (https://gitlab.example.com/acme/api/-/pipelines/47)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			srv := forgetest.New(t, forge.GitLab)
			srv.SetPipelines("acme/api", sha, tc.pipelines...)
			w := setup(t, srv, "")
			got := probe(t, w, canon(t, w, `{"provider":"gitlab","repo":"acme/api","sha":"`+sha+`"}`), t0)
			if got.Verdict != vigil.VerdictFailed || got.Summary != tc.summary {
				t.Errorf("Probe = %s %q\nwant    failed %q", got.Verdict, got.Summary, tc.summary)
			}
			if fmt.Sprint(got.Facts["manual"]) != "1" {
				t.Errorf("facts manual = %v, want 1", got.Facts["manual"])
			}
		})
	}
}

// TestUnknownCommit: a commit GitHub does not know yet (422 "No commit
// found for SHA") keeps the watch pending, saying so, for
// UnknownCommitBound after the watch was registered; then it errors with
// a sentence that says the commit never arrived. A commit that arrives
// in time is judged as any other.
func TestUnknownCommit(t *testing.T) {
	t.Parallel()
	srv := forgetest.New(t, forge.GitHub)
	srv.SetRef("acme/api", "main", newSHA) // the repository exists; sha is not in it
	w := setup(t, srv, "")
	pr := canon(t, w, pred("acme/api"))
	at := func(now time.Time, last *vigil.Observation) vigil.Observation {
		t.Helper()
		obs, err := watcher.Run(context.Background(), w, watcher.Probe{WatchID: "w", Kind: vigil.KindCI, Predicate: pr, Now: now, Created: t0, Last: last})
		if err != nil {
			t.Fatal(err)
		}
		obs.At = time.Time{}
		return obs
	}
	first := at(t0, nil)
	want := `GitHub does not know commit 3f2a1b0 in acme/api yet ("No commit found for SHA"): waiting for it to be pushed, until 2026-11-30 12:10:00 UTC`
	if first.Verdict != vigil.VerdictPending || first.Summary != want {
		t.Fatalf("first probe = %s %q %q, want pending %q", first.Verdict, first.Summary, first.Reason, want)
	}
	if obs := at(t0.Add(9*time.Minute+59*time.Second), &first); !obs.Same(&first) {
		t.Fatalf("within the bound: %+v, want the same pending", obs)
	}
	end := at(t0.Add(ci.UnknownCommitBound), &first)
	if end.Verdict != vigil.VerdictUnavailable || !end.Permanent ||
		!strings.Contains(end.Reason, "commit 3f2a1b0 never arrived in acme/api") || !strings.Contains(end.Reason, "10m after the watch was registered") {
		t.Fatalf("at the bound: %+v, want a permanent error saying the commit never arrived", end)
	}

}

// TestUnknownCommitArrives: a commit pushed within the bound is judged
// as any other.
func TestUnknownCommitArrives(t *testing.T) {
	t.Parallel()
	srv := forgetest.New(t, forge.GitHub)
	srv.SetRef("acme/api", "main", newSHA)
	w := setup(t, srv, "")
	pr := canon(t, w, pred("acme/api"))
	first := probe(t, w, pr, t0)
	if first.Verdict != vigil.VerdictPending {
		t.Fatalf("before the push: %+v, want pending", first)
	}
	srv.SetRuns("acme/api", sha, run(1, "build", "completed", "success"))
	obs, err := watcher.Run(context.Background(), w, watcher.Probe{WatchID: "w", Kind: vigil.KindCI, Predicate: pr, Now: t0.Add(5 * time.Minute), Created: t0, Last: &first})
	if err != nil || obs.Verdict != vigil.VerdictSatisfied || obs.Summary != "the one check passed" {
		t.Fatalf("after the push: %+v, %v, want satisfied", obs, err)
	}
}

// TestUnknownCommitWithoutCreated: a probe that carries no registration
// time counts the bound from the first probe that found no commit, kept
// in the observation's facts.
func TestUnknownCommitWithoutCreated(t *testing.T) {
	t.Parallel()
	srv := forgetest.New(t, forge.GitHub)
	srv.SetRef("acme/api", "main", newSHA)
	w := setup(t, srv, "")
	pr := canon(t, w, pred("acme/api"))
	first := probe(t, w, pr, t0.Add(time.Minute))
	if first.Verdict != vigil.VerdictPending || first.Facts["commit_unknown_since"] != "2026-11-30T12:01:00.000Z" {
		t.Fatalf("first probe = %+v", first)
	}
	obs, err := watcher.Run(context.Background(), w, watcher.Probe{WatchID: "w", Kind: vigil.KindCI, Predicate: pr, Now: t0.Add(11 * time.Minute), Last: &first})
	if err != nil || !obs.Permanent || !strings.Contains(obs.Reason, "never arrived") {
		t.Fatalf("10m after the first probe: %+v, %v, want the permanent error", obs, err)
	}
}

// TestRequiredCheckNeverAppears: a check named in "checks" that has not
// appeared once every other check has finished fails the watch after
// MissingGrace, naming the checks that exist; a name copied from
// GitHub's web page is explained.
func TestRequiredCheckNeverAppears(t *testing.T) {
	t.Parallel()
	done := t0.Add(-20 * time.Minute) // when the last check finished
	runs := []forgetest.Run{
		{ID: 1, Name: "build", Status: "completed", Conclusion: "success", Started: done.Add(-5 * time.Minute), Completed: done},
		{ID: 2, Name: "lint", Status: "completed", Conclusion: "success", Started: done.Add(-5 * time.Minute), Completed: done.Add(-time.Minute)},
	}
	for _, tc := range []struct {
		name    string
		checks  string
		now     time.Time
		runs    []forgetest.Run
		verdict vigil.Verdict
		summary string
	}{
		{name: "within the grace period", checks: `["build","e2e"]`, now: done.Add(ci.MissingGrace - time.Second), runs: runs,
			verdict: vigil.VerdictPending,
			summary: "2 required checks: 1 passed, 1 not yet appeared (e2e); every other check has finished: failing at 2026-11-30 11:50:00 UTC unless e2e appears"},
		{name: "past the grace period", checks: `["build","e2e"]`, now: done.Add(ci.MissingGrace), runs: runs,
			verdict: vigil.VerdictFailed,
			summary: "required check e2e never appeared, 10m after every other check finished; the checks of this commit are: build, lint"},
		{name: "a check still running holds it", checks: `["build","e2e"]`, now: t0,
			runs:    append([]forgetest.Run{{ID: 3, Name: "slow", Status: "in_progress", Started: t0.Add(-5 * time.Minute)}}, runs...),
			verdict: vigil.VerdictPending, summary: "2 required checks: 1 passed, 1 not yet appeared (e2e)"},
		{name: "a name copied from the web page", checks: `["CI / build (push)"]`, now: t0, runs: runs,
			verdict: vigil.VerdictFailed,
			summary: `required check CI / build (push) never appeared, 10m after every other check finished; the checks of this commit are: build, lint; "CI / build (push)" is how GitHub's web page shows the check "build": name it "build" (a check run is named by its job alone)`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			srv := forgetest.New(t, forge.GitHub)
			srv.SetRuns("acme/api", sha, tc.runs...)
			w := setup(t, srv, "")
			got := probe(t, w, canon(t, w, `{"repo":"acme/api","sha":"`+sha+`","checks":`+tc.checks+`}`), tc.now)
			if got.Verdict != tc.verdict || got.Summary != tc.summary {
				t.Errorf("Probe = %s %q\nwant    %s %q", got.Verdict, got.Summary, tc.verdict, tc.summary)
			}
		})
	}
}
