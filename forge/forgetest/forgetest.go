// Package forgetest is a fake forge for tests: an httptest server on
// 127.0.0.1 that answers the GitHub, Gitea or GitLab API calls package
// forge makes, with the response shapes of the real APIs (the full
// documents in testdata/, filled in with the state a test sets).
//
// A test sets refs, checks and tickets, moves them as the world would
// (a push, a finished build, an edited title), counts the requests each
// path received and may answer any request itself (a rate limit, an
// outage) through Intercept. Responses carry an ETag, and a request whose
// If-None-Match matches is answered 304, as the real forges do.
package forgetest

import (
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
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
	Created, Updated     time.Time
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
	// system notes by index.
	Comments []string
	System   map[int]bool
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

	mu        sync.Mutex
	refs      map[string]string // repo + " " + ref → sha
	repos     map[string]bool
	runs      map[string][]Run // repo + " " + sha
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
	if !ok || r.Method != http.MethodGet {
		writeError(w, http.StatusNotFound, "404 page not found")
		return
	}
	if s.Token != "" && r.Header.Get("Authorization") != s.authorization() {
		writeError(w, http.StatusUnauthorized, "Bad credentials")
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
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

// page is one page of a listing: the items and the link to the next.
type page struct {
	items []any
	next  string
}

// paginate cuts items to the page the request asks for (page and
// per_page, or limit on Gitea) and links the next.
func paginate(r *http.Request, items []any, sizeParam string, def int) page {
	q := r.URL.Query()
	size, _ := strconv.Atoi(q.Get(sizeParam))
	if size <= 0 {
		size = def
	}
	n, _ := strconv.Atoi(q.Get("page"))
	n = max(n, 1)
	lo := min((n-1)*size, len(items))
	hi := min(lo+size, len(items))
	p := page{items: items[lo:hi]}
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

func (s *Server) write(w http.ResponseWriter, r *http.Request, body any) {
	var b []byte
	var next string
	switch v := body.(type) {
	case page:
		b, _ = json.Marshal(v.items)
		next = v.next
	case pageOf:
		v.doc[v.field] = v.p.items
		b, _ = json.Marshal(v.doc)
		next = v.p.next
	case rawBody:
		b = v
	default:
		b, _ = json.Marshal(v)
	}
	if next != "" {
		w.Header().Set("Link", fmt.Sprintf(`<%s>; rel="next"`, next))
	}
	if !s.NoETags {
		sum := sha256.Sum256(append([]byte(next+"\x00"), b...))
		etag := `"` + hex.EncodeToString(sum[:8]) + `"`
		w.Header().Set("ETag", etag)
		if r.Header.Get("If-None-Match") == etag {
			w.WriteHeader(http.StatusNotModified)
			return
		}
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
		u := template("github/user.json")
		u["login"] = s.Login
		return http.StatusOK, u
	}
	if len(segs) < 4 || segs[0] != "repos" {
		return http.StatusNotFound, "Not Found"
	}
	repo := segs[1] + "/" + segs[2]
	rest := segs[3:]
	switch {
	case rest[0] == "commits" && len(rest) >= 2 && rest[len(rest)-1] == "check-runs":
		sha := strings.Join(rest[1:len(rest)-1], "/")
		if _, code, msg := s.lookupRef(repo, sha); code != http.StatusOK {
			return code, msg
		}
		var items []any
		for _, run := range s.runs[repo+" "+sha] {
			m := template("github/check-run.json")
			m["id"], m["name"], m["status"], m["head_sha"] = run.ID, run.Name, run.Status, sha
			m["conclusion"] = nullable(run.Conclusion)
			m["started_at"], m["completed_at"] = ts(run.Started), ts(run.Completed)
			m["html_url"] = fmt.Sprintf("https://github.com/%s/runs/%d", repo, run.ID)
			m["details_url"] = fmt.Sprintf("https://ci.example.com/%s/%d", repo, run.ID)
			items = append(items, m)
		}
		p := paginate(r, items, "per_page", 30)
		return http.StatusOK, pageOf{doc: map[string]any{"total_count": len(items)}, field: "check_runs", p: p}
	case rest[0] == "commits" && len(rest) >= 2 && rest[len(rest)-1] == "status":
		sha := strings.Join(rest[1:len(rest)-1], "/")
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
	case rest[0] == "commits" && len(rest) >= 2:
		sha, code, msg := s.lookupRef(repo, strings.Join(rest[1:], "/"))
		if code != http.StatusOK {
			return code, msg
		}
		if r.Header.Get("Accept") == "application/vnd.github.sha" {
			return http.StatusOK, rawBody(sha)
		}
		return http.StatusOK, map[string]any{"sha": sha}
	case rest[0] == "issues" && len(rest) >= 2:
		n, _ := strconv.ParseInt(rest[1], 10, 64)
		t, ok := s.tickets[ticketKey(repo, n, false)]
		if !ok {
			return http.StatusNotFound, "Not Found"
		}
		if len(rest) == 3 && rest[2] == "comments" {
			return http.StatusOK, paginate(r, comments("github/comment.json", t, func(m map[string]any, who string) {
				m["user"].(map[string]any)["login"] = who
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

func comments(tmpl string, t Ticket, set func(m map[string]any, who string)) []any {
	items := make([]any, 0, len(t.Comments))
	for i, who := range t.Comments {
		m := template(tmpl)
		m["id"] = i + 1
		set(m, who)
		if _, ok := m["system"]; ok {
			m["system"] = t.System[i]
		}
		items = append(items, m)
	}
	return items
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
		doc := template("gitea/combined-status.json")
		tmpl := doc["statuses"].([]any)[0].(map[string]any)
		var items []any
		state := ""
		for i, st := range s.statuses[repo+" "+sha] {
			m := map[string]any{}
			for k, v := range tmpl {
				m[k] = v
			}
			m["id"], m["status"], m["context"], m["target_url"] = st.ID, st.State, st.Context, st.TargetURL
			m["created_at"], m["updated_at"] = ts(st.Created), ts(st.Updated)
			items = append(items, m)
			if i == 0 {
				state = st.State
			}
		}
		doc["state"], doc["sha"], doc["total_count"] = state, sha, len(items)
		return http.StatusOK, pageOf{doc: doc, field: "statuses", p: paginate(r, items, "limit", 30)}
	case rest[0] == "issues" && len(rest) >= 2:
		n, _ := strconv.ParseInt(rest[1], 10, 64)
		t, ok := s.tickets[ticketKey(repo, n, false)]
		if !ok {
			return http.StatusNotFound, "The target couldn't be found."
		}
		if len(rest) == 3 && rest[2] == "comments" {
			return http.StatusOK, page{items: comments("gitea/comment.json", t, func(m map[string]any, who string) {
				u := m["user"].(map[string]any)
				u["login"], u["username"] = who, who
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
		sha := r.URL.Query().Get("sha")
		var items []any
		// GitLab lists the newest pipeline first.
		ps := s.pipelines[repo+" "+sha]
		for i := len(ps) - 1; i >= 0; i-- {
			p := ps[i]
			m := template("gitlab/pipeline.json")
			m["id"], m["iid"], m["name"], m["status"], m["source"], m["sha"] = p.ID, p.ID, nullable(p.Name), p.Status, p.Source, sha
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
			return http.StatusOK, paginate(r, comments("gitlab/note.json", t, func(m map[string]any, who string) {
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
