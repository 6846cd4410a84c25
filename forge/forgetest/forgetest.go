// Package forgetest is a fake forge for tests: an httptest server on
// 127.0.0.1 that answers the GitHub, Gitea or GitLab API calls package
// forge makes, with the response shapes of the real APIs (the full
// documents in testdata/, filled in with the state a test sets).
//
// A test sets refs, checks (GitHub check runs, check suites, workflow
// runs and commit statuses; Gitea statuses; GitLab pipelines) and tickets
// (with comments and reviews), moves them as the world would (a push, a
// finished build, an edited title), counts the requests each path
// received and may answer any request itself (a rate limit, an outage)
// through Intercept. Responses carry an ETag, and a request whose
// If-None-Match matches is answered 304, as the real forges do (GitHub's
// ETag is of the page's body alone, and its 304 has no Link). Listings
// page as each forge's do: GitHub and GitLab with page, per_page and a
// Link header; Gitea with page and limit (at most 50), X-Total-Count and
// no Link header. A commit GitHub does not know is 422 "No commit found
// for SHA"; GitLab lists child pipelines only for source=parent_pipeline;
// a GitHub App installation token (Server.App) cannot read /user, and
// GraphQL's viewer names its bot.
package forgetest

import (
	"cmp"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vigil-run/vigil/forge"
)

//go:embed testdata
var testdata embed.FS

// template returns a fresh copy of a testdata document.
func template(name string) map[string]any {
	b, err := testdata.ReadFile("testdata/" + name)
	if err != nil {
		panic(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		panic(fmt.Sprintf("forgetest: %s: %v", name, err))
	}
	return m
}

// Run is a GitHub check run.
type Run struct {
	ID int64
	// Name, Status (queued, in_progress, completed, …) and Conclusion
	// (success, failure, … or "" while not completed).
	Name, Status, Conclusion string
	Started, Completed       time.Time
	// App is the slug of the GitHub App that made it; "" is GitHub
	// Actions ("github-actions").
	App string
	// Suite is the id of its check suite; 0 is the one suite of its app.
	Suite int64
}

// Suite is a GitHub check suite. A suite a run names but SetSuites does
// not is made up from its runs, as GitHub keeps it.
type Suite struct {
	ID int64
	// App is the slug of the app it belongs to; "" is GitHub Actions.
	App string
	// Status is queued, in_progress, completed (or requested, waiting,
	// pending); Conclusion is "" until completed.
	Status, Conclusion string
	Created, Updated   time.Time
}

// WorkflowRun is a GitHub Actions workflow run: one run of one workflow
// file, with its own check suite.
type WorkflowRun struct {
	ID, WorkflowID, Suite int64
	// Name is the workflow's name, Event what triggered it (push,
	// pull_request, …).
	Name, Event, Status, Conclusion string
	Created                         time.Time
}

// Review is a pull request review (GitHub, Gitea).
type Review struct {
	User string
	// State is GitHub's APPROVED, CHANGES_REQUESTED, COMMENTED,
	// DISMISSED or PENDING (Gitea: APPROVED, REQUEST_CHANGES, COMMENT,
	// PENDING, REQUEST_REVIEW).
	State string
	// Comments is how many review comments (on lines of the diff) it holds.
	Comments int
}

// Status is a commit status (GitHub and Gitea).
type Status struct {
	ID int64
	// Context names the status; State is pending, success, failure, error
	// (and on Gitea warning, skipped).
	Context, State, TargetURL string
	Created, Updated          time.Time
}

// Pipeline is a GitLab pipeline.
type Pipeline struct {
	ID                   int64
	Name, Status, Source string
	// Ref is the branch or tag it ran for ("main" when empty), or
	// refs/merge-requests/N/head for a merge request pipeline.
	Ref              string
	Created, Updated time.Time
}

// Ticket is an issue, pull request or merge request.
type Ticket struct {
	Title, Body string
	// State is open or closed (GitLab: opened, closed, merged).
	State string
	// Pull makes it a pull request (GitHub, Gitea); MergeRequest puts it
	// among GitLab's merge requests.
	Pull, MergeRequest, Draft, Merged bool
	// Comments lists the author of each comment; System marks GitLab
	// system notes by index. On GitHub a login ending in "[bot]" is a
	// user of type Bot, and Via names the GitHub App a comment was
	// performed via, by index; on Gitea the login gitea-actions is the
	// Actions user (id -2).
	Comments []string
	System   map[int]bool
	Via      map[int]string
	// Reviews are a pull request's reviews (GitHub, Gitea).
	Reviews []Review
	// SourceBranch is a GitLab merge request's source branch.
	SourceBranch string
}

// Server is a fake forge. Its exported fields may be set before the
// first request.
type Server struct {
	*httptest.Server
	Provider forge.Provider
	// Token, when set, is required on every request (else 401).
	Token string
	// Login is the token's own user, answered at /user.
	Login string
	// NoETags turns conditional requests off.
	NoETags bool
	// App, when set on GitHub, makes the token a GitHub App installation
	// token of the app with this slug: /user answers 403, and GraphQL's
	// viewer is the app's bot user, App + "[bot]".
	App string

	mu        sync.Mutex
	refs      map[string]string // repo + " " + ref → sha
	repos     map[string]bool
	runs      map[string][]Run // repo + " " + sha
	suites    map[string][]Suite
	wfruns    map[string][]WorkflowRun
	statuses  map[string][]Status
	pipelines map[string][]Pipeline
	tickets   map[string]Ticket // repo + "#" + n or repo + "!" + n
	hits      map[string]int
	headers   map[string][]http.Header
	intercept func(w http.ResponseWriter, r *http.Request) bool
}

// New starts a fake forge for provider p, closed when the test ends.
func New(t testing.TB, p forge.Provider) *Server {
	t.Helper()
	s := &Server{
		Provider: p, refs: map[string]string{}, repos: map[string]bool{}, runs: map[string][]Run{},
		suites: map[string][]Suite{}, wfruns: map[string][]WorkflowRun{},
		statuses: map[string][]Status{}, pipelines: map[string][]Pipeline{}, tickets: map[string]Ticket{},
		hits: map[string]int{}, headers: map[string][]http.Header{},
	}
	s.Server = httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(s.Close)
	return s
}

// Endpoint returns the forge.Endpoint that reads this server with token.
func (s *Server) Endpoint(token string) forge.Endpoint {
	return forge.Endpoint{URL: s.URL, Token: token}
}

// Settings returns forge settings with only this server's provider
// configured.
func (s *Server) Settings(token string) forge.Settings {
	var st forge.Settings
	switch s.Provider {
	case forge.GitHub:
		st.GitHub = s.Endpoint(token)
	case forge.Gitea:
		st.Gitea = s.Endpoint(token)
	case forge.GitLab:
		st.GitLab = s.Endpoint(token)
	}
	return st
}

// SetRef points ref (a branch, tag or short SHA) of repo at sha.
func (s *Server) SetRef(repo, ref, sha string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.repos[repo] = true
	s.refs[repo+" "+ref] = sha
	s.refs[repo+" "+sha] = sha
}

// SetRuns replaces the GitHub check runs of a commit.
func (s *Server) SetRuns(repo, sha string, rs ...Run) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.repos[repo] = true
	s.refs[repo+" "+sha] = sha
	s.runs[repo+" "+sha] = rs
}

