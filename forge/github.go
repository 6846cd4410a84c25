package forge

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
)

// githubAPI reads the GitHub REST API (github.com and GitHub Enterprise
// Server): check runs and combined commit statuses of a commit, issues
// and pull requests (which share one numbering) with their comments.
type githubAPI struct{ c *Client }

func (g githubAPI) authorize(req *http.Request) {
	if req.Header.Get("Accept") == acceptJSON {
		req.Header.Set("Accept", "application/vnd.github+json")
	}
	req.Header.Set("X-GitHub-Api-Version", "2022-11-28")
	if g.c.token != "" {
		req.Header.Set("Authorization", "Bearer "+g.c.token)
	}
}

func repoPath(repo string, more ...string) []string {
	segs := append([]string{"repos"}, strings.Split(repo, "/")...)
	return append(segs, more...)
}

// resolve asks for the commit a ref names with the media type that
// answers the bare SHA. A ref with slashes (heads/feature/x) is passed
// with its slashes, as GitHub documents.
func (g githubAPI) resolve(rq request, repo, ref string) (string, error) {
	segs := append(repoPath(repo, "commits"), strings.Split(ref, "/")...)
	resp, err := g.c.reader.get(rq, g.c.endpoint(nil, segs...), "application/vnd.github.sha")
	if err != nil {
		return "", err
	}
	return string(resp.Body), nil
}

// githubActions is the slug of GitHub Actions' app.
const githubActions = "github-actions"

type githubApp struct {
	ID   int64  `json:"id"`
	Slug string `json:"slug"`
	Name string `json:"name"`
}

func (a *githubApp) slug() string {
	if a == nil {
		return ""
	}
	return a.Slug
}

func (a *githubApp) id() int64 {
	if a == nil {
		return 0
	}
	return a.ID
}

type githubCheckRun struct {
	ID          int64   `json:"id"`
	Name        string  `json:"name"`
	Status      string  `json:"status"`
	Conclusion  *string `json:"conclusion"`
	HTMLURL     string  `json:"html_url"`
	DetailsURL  string  `json:"details_url"`
	StartedAt   string  `json:"started_at"`
	CompletedAt string  `json:"completed_at"`
	CheckSuite  *struct {
		ID int64 `json:"id"`
	} `json:"check_suite"`
	App *githubApp `json:"app"`
}

func (r *githubCheckRun) suite() int64 {
	if r.CheckSuite == nil {
		return 0
	}
	return r.CheckSuite.ID
}

type githubCheckRuns struct {
	TotalCount int              `json:"total_count"`
	CheckRuns  []githubCheckRun `json:"check_runs"`
}

type githubSuite struct {
	ID                   int64      `json:"id"`
	Status               *string    `json:"status"`
	Conclusion           *string    `json:"conclusion"`
	App                  *githubApp `json:"app"`
	CreatedAt            string     `json:"created_at"`
	UpdatedAt            string     `json:"updated_at"`
	LatestCheckRunsCount int        `json:"latest_check_runs_count"`
}

type githubCheckSuites struct {
	TotalCount  int           `json:"total_count"`
	CheckSuites []githubSuite `json:"check_suites"`
}

// githubWorkflowRun is what vigil reads of a GitHub Actions workflow
// run: which workflow, for which event, made which check suite.
type githubWorkflowRun struct {
	ID           int64  `json:"id"`
	Name         string `json:"name"`
	WorkflowID   int64  `json:"workflow_id"`
	CheckSuiteID int64  `json:"check_suite_id"`
	Event        string `json:"event"`
	HTMLURL      string `json:"html_url"`
}

type githubWorkflowRuns struct {
	TotalCount   int                 `json:"total_count"`
	WorkflowRuns []githubWorkflowRun `json:"workflow_runs"`
}

