package forge

import (
	"encoding/json"
	"net/http"
	"net/url"
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

type githubCheckRuns struct {
	TotalCount int `json:"total_count"`
	CheckRuns  []struct {
		ID          int64   `json:"id"`
		Name        string  `json:"name"`
		Status      string  `json:"status"`
		Conclusion  *string `json:"conclusion"`
		HTMLURL     string  `json:"html_url"`
		DetailsURL  string  `json:"details_url"`
		StartedAt   string  `json:"started_at"`
		CompletedAt string  `json:"completed_at"`
	} `json:"check_runs"`
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

// checks reads both of GitHub's CI sources: the check runs (GitHub Actions
// and other apps; the latest run of each name) and the combined commit
// status (the latest status of each context). The combined status's own
// "state" is ignored: with no statuses at all GitHub says "pending".
func (g githubAPI) checks(rq request, repo, sha string) ([]Check, error) {
	var out []Check
	q := url.Values{"per_page": {"100"}, "filter": {"latest"}}
	truncated, err := g.c.pages(rq, g.c.endpoint(q, repoPath(repo, "commits", sha, "check-runs")...), func(body []byte) error {
		var page githubCheckRuns
		if err := json.Unmarshal(body, &page); err != nil {
			return g.c.badJSON(err)
		}
		for _, r := range page.CheckRuns {
			ch := Check{Name: r.Name, Source: "check_run", ID: r.ID, URL: r.HTMLURL,
				Started: parseTime(r.StartedAt), Updated: parseTime(r.StartedAt)}
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
				if t := parseTime(r.CompletedAt); !t.IsZero() {
					ch.Updated = t
				}
			case "in_progress":
				ch.State, ch.Result = StateRunning, r.Status
			default: // queued, waiting, requested, pending
				ch.State, ch.Result = StateQueued, r.Status
			}
			out = append(out, ch)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if truncated {
		return nil, g.c.tooMany()
	}
	q = url.Values{"per_page": {"100"}}
	truncated, err = g.c.pages(rq, g.c.endpoint(q, repoPath(repo, "commits", sha, "status")...), func(body []byte) error {
		var page githubCombinedStatus
		if err := json.Unmarshal(body, &page); err != nil {
			return g.c.badJSON(err)
		}
		for _, s := range page.Statuses {
			ch := Check{Name: s.Context, Source: "status", ID: s.ID, URL: s.TargetURL, Result: s.State,
				Started: parseTime(s.CreatedAt), Updated: parseTime(s.UpdatedAt)}
			switch s.State {
			case "success":
				ch.State = StatePassed
			case "pending":
				ch.State = StateRunning
			default: // failure, error
				ch.State = StateFailed
			}
			out = append(out, ch)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if truncated {
		return nil, g.c.tooMany()
	}
	return out, nil
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

type userComment struct {
	User struct {
		Login string `json:"login"`
	} `json:"user"`
}

// ticket reads an issue or pull request through the issues API, which
// serves both (a pull request carries "pull_request" and "draft").
func (g githubAPI) ticket(rq request, repo string, number int64, _ string, self string) (*Ticket, error) {
	n := strconv.FormatInt(number, 10)
	resp, err := g.c.reader.get(rq, g.c.endpoint(nil, repoPath(repo, "issues", n)...), acceptJSON)
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
	if self == "" || is.Comments == 0 {
		return t, nil
	}
	q := url.Values{"per_page": {"100"}}
	t.Comments, err = countOthers(g.c, rq, g.c.endpoint(q, repoPath(repo, "issues", n, "comments")...), self, is.Comments,
		func(body []byte) ([]string, error) {
			var cs []userComment
			if err := json.Unmarshal(body, &cs); err != nil {
				return nil, err
			}
			logins := make([]string, len(cs))
			for i, c := range cs {
				logins[i] = c.User.Login
			}
			return logins, nil
		})
	return t, err
}

// countOthers counts the comments of a listing not written by self. authors
// reads one page's comment authors. Past MaxPages the count is the total
// the forge gave less the comments by self seen so far.
func countOthers(c *Client, rq request, first, self string, total int, authors func([]byte) ([]string, error)) (int, error) {
	others, mine := 0, 0
	truncated, err := c.pages(rq, first, func(body []byte) error {
		logins, err := authors(body)
		if err != nil {
			return c.badJSON(err)
		}
		for _, l := range logins {
			if strings.EqualFold(l, self) {
				mine++
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
		return max(total-mine, others), nil
	}
	return others, nil
}

func (g githubAPI) self(rq request) (string, error) {
	return readLogin(g.c, rq, g.c.endpoint(nil, "user"), "login")
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