// SetSuites replaces the GitHub check suites of a commit that are not
// made up from its runs (a queued suite with no runs yet, a suite that
// failed before it made any).
func (s *Server) SetSuites(repo, sha string, ss ...Suite) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.repos[repo] = true
	s.refs[repo+" "+sha] = sha
	s.suites[repo+" "+sha] = ss
}

// SetWorkflowRuns replaces the GitHub Actions workflow runs of a commit.
func (s *Server) SetWorkflowRuns(repo, sha string, ws ...WorkflowRun) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.repos[repo] = true
	s.refs[repo+" "+sha] = sha
	s.wfruns[repo+" "+sha] = ws
}

// SetStatuses replaces the commit statuses of a commit (GitHub, Gitea).
func (s *Server) SetStatuses(repo, sha string, st ...Status) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.repos[repo] = true
	s.refs[repo+" "+sha] = sha
	s.statuses[repo+" "+sha] = st
}

// SetPipelines replaces the GitLab pipelines of a commit.
func (s *Server) SetPipelines(repo, sha string, ps ...Pipeline) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.repos[repo] = true
	s.refs[repo+" "+sha] = sha
	s.pipelines[repo+" "+sha] = ps
}

// SetTicket creates or replaces an issue, pull request or merge request.
func (s *Server) SetTicket(repo string, number int64, t Ticket) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.repos[repo] = true
	s.tickets[ticketKey(repo, number, t.MergeRequest)] = t
}

// EditTicket changes a ticket in place.
func (s *Server) EditTicket(repo string, number int64, mr bool, edit func(*Ticket)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := ticketKey(repo, number, mr)
	t := s.tickets[k]
	edit(&t)
	s.tickets[k] = t
}

func ticketKey(repo string, n int64, mr bool) string {
	if mr {
		return fmt.Sprintf("%s!%d", repo, n)
	}
	return fmt.Sprintf("%s#%d", repo, n)
}

// Intercept answers requests with fn first: when fn returns true the
// request was answered. nil removes it. fn may block.
func (s *Server) Intercept(fn func(w http.ResponseWriter, r *http.Request) bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.intercept = fn
}

// Hits returns how many requests path received (its API path, without
// the /api/v1 or /api/v4 prefix and the query).
func (s *Server) Hits(path string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.hits[path]
}

// TotalHits returns how many requests the server received.
func (s *Server) TotalHits() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, h := range s.hits {
		n += h
	}
	return n
}