type githubCombinedStatus struct {
	State    string `json:"state"`
	Statuses []struct {
		ID        int64  `json:"id"`
		State     string `json:"state"`
		Context   string `json:"context"`
		TargetURL string `json:"target_url"`
		CreatedAt string `json:"created_at"`
		UpdatedAt string `json:"updated_at"`
	} `json:"statuses"`
	TotalCount int `json:"total_count"`
}

// checks reads GitHub's three CI sources, each in full (paginated):
//
//   - the check runs (GitHub Actions and other apps; the latest run of
//     each name in each check suite), each keyed by its app, its check
//     suite (for GitHub Actions: its workflow and event, read from the
//     commit's workflow runs) and its name, so that a newer run of one
//     workflow replaces an older one and nothing else does;
//   - the check suites, for what the runs do not show: a suite still to
//     run (queued with no runs yet, or in progress between jobs) holds
//     the watch, and a suite that ended failing without a run fails it;
//   - the combined commit status (the latest status of each context),
//     each a check of its own beside any check run of its name. Its own
//     "state" is ignored: with no statuses at all GitHub says "pending".
func (g githubAPI) checks(rq request, repo, sha string) (Report, error) {
	var rep Report
	var runs []githubCheckRun
	q := url.Values{"per_page": {"100"}, "filter": {"latest"}}
	truncated, err := g.c.pages(rq, g.c.endpoint(q, repoPath(repo, "commits", sha, "check-runs")...), func(body []byte) error {
		var page githubCheckRuns
		if err := json.Unmarshal(body, &page); err != nil {
			return g.c.badJSON(err)
		}
		runs = append(runs, page.CheckRuns...)
		return nil
	})
	if err != nil {
		return rep, err
	}
	if truncated {
		return rep, g.c.tooMany()
	}
	var suites []githubSuite
	q = url.Values{"per_page": {"100"}}
	truncated, err = g.c.pages(rq, g.c.endpoint(q, repoPath(repo, "commits", sha, "check-suites")...), func(body []byte) error {
		var page githubCheckSuites
		if err := json.Unmarshal(body, &page); err != nil {
			return g.c.badJSON(err)
		}
		suites = append(suites, page.CheckSuites...)
		return nil
	})
	if err != nil {
		return rep, err
	}
	if truncated {
		return rep, g.c.tooMany()
	}

	// The workflow runs tell which workflow each GitHub Actions suite
	// runs; they are read only when that matters: two Actions suites
	// (are they one workflow run twice?) or an Actions suite with no run
	// to name it.
	actions := 0
	for _, su := range suites {
		if su.App.slug() == githubActions {
			actions++
		}
	}
	byRun := runsBySuite(runs)
	var workflows map[int64]githubWorkflowRun
	if actions >= 2 || actions == 1 && slices.ContainsFunc(suites, func(su githubSuite) bool {
		return su.App.slug() == githubActions && byRun[su.ID].unfinished == 0 && suiteCheck(su, byRun[su.ID], true) != nil
	}) {
		if workflows, err = g.workflowRuns(rq, repo, sha); err != nil {
			return rep, err
		}
	}

	appHasRuns := make(map[int64]bool)
	for _, r := range runs {
		appHasRuns[r.App.id()] = true
	}
	for _, r := range runs {
		rep.Checks = append(rep.Checks, g.runCheck(r, workflows))
	}
	rep.Checks, rep.Ignored = g.suiteChecks(rep.Checks, suites, byRun, appHasRuns, workflows)

	q = url.Values{"per_page": {"100"}}
	truncated, err = g.c.pages(rq, g.c.endpoint(q, repoPath(repo, "commits", sha, "status")...), func(body []byte) error {
		var page githubCombinedStatus
		if err := json.Unmarshal(body, &page); err != nil {
			return g.c.badJSON(err)
		}
		for _, s := range page.Statuses {
			ch := Check{Name: s.Context, Group: "commit status", Key: "status\x00" + s.Context, Source: SourceStatus,
				ID: s.ID, URL: s.TargetURL, Result: s.State, Started: parseTime(s.CreatedAt), Updated: parseTime(s.UpdatedAt)}
			switch s.State {
			case "success":
				ch.State = StatePassed
			case "pending":
				ch.State = StateRunning
			default: // failure, error
				ch.State = StateFailed
			}
			rep.Checks = append(rep.Checks, ch)
		}
		return nil
	})
	if err != nil {
		return rep, err
	}
	if truncated {
		return rep, g.c.tooMany()
	}
	return rep, nil
}