// Headers returns the headers of each request path received, in order.
func (s *Server) Headers(path string) []http.Header {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]http.Header(nil), s.headers[path]...)
}

func (s *Server) prefix() string {
	switch s.Provider {
	case forge.Gitea:
		return "/api/v1"
	case forge.GitLab:
		return "/api/v4"
	}
	return ""
}

// segments splits the escaped path after the API prefix, unescaping each
// segment (a GitLab project id "acme%2Fapi" is one segment).
func (s *Server) segments(r *http.Request) ([]string, string, bool) {
	p, ok := strings.CutPrefix(r.URL.EscapedPath(), s.prefix()+"/")
	if !ok {
		return nil, "", false
	}
	raw := strings.Split(p, "/")
	segs := make([]string, len(raw))
	for i, x := range raw {
		u, err := url.PathUnescape(x)
		if err != nil {
			return nil, "", false
		}
		segs[i] = u
	}
	return segs, "/" + strings.Join(segs, "/"), true
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	segs, path, ok := s.segments(r)
	s.mu.Lock()
	s.hits[path]++
	s.headers[path] = append(s.headers[path], r.Header.Clone())
	icpt := s.intercept
	s.mu.Unlock()
	if icpt != nil && icpt(w, r) {
		return
	}
	graphql := ok && s.Provider == forge.GitHub && r.Method == http.MethodPost && path == "/graphql"
	if !ok || r.Method != http.MethodGet && !graphql {
		writeError(w, http.StatusNotFound, "404 page not found")
		return
	}
	if s.Token != "" && r.Header.Get("Authorization") != s.authorization() {
		writeError(w, http.StatusUnauthorized, "Bad credentials")
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if graphql {
		s.viewer(w, r)
		return
	}
	var status int
	var body any
	switch s.Provider {
	case forge.GitHub:
		status, body = s.github(r, segs)
	case forge.Gitea:
		status, body = s.gitea(r, segs)
	case forge.GitLab:
		status, body = s.gitlab(r, segs)
	}
	if status != http.StatusOK {
		writeError(w, status, fmt.Sprint(body))
		return
	}
	s.write(w, r, body)
}

func (s *Server) authorization() string {
	if s.Provider == forge.Gitea {
		return "token " + s.Token
	}
	return "Bearer " + s.Token
}

// page is one page of a listing: the items, the link to the next (GitHub,
// GitLab) or the total count (Gitea's X-Total-Count; -1 for none).
type page struct {
	items []any
	next  string
	total int
}

// paginate cuts items to the page the request asks for (page and
// per_page) and links the next, as GitHub and GitLab do.
func paginate(r *http.Request, items []any, sizeParam string, def int) page {
	q := r.URL.Query()
	size, _ := strconv.Atoi(q.Get(sizeParam))
	if size <= 0 {
		size = def
	}
	if size > 100 {
		size = 100
	}
	n, _ := strconv.Atoi(q.Get("page"))
	n = max(n, 1)
	lo := min((n-1)*size, len(items))
	hi := min(lo+size, len(items))
	p := page{items: items[lo:hi], total: -1}
	if hi < len(items) {
		q.Set("page", strconv.Itoa(n+1))
		u := *r.URL
		u.Scheme, u.Host = "http", r.Host
		u.RawQuery = q.Encode()
		p.next = u.String()
	}
	if p.items == nil {
		p.items = []any{}
	}
	return p
}

// Gitea's paging (setting.API: DEFAULT_PAGING_NUM 30, MAX_RESPONSE_ITEMS
// 50): page and limit, a limit above 50 is cut to 50, and the answer
// carries X-Total-Count and no Link header.
const (
	giteaDefaultLimit = 30
	giteaMaxLimit     = 50
)

// giteaPage cuts items to the page the request asks for, as Gitea does.
func giteaPage(r *http.Request, items []any) page {
	q := r.URL.Query()
	size, _ := strconv.Atoi(q.Get("limit"))
	if size <= 0 {
		size = giteaDefaultLimit
	}
	size = min(size, giteaMaxLimit)
	n, _ := strconv.Atoi(q.Get("page"))
	n = max(n, 1)
	lo := min((n-1)*size, len(items))
	hi := min(lo+size, len(items))
	p := page{items: items[lo:hi], total: len(items)}
	if p.items == nil {
		p.items = []any{}
	}
	return p
}

func (s *Server) write(w http.ResponseWriter, r *http.Request, body any) {
	var b []byte
	var next string
	total := -1
	switch v := body.(type) {
	case page:
		b, _ = json.Marshal(v.items)
		next, total = v.next, v.total
	case pageOf:
		v.doc[v.field] = v.p.items
		b, _ = json.Marshal(v.doc)
		next, total = v.p.next, v.p.total
	case rawBody:
		b = v
	default:
		b, _ = json.Marshal(v)
	}
	if !s.NoETags {
		// GitHub's ETag is of the page's body alone, and its 304 carries
		// no Link header: a full last page stays 304 when a next page
		// appears after it.
		tag := b
		if s.Provider != forge.GitHub {
			tag = append([]byte(next+"\x00"+strconv.Itoa(total)+"\x00"), b...)
		}
		sum := sha256.Sum256(tag)
		etag := `"` + hex.EncodeToString(sum[:8]) + `"`
		w.Header().Set("ETag", etag)
		if r.Header.Get("If-None-Match") == etag {
			if s.Provider != forge.GitHub && next != "" {
				w.Header().Set("Link", fmt.Sprintf(`<%s>; rel="next"`, next))
			}
			if s.Provider != forge.GitHub && total >= 0 {
				w.Header().Set("X-Total-Count", strconv.Itoa(total))
			}
			w.WriteHeader(http.StatusNotModified)
			return
		}
	}
	if next != "" {
		w.Header().Set("Link", fmt.Sprintf(`<%s>; rel="next"`, next))
	}
	if total >= 0 {
		w.Header().Set("X-Total-Count", strconv.Itoa(total))
	}
	if _, ok := body.(rawBody); ok {
		w.Header().Set("Content-Type", "application/vnd.github.sha; charset=utf-8")
	} else {
		w.Header().Set("Content-Type", "application/json; charset=utf-8")
	}
	w.Write(b)
}

// pageOf is a page of items inside an envelope document (GitHub's
// check-runs and combined status, Gitea's combined status).
type pageOf struct {
	doc   map[string]any
	field string
	p     page
}

// rawBody is a body sent as is.
type rawBody []byte

func writeError(w http.ResponseWriter, code int, msg string) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(code)
	json.NewEncoder(w).Encode(map[string]string{"message": msg})
}