// workflowRuns reads the GitHub Actions workflow runs of a commit, by
// check suite. A token that may not read Actions (403, 404) gets none:
// each suite is then a workflow of its own, which can fail a commit a
// newer run of one workflow passed, never the other way round.
func (g githubAPI) workflowRuns(rq request, repo, sha string) (map[int64]githubWorkflowRun, error) {
	out := make(map[int64]githubWorkflowRun)
	q := url.Values{"head_sha": {sha}, "per_page": {"100"}}
	_, err := g.c.pages(rq, g.c.endpoint(q, repoPath(repo, "actions", "runs")...), func(body []byte) error {
		var page githubWorkflowRuns
		if err := json.Unmarshal(body, &page); err != nil {
			return g.c.badJSON(err)
		}
		for _, w := range page.WorkflowRuns {
			if w.CheckSuiteID != 0 && w.WorkflowID != 0 {
				out[w.CheckSuiteID] = w
			}
		}
		return nil
	})
	var fe *Error
	if errors.As(err, &fe) && (fe.Kind == KindForbidden || fe.Kind == KindNotFound) {
		return nil, nil
	}
	// Past MaxPages, the suites not reached stay workflows of their own.
	return out, err
}

// workflowKey is the key part of a GitHub Actions suite whose workflow
// run is known: its workflow and the event it ran for.
func workflowKey(w githubWorkflowRun) string {
	return fmt.Sprintf("workflow:%d\x00%s", w.WorkflowID, w.Event)
}

// suiteKey is the key part shared by the runs of a check suite.
func suiteKey(app *githubApp, suite int64, workflows map[int64]githubWorkflowRun) string {
	if w, ok := workflows[suite]; ok && app.slug() == githubActions {
		return workflowKey(w)
	}
	return fmt.Sprintf("app:%d\x00suite:%d", app.id(), suite)
}

func appName(app *githubApp) string {
	switch {
	case app == nil:
		return "an unknown app"
	case app.Slug == githubActions:
		return "GitHub Actions"
	case app.Slug != "":
		return app.Slug
	}
	return fmt.Sprintf("app %d", app.ID)
}

func (g githubAPI) runCheck(r githubCheckRun, workflows map[int64]githubWorkflowRun) Check {
	ch := Check{Name: r.Name, Group: appName(r.App), Source: SourceCheckRun, ID: r.ID, URL: r.HTMLURL,
		Key:     "run\x00" + suiteKey(r.App, r.suite(), workflows) + "\x00" + r.Name,
		Started: parseTime(r.StartedAt)}
	if w, ok := workflows[r.suite()]; ok && r.App.slug() == githubActions && w.Name != "" {
		ch.Group = w.Name
	}
	if ch.URL == "" {
		ch.URL = r.DetailsURL
	}
	switch r.Status {
	case "completed":
		ch.Result = "unknown"
		if r.Conclusion != nil {
			ch.Result = *r.Conclusion
		}
		ch.State = StateFailed
		switch ch.Result {
		case "success", "neutral", "skipped":
			ch.State = StatePassed
		}
		ch.Updated = parseTime(r.CompletedAt)
		if ch.Updated.IsZero() {
			ch.Updated = ch.Started
		}
	case "in_progress":
		// A check run carries no update time, and started_at only says
		// when a runner took it up: a job has no sign of life to give
		// while it runs, however long it takes. Updated stays zero, so a
		// running check run is never reported stalled (SPEC §2.1's ghost
		// is a check no runner is working on); the deadline still ends the
		// watch.
		ch.State, ch.Result = StateRunning, r.Status
	default: // queued, waiting, requested, pending
		// Waiting since started_at for a runner: waiting that long is
		// what a ghost looks like.
		ch.State, ch.Result = StateQueued, r.Status
		ch.Updated = ch.Started
	}
	return ch
}