func ts(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return t.UTC().Format(time.RFC3339)
}

func nullable(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// lookupRef resolves ref of repo, or reports why not.
func (s *Server) lookupRef(repo, ref string) (string, int, string) {
	if !s.repos[repo] {
		return "", http.StatusNotFound, "Not Found"
	}
	if sha, ok := s.refs[repo+" "+ref]; ok {
		return sha, http.StatusOK, ""
	}
	for k, sha := range s.refs { // a short SHA
		if r, _, _ := strings.Cut(k, " "); r == repo && len(ref) >= 4 && strings.HasPrefix(sha, ref) {
			return sha, http.StatusOK, ""
		}
	}
	return "", http.StatusUnprocessableEntity, "No commit found for SHA: " + ref
}

func (s *Server) github(r *http.Request, segs []string) (int, any) {
	if len(segs) == 1 && segs[0] == "user" {
		if s.App != "" {
			return http.StatusForbidden, "Resource not accessible by integration"
		}
		u := template("github/user.json")
		u["login"] = s.Login
		return http.StatusOK, u
	}
	if len(segs) < 4 || segs[0] != "repos" {
		return http.StatusNotFound, "Not Found"
	}
	repo := segs[1] + "/" + segs[2]
	rest := segs[3:]
	commitList := func(suffix string) (string, bool) {
		if rest[0] != "commits" || len(rest) < 3 || rest[len(rest)-1] != suffix {
			return "", false
		}
		return strings.Join(rest[1:len(rest)-1], "/"), true
	}
	if sha, ok := commitList("check-runs"); ok {
		if _, code, msg := s.lookupRef(repo, sha); code != http.StatusOK {
			return code, msg
		}
		runs := s.runs[repo+" "+sha]
		if r.URL.Query().Get("filter") != "all" {
			runs = latestRuns(runs)
		}
		var items []any
		for _, run := range runs {
			m := template("github/check-run.json")
			m["id"], m["name"], m["status"], m["head_sha"] = run.ID, run.Name, run.Status, sha
			m["conclusion"] = nullable(run.Conclusion)
			m["started_at"], m["completed_at"] = ts(run.Started), ts(run.Completed)
			m["html_url"] = fmt.Sprintf("https://github.com/%s/runs/%d", repo, run.ID)
			m["details_url"] = fmt.Sprintf("https://ci.example.com/%s/%d", repo, run.ID)
			m["check_suite"] = map[string]any{"id": runSuite(run)}
			m["app"] = app(m["app"].(map[string]any), run.App)
			items = append(items, m)
		}
		p := paginate(r, items, "per_page", 30)
		return http.StatusOK, pageOf{doc: map[string]any{"total_count": len(items)}, field: "check_runs", p: p}
	}
	if sha, ok := commitList("check-suites"); ok {
		if _, code, msg := s.lookupRef(repo, sha); code != http.StatusOK {
			return code, msg
		}
		var items []any
		for _, su := range s.allSuites(repo, sha) {
			m := template("github/check-suite.json")
			m["id"], m["head_sha"], m["status"], m["conclusion"] = su.ID, sha, su.Status, nullable(su.Conclusion)
			m["url"] = fmt.Sprintf("https://api.github.com/repos/%s/check-suites/%d", repo, su.ID)
			m["created_at"], m["updated_at"] = ts(su.Created), ts(su.Updated)
			m["app"] = app(m["app"].(map[string]any), su.App)
			n := 0
			for _, run := range latestRuns(s.runs[repo+" "+sha]) {
				if runSuite(run) == su.ID {
					n++
				}
			}
			m["latest_check_runs_count"] = n
			items = append(items, m)
		}
		p := paginate(r, items, "per_page", 30)
		return http.StatusOK, pageOf{doc: map[string]any{"total_count": len(items)}, field: "check_suites", p: p}
	}
	if sha, ok := commitList("status"); ok {
		if _, code, msg := s.lookupRef(repo, sha); code != http.StatusOK {
			return code, msg
		}
		doc := template("github/combined-status.json")
		tmpl := doc["statuses"].([]any)[0].(map[string]any)
		var items []any
		state := "pending" // what GitHub says with no statuses at all
		for i, st := range s.statuses[repo+" "+sha] {
			m := map[string]any{}
			for k, v := range tmpl {
				m[k] = v
			}
			m["id"], m["state"], m["context"], m["target_url"] = st.ID, st.State, st.Context, nullable(st.TargetURL)
			m["created_at"], m["updated_at"] = ts(st.Created), ts(st.Updated)
			items = append(items, m)
			if i == 0 {
				state = st.State
			}
		}
		doc["state"], doc["sha"], doc["total_count"] = state, sha, len(items)
		return http.StatusOK, pageOf{doc: doc, field: "statuses", p: paginate(r, items, "per_page", 30)}
	}
	switch {
	case len(rest) == 2 && rest[0] == "actions" && rest[1] == "runs":
		sha := r.URL.Query().Get("head_sha")
		var items []any
		ws := s.wfruns[repo+" "+sha]
		for i := len(ws) - 1; i >= 0; i-- { // the newest first
			wr := ws[i]
			m := template("github/workflow-run.json")
			m["id"], m["workflow_id"], m["check_suite_id"], m["name"], m["event"] = wr.ID, wr.WorkflowID, wr.Suite, wr.Name, wr.Event
			m["status"], m["conclusion"], m["head_sha"] = wr.Status, nullable(wr.Conclusion), sha
			m["created_at"], m["updated_at"], m["run_started_at"] = ts(wr.Created), ts(wr.Created), ts(wr.Created)
			m["html_url"] = fmt.Sprintf("https://github.com/%s/actions/runs/%d", repo, wr.ID)
			items = append(items, m)
		}
		p := paginate(r, items, "per_page", 30)
		return http.StatusOK, pageOf{doc: map[string]any{"total_count": len(items)}, field: "workflow_runs", p: p}
	case rest[0] == "commits" && len(rest) >= 2:
		sha, code, msg := s.lookupRef(repo, strings.Join(rest[1:], "/"))
		if code != http.StatusOK {
			return code, msg
		}
		if r.Header.Get("Accept") == "application/vnd.github.sha" {
			return http.StatusOK, rawBody(sha)
		}
		return http.StatusOK, map[string]any{"sha": sha}
	case rest[0] == "pulls" && len(rest) == 3 && (rest[2] == "reviews" || rest[2] == "comments"):
		n, _ := strconv.ParseInt(rest[1], 10, 64)
		t, ok := s.tickets[ticketKey(repo, n, false)]
		if !ok || !t.Pull {
			return http.StatusNotFound, "Not Found"
		}
		var items []any
		id := 0
		for _, rv := range t.Reviews {
			id++
			if rest[2] == "reviews" {
				if rv.State == "PENDING" && rv.User != s.Login {
					continue // a pending review shows only to its author
				}
				m := template("github/review.json")
				m["id"], m["state"], m["user"] = id, rv.State, githubUser(m["user"].(map[string]any), rv.User)
				m["submitted_at"] = "2026-11-30T11:00:00Z"
				if rv.State == "PENDING" {
					m["submitted_at"] = nil
				}
				items = append(items, m)
				continue
			}
			if rv.State == "PENDING" {
				continue
			}
			for range rv.Comments {
				m := template("github/review-comment.json")
				m["id"], m["pull_request_review_id"], m["user"] = len(items)+1, id, githubUser(m["user"].(map[string]any), rv.User)
				items = append(items, m)
			}
		}
		return http.StatusOK, paginate(r, items, "per_page", 30)
	case rest[0] == "issues" && len(rest) >= 2:
		n, _ := strconv.ParseInt(rest[1], 10, 64)
		t, ok := s.tickets[ticketKey(repo, n, false)]
		if !ok {
			return http.StatusNotFound, "Not Found"
		}
		if len(rest) == 3 && rest[2] == "comments" {
			return http.StatusOK, paginate(r, comments("github/comment.json", t, func(m map[string]any, i int, who string) {
				githubUser(m["user"].(map[string]any), who)
				if via := t.Via[i]; via != "" {
					m["performed_via_github_app"] = app(template("github/check-run.json")["app"].(map[string]any), via)
				}
			}), "per_page", 30)
		}
		m := template("github/issue.json")
		m["number"], m["title"], m["state"], m["body"], m["comments"] = n, t.Title, t.State, nullable(t.Body), len(t.Comments)
		m["html_url"] = fmt.Sprintf("https://github.com/%s/issues/%d", repo, n)
		if t.Pull {
			pr := template("github/pull-request.json")
			if t.Merged {
				pr["merged_at"] = "2026-11-30T12:00:00Z"
				m["state"] = "closed"
			}
			m["pull_request"], m["draft"] = pr, t.Draft
			m["html_url"] = fmt.Sprintf("https://github.com/%s/pull/%d", repo, n)
		}
		return http.StatusOK, m
	}
	return http.StatusNotFound, "Not Found"
}

// viewer answers GraphQL's { viewer { login } }: the app's bot user for
// an installation token, else the token's user.
func (s *Server) viewer(w http.ResponseWriter, r *http.Request) {
	var q struct {
		Query string `json:"query"`
	}
	if err := json.NewDecoder(r.Body).Decode(&q); err != nil || !strings.Contains(q.Query, "viewer") {
		w.Header().Set("Content-Type", "application/json; charset=utf-8")
		w.WriteHeader(http.StatusOK)
		fmt.Fprint(w, `{"errors":[{"message":"A query attribute must be specified and must be a string."}]}`)
		return
	}
	login := s.Login
	if s.App != "" {
		login = s.App + "[bot]"
	}
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	json.NewEncoder(w).Encode(map[string]any{"data": map[string]any{"viewer": map[string]any{"login": login}}})
}

// githubUser fills a user object: a login ending in "[bot]" is a Bot.
func githubUser(u map[string]any, login string) map[string]any {
	u["login"], u["type"] = login, "User"
	if strings.HasSuffix(login, "[bot]") {
		u["type"] = "Bot"
	}
	return u
}

// actionsApp is the slug of GitHub Actions, and actionsAppID its id on
// github.com.
const (
	actionsApp   = "github-actions"
	actionsAppID = 15368
)

// app fills an app (integration) object for slug ("" is GitHub Actions).
func app(m map[string]any, slug string) map[string]any {
	if slug == "" {
		slug = actionsApp
	}
	m["slug"], m["id"], m["name"] = slug, appID(slug), slug
	m["html_url"] = "https://github.com/apps/" + slug
	if slug == actionsApp {
		m["name"] = "GitHub Actions"
	}
	return m
}

func appID(slug string) int64 {
	if slug == "" || slug == actionsApp {
		return actionsAppID
	}
	h := fnv.New32a()
	h.Write([]byte(slug))
	return 100000 + int64(h.Sum32()%100000)
}

// runSuite is the check suite of a run: its own, or its app's one.
func runSuite(r Run) int64 {
	if r.Suite != 0 {
		return r.Suite
	}
	return appID(r.App)
}

// latestRuns keeps, within each suite, the latest run of each name, as
// filter=latest does.
func latestRuns(rs []Run) []Run {
	type key struct {
		suite int64
		name  string
	}
	latest := map[key]int{}
	for i, r := range rs {
		k := key{runSuite(r), r.Name}
		j, ok := latest[k]
		if !ok || r.Started.After(rs[j].Started) || r.Started.Equal(rs[j].Started) && r.ID > rs[j].ID {
			latest[k] = i
		}
	}
	var out []Run
	for i, r := range rs {
		if latest[key{runSuite(r), r.Name}] == i {
			out = append(out, r)
		}
	}
	return out
}

// allSuites returns the suites set with SetSuites and, for every other
// suite a run names, one made up from its runs: queued or in progress
// while a run is, else completed with the worst conclusion.
func (s *Server) allSuites(repo, sha string) []Suite {
	out := append([]Suite(nil), s.suites[repo+" "+sha]...)
	known := map[int64]int{}
	for i, su := range out {
		known[su.ID] = i
	}
	for _, run := range latestRuns(s.runs[repo+" "+sha]) {
		id := runSuite(run)
		i, ok := known[id]
		if !ok {
			out = append(out, Suite{ID: id, App: run.App, Status: "completed", Conclusion: "success", Created: run.Started, Updated: run.Started})
			i = len(out) - 1
			known[id] = i
		} else if i < len(s.suites[repo+" "+sha]) {
			continue // set explicitly
		}
		su := &out[i]
		switch {
		case run.Status == "in_progress":
			su.Status, su.Conclusion = "in_progress", ""
		case run.Status != "completed" && su.Status != "in_progress":
			su.Status, su.Conclusion = "queued", ""
		case run.Status == "completed" && su.Status == "completed":
			switch run.Conclusion {
			case "success", "neutral", "skipped":
			default:
				su.Conclusion = "failure"
			}
		}
		if run.Started.Before(su.Created) {
			su.Created = run.Started
		}
		if run.Completed.After(su.Updated) {
			su.Updated = run.Completed
		}
	}
	return out
}

func comments(tmpl string, t Ticket, set func(m map[string]any, i int, who string)) []any {
	items := make([]any, 0, len(t.Comments))
	for i, who := range t.Comments {
		m := template(tmpl)
		m["id"] = i + 1
		set(m, i, who)
		if _, ok := m["system"]; ok {
			m["system"] = t.System[i]
		}
		items = append(items, m)
	}
	return items
}

// giteaUserID is a user's id: Gitea's (and Forgejo's) Actions user is -2.
func giteaUserID(login string) int64 {
	if login == "gitea-actions" || login == "forgejo-actions" {
		return -2
	}
	h := fnv.New32a()
	h.Write([]byte(login))
	return 1 + int64(h.Sum32()%100000)
}

// worse reports whether Gitea state a is worse than b (error, failure,
// warning, pending, success, skipped, as CommitStatusState.NoBetterThan
// orders them).
func worse(a, b string) bool {
	rank := map[string]int{"error": 0, "failure": 1, "warning": 2, "pending": 3, "success": 4, "skipped": 5}
	return rank[a] < rank[b]
}

func (s *Server) gitea(r *http.Request, segs []string) (int, any) {
	if len(segs) == 1 && segs[0] == "user" {
		u := template("gitea/user.json")
		u["login"], u["username"] = s.Login, s.Login
		return http.StatusOK, u
	}
	if len(segs) < 4 || segs[0] != "repos" {
		return http.StatusNotFound, "Not Found"
	}
	repo := segs[1] + "/" + segs[2]
	rest := segs[3:]
	switch {
	case len(rest) == 3 && rest[0] == "git" && rest[1] == "commits":
		sha, code, msg := s.lookupRef(repo, rest[2])
		if code != http.StatusOK {
			return http.StatusNotFound, msg // Gitea answers 404 for an unknown ref
		}
		m := template("gitea/commit.json")
		m["sha"] = sha
		return http.StatusOK, m
	case len(rest) == 3 && rest[0] == "commits" && rest[2] == "status":
		sha := rest[1]
		if _, code, msg := s.lookupRef(repo, sha); code != http.StatusOK {
			return http.StatusNotFound, msg
		}
		// Gitea lists the latest status of each context, the newest
		// context first, a page at a time; the document's total_count is
		// the page's length, the whole count is in X-Total-Count.
		sts := append([]Status(nil), s.statuses[repo+" "+sha]...)
		slices.SortStableFunc(sts, func(a, b Status) int { return cmp.Compare(b.ID, a.ID) })
		doc := template("gitea/combined-status.json")
		tmpl := doc["statuses"].([]any)[0].(map[string]any)
		var items []any
		for _, st := range sts {
			m := map[string]any{}
			for k, v := range tmpl {
				m[k] = v
			}
			m["id"], m["status"], m["context"], m["target_url"] = st.ID, st.State, st.Context, st.TargetURL
			m["created_at"], m["updated_at"] = ts(st.Created), ts(st.Updated)
			items = append(items, m)
		}
		p := giteaPage(r, items)
		if len(p.items) == 0 {
			// What Gitea sends for no statuses (or a page past the end):
			// an empty document, without X-Total-Count.
			return http.StatusOK, map[string]any{"state": "", "sha": "", "total_count": 0, "statuses": nil,
				"repository": nil, "commit_url": "", "url": ""}
		}
		state := ""
		for _, it := range p.items {
			st := it.(map[string]any)["status"].(string)
			if state == "" || worse(st, state) {
				state = st
			}
		}
		doc["state"], doc["sha"], doc["total_count"] = state, sha, len(p.items)
		return http.StatusOK, pageOf{doc: doc, field: "statuses", p: p}
	case len(rest) == 3 && rest[0] == "pulls" && rest[2] == "reviews":
		n, _ := strconv.ParseInt(rest[1], 10, 64)
		t, ok := s.tickets[ticketKey(repo, n, false)]
		if !ok || !t.Pull {
			return http.StatusNotFound, "The target couldn't be found."
		}
		var items []any
		for i, rv := range t.Reviews {
			if rv.State == "PENDING" && rv.User != s.Login {
				continue
			}
			m := template("gitea/pull-review.json")
			u := m["user"].(map[string]any)
			u["login"], u["username"], u["id"] = rv.User, rv.User, giteaUserID(rv.User)
			m["id"], m["state"], m["comments_count"] = i+1, rv.State, rv.Comments
			items = append(items, m)
		}
		return http.StatusOK, giteaPage(r, items)
	case rest[0] == "issues" && len(rest) >= 2:
		n, _ := strconv.ParseInt(rest[1], 10, 64)
		t, ok := s.tickets[ticketKey(repo, n, false)]
		if !ok {
			return http.StatusNotFound, "The target couldn't be found."
		}
		if len(rest) == 3 && rest[2] == "comments" {
			// Gitea lists every comment of an issue at once (no paging).
			return http.StatusOK, page{total: -1, items: comments("gitea/comment.json", t, func(m map[string]any, _ int, who string) {
				u := m["user"].(map[string]any)
				u["login"], u["username"], u["id"] = who, who, giteaUserID(who)
			})}
		}
		m := template("gitea/issue.json")
		m["number"], m["title"], m["state"], m["body"], m["comments"] = n, t.Title, t.State, t.Body, len(t.Comments)
		m["html_url"] = fmt.Sprintf("https://gitea.example.com/%s/issues/%d", repo, n)
		if t.Pull {
			pr := template("gitea/pull-request-meta.json")
			pr["draft"], pr["merged"] = t.Draft, t.Merged
			if t.Merged {
				m["state"] = "closed"
			}
			m["pull_request"] = pr
		}
		return http.StatusOK, m
	}
	return http.StatusNotFound, "Not Found"
}

func (s *Server) gitlab(r *http.Request, segs []string) (int, any) {
	if len(segs) == 1 && segs[0] == "user" {
		u := template("gitlab/user.json")
		u["username"] = s.Login
		return http.StatusOK, u
	}
	if len(segs) < 3 || segs[0] != "projects" {
		return http.StatusNotFound, "404 Not Found"
	}
	repo := segs[1]
	if !s.repos[repo] {
		return http.StatusNotFound, "404 Project Not Found"
	}
	rest := segs[2:]
	switch {
	case len(rest) == 3 && rest[0] == "repository" && rest[1] == "commits":
		sha, code, _ := s.lookupRef(repo, rest[2])
		if code != http.StatusOK {
			return http.StatusNotFound, "404 Commit Not Found"
		}
		m := template("gitlab/commit.json")
		m["id"], m["short_id"] = sha, sha[:11]
		return http.StatusOK, m
	case len(rest) == 1 && rest[0] == "pipelines":
		sha, source := r.URL.Query().Get("sha"), r.URL.Query().Get("source")
		var items []any
		// GitLab lists the newest pipeline first, and leaves child
		// pipelines out unless source=parent_pipeline asks for them
		// (Ci::PipelinesFinder).
		ps := s.pipelines[repo+" "+sha]
		for i := len(ps) - 1; i >= 0; i-- {
			p := ps[i]
			if source == "" && p.Source == "parent_pipeline" || source != "" && p.Source != source {
				continue
			}
			ref := p.Ref
			if ref == "" {
				ref = "main"
			}
			m := template("gitlab/pipeline.json")
			m["id"], m["iid"], m["name"], m["status"], m["source"], m["sha"] = p.ID, p.ID, nullable(p.Name), p.Status, p.Source, sha
			m["ref"] = ref
			m["created_at"], m["updated_at"] = ts(p.Created), ts(p.Updated)
			m["web_url"] = fmt.Sprintf("https://gitlab.example.com/%s/-/pipelines/%d", repo, p.ID)
			items = append(items, m)
		}
		return http.StatusOK, paginate(r, items, "per_page", 20)
	case len(rest) >= 2 && (rest[0] == "issues" || rest[0] == "merge_requests"):
		mr := rest[0] == "merge_requests"
		n, _ := strconv.ParseInt(rest[1], 10, 64)
		t, ok := s.tickets[ticketKey(repo, n, mr)]
		if !ok {
			return http.StatusNotFound, "404 Not found"
		}
		if len(rest) == 3 && rest[2] == "notes" {
			return http.StatusOK, paginate(r, comments("gitlab/note.json", t, func(m map[string]any, _ int, who string) {
				m["author"].(map[string]any)["username"] = who
			}), "per_page", 20)
		}
		userNotes := 0
		for i := range t.Comments {
			if !t.System[i] {
				userNotes++
			}
		}
		var m map[string]any
		if mr {
			m = template("gitlab/merge-request.json")
			m["draft"], m["work_in_progress"] = t.Draft, t.Draft
			if t.SourceBranch != "" {
				m["source_branch"] = t.SourceBranch
			}
			m["web_url"] = fmt.Sprintf("https://gitlab.example.com/%s/-/merge_requests/%d", repo, n)
		} else {
			m = template("gitlab/issue.json")
			m["web_url"] = fmt.Sprintf("https://gitlab.example.com/%s/-/issues/%d", repo, n)
		}
		m["iid"], m["title"], m["description"], m["state"], m["user_notes_count"] = n, t.Title, t.Body, t.State, userNotes
		return http.StatusOK, m
	}
	return http.StatusNotFound, "404 Not Found"
}