// suiteRuns is what the check runs show of one suite.
type suiteRuns struct{ runs, unfinished int }

func runsBySuite(runs []githubCheckRun) map[int64]suiteRuns {
	m := make(map[int64]suiteRuns)
	for _, r := range runs {
		sr := m[r.suite()]
		sr.runs++
		if r.Status != "completed" {
			sr.unfinished++
		}
		m[r.suite()] = sr
	}
	return m
}

// failingSuite lists the conclusions of a suite that fails a commit
// when no run of it says more ("stale" is GitHub's mark on a suite
// nothing ran in for 14 days, and is left out with the passing ones).
func failingSuite(conclusion string) bool {
	switch conclusion {
	case "failure", "startup_failure", "timed_out", "cancelled", "action_required":
		return true
	}
	return false
}

// suiteCheck is the check a suite stands for when its runs do not show
// it, or nil:
//
//   - a suite in progress, or queued (requested, waiting, pending) and
//     worth waiting for, none of whose runs is still going: it holds the
//     watch (a workflow between jobs, one held by a concurrency group,
//     one not started yet);
//   - a completed suite with a failing conclusion and no run: it fails
//     the watch (a workflow file that does not parse ends
//     startup_failure before any job).
//
// wait says whether a queued suite is worth waiting for (see
// suiteChecks).
func suiteCheck(su githubSuite, sr suiteRuns, wait bool) *Check {
	status := ""
	if su.Status != nil {
		status = *su.Status
	}
	conclusion := ""
	if su.Conclusion != nil {
		conclusion = *su.Conclusion
	}
	ch := &Check{Source: SourceCheckSuite, ID: su.ID, Started: parseTime(su.CreatedAt), Updated: parseTime(su.UpdatedAt)}
	if ch.Updated.IsZero() {
		ch.Updated = ch.Started
	}
	switch {
	case status == "completed":
		if sr.runs > 0 || su.LatestCheckRunsCount > 0 || !failingSuite(conclusion) {
			return nil
		}
		ch.State, ch.Result = StateFailed, conclusion
	case sr.unfinished > 0:
		return nil // its runs hold the watch
	case status == "in_progress":
		ch.State, ch.Result = StateRunning, status
	case !wait:
		return nil
	default: // queued, requested, waiting, pending
		ch.State, ch.Result = StateQueued, status
		if status == "" {
			ch.Result = "queued"
		}
	}
	return ch
}

// suiteChecks adds the checks the suites stand for (see suiteCheck) and
// returns the apps whose queued suites it does not wait for.
//
// A queued suite with no run is waited for when its app is GitHub
// Actions or has added a check run to this commit; otherwise it is an
// app that GitHub opens a suite for on every push and that never adds a
// run to it (a suite "stale" forever), and it is not waited for: its
// app is returned, for the summary to say so. Of the suites of one
// workflow and event, only the newest (the last created) stands for a
// check: a newer run of a workflow supersedes an older one's failure,
// and an older one that ended after it (cancelled by its concurrency
// group) does not supersede a newer one still queued.
func (g githubAPI) suiteChecks(checks []Check, suites []githubSuite, byRun map[int64]suiteRuns, appHasRuns map[int64]bool,
	workflows map[int64]githubWorkflowRun) ([]Check, []string) {
	newest := make(map[string]githubSuite)
	for _, su := range suites {
		if w, ok := workflows[su.ID]; ok && su.App.slug() == githubActions {
			k := workflowKey(w)
			c := parseTime(su.CreatedAt)
			if old, ok := newest[k]; !ok || c.After(parseTime(old.CreatedAt)) || c.Equal(parseTime(old.CreatedAt)) && su.ID > old.ID {
				newest[k] = su
			}
		}
	}
	var ignored []string
	for _, su := range suites {
		w, known := workflows[su.ID]
		if known && su.App.slug() == githubActions && newest[workflowKey(w)].ID != su.ID {
			continue
		}
		wait := su.App.slug() == githubActions || appHasRuns[su.App.id()] || su.LatestCheckRunsCount > 0
		ch := suiteCheck(su, byRun[su.ID], wait)
		if ch == nil {
			if !wait && byRun[su.ID].runs == 0 && su.Status != nil && *su.Status != "completed" {
				ignored = append(ignored, appName(su.App))
			}
			continue
		}
		ch.Key = "suite\x00" + suiteKey(su.App, su.ID, workflows)
		switch {
		case known && su.App.slug() == githubActions && w.Name != "":
			ch.Name, ch.URL = "workflow "+w.Name, w.HTMLURL
		default:
			ch.Name = fmt.Sprintf("%s suite %d", appName(su.App), su.ID)
		}
		checks = append(checks, *ch)
	}
	return checks, ignored
}

type githubIssue struct {
	Number      int64   `json:"number"`
	Title       string  `json:"title"`
	State       string  `json:"state"`
	Body        *string `json:"body"`
	Comments    int     `json:"comments"`
	HTMLURL     string  `json:"html_url"`
	Draft       *bool   `json:"draft"`
	PullRequest *struct {
		MergedAt *string `json:"merged_at"`
	} `json:"pull_request"`
}

// githubUser is the author of a comment or review: a user of type
// "Bot" is a GitHub App's bot user (dependabot[bot]).
type githubUser struct {
	Login string `json:"login"`
	Type  string `json:"type"`
}

// githubComment is a comment: an issue's, or a review comment on a line
// of a pull request's diff. performed_via_github_app is set when a
// GitHub App wrote it on a user's behalf.
type githubComment struct {
	User                  githubUser `json:"user"`
	PerformedViaGitHubApp *githubApp `json:"performed_via_github_app"`
}

func (c githubComment) author() author {
	return author{login: c.User.Login, bot: c.User.Type == "Bot" || c.PerformedViaGitHubApp != nil}
}

type githubReview struct {
	User  githubUser `json:"user"`
	State string     `json:"state"`
}

// ticket reads an issue or pull request through the issues API, which
// serves both (a pull request carries "pull_request" and "draft"), with
// its comments, and for a pull request its reviews and review comments
// (the issues API counts neither).
func (g githubAPI) ticket(rq request, tq TicketQuery, k counter) (*Ticket, error) {
	n := strconv.FormatInt(tq.Number, 10)
	resp, err := g.c.reader.get(rq, g.c.endpoint(nil, repoPath(tq.Repo, "issues", n)...), acceptJSON)
	if err != nil {
		return nil, err
	}
	var is githubIssue
	if err := json.Unmarshal(resp.Body, &is); err != nil {
		return nil, g.c.badJSON(err)
	}
	t := &Ticket{Kind: "issue", Title: is.Title, State: is.State, URL: is.HTMLURL, Comments: is.Comments}
	if is.Body != nil {
		t.BodySHA256 = bodyDigest(*is.Body)
	} else {
		t.BodySHA256 = bodyDigest("")
	}
	if is.PullRequest != nil {
		t.Kind = "pull_request"
		if is.PullRequest.MergedAt != nil && *is.PullRequest.MergedAt != "" {
			t.State = "merged"
		}
		t.Draft = is.Draft != nil && *is.Draft
	}
	q := url.Values{"per_page": {"100"}}
	comments := func(body []byte) ([]author, error) {
		var cs []githubComment
		if err := json.Unmarshal(body, &cs); err != nil {
			return nil, err
		}
		as := make([]author, len(cs))
		for i, c := range cs {
			as[i] = c.author()
		}
		return as, nil
	}
	if is.Comments > 0 && !k.all() {
		if t.Comments, err = countOthers(g.c, rq, g.c.endpoint(q, repoPath(tq.Repo, "issues", n, "comments")...), k, is.Comments, comments); err != nil {
			return nil, err
		}
	}
	if t.Kind != "pull_request" {
		return t, nil
	}
	_, err = g.c.pages(rq, g.c.endpoint(q, repoPath(tq.Repo, "pulls", n, "reviews")...), func(body []byte) error {
		var rs []githubReview
		if err := json.Unmarshal(body, &rs); err != nil {
			return g.c.badJSON(err)
		}
		for _, r := range rs {
			if r.State == "PENDING" || k.skip(author{login: r.User.Login, bot: r.User.Type == "Bot"}) {
				continue
			}
			t.Reviews++
			t.LatestReview = reviewWords(r.State) + " by " + r.User.Login
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	t.ReviewComments, err = countOthers(g.c, rq, g.c.endpoint(q, repoPath(tq.Repo, "pulls", n, "comments")...), k, 0, comments)
	return t, err
}

// countOthers counts the comments of a listing that k does not skip.
// authors reads one page's comment authors. Past MaxPages the count is
// the total the forge gave less the comments skipped so far.
func countOthers(c *Client, rq request, first string, k counter, total int, authors func([]byte) ([]author, error)) (int, error) {
	others, skipped := 0, 0
	truncated, err := c.pages(rq, first, func(body []byte) error {
		as, err := authors(body)
		if err != nil {
			return c.badJSON(err)
		}
		for _, a := range as {
			if k.skip(a) {
				skipped++
			} else {
				others++
			}
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	if truncated {
		return max(total-skipped, others), nil
	}
	return others, nil
}

// self reads the token's login from /user. A GitHub App installation
// token may not read /user (403, "Resource not accessible by
// integration"): its login is its app's bot user, "SLUG[bot]", which
// GraphQL's viewer names.
func (g githubAPI) self(rq request) (string, error) {
	login, err := readLogin(g.c, rq, g.c.endpoint(nil, "user"), "login")
	var fe *Error
	if !errors.As(err, &fe) || fe.Kind != KindForbidden {
		return login, err
	}
	resp, err := g.c.reader.post(rq, g.graphqlURL(), []byte(`{"query":"query { viewer { login } }"}`))
	if err != nil {
		return "", err
	}
	var out struct {
		Data struct {
			Viewer struct {
				Login string `json:"login"`
			} `json:"viewer"`
		} `json:"data"`
	}
	if err := json.Unmarshal(resp.Body, &out); err != nil {
		return "", g.c.badJSON(err)
	}
	return out.Data.Viewer.Login, nil
}

// graphqlURL is GitHub's GraphQL endpoint: api.github.com/graphql, or on
// GitHub Enterprise Server HOST/api/graphql beside HOST/api/v3.
func (g githubAPI) graphqlURL() string {
	u := *g.c.base
	if p, ok := strings.CutSuffix(u.Path, "/api/v3"); ok {
		u.Path = p + "/api/graphql"
	} else {
		u.Path += "/graphql"
	}
	u.RawPath = ""
	return u.String()
}

// readLogin reads the login field of a /user answer.
func readLogin(c *Client, rq request, u, field string) (string, error) {
	resp, err := c.reader.get(rq, u, acceptJSON)
	if err != nil {
		return "", err
	}
	var m map[string]any
	if err := json.Unmarshal(resp.Body, &m); err != nil {
		return "", c.badJSON(err)
	}
	s, _ := m[field].(string)
	return s, nil
}
