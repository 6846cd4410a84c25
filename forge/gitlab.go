package forge

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"
)

// gitlabAPI reads the GitLab REST API (v4): the pipelines of a commit,
// issues and merge requests (numbered apart: the predicate says which)
// with their notes. A project is addressed by its URL-encoded path.
type gitlabAPI struct{ c *Client }

func (g gitlabAPI) authorize(req *http.Request) {
	if g.c.token != "" {
		// A personal, project or group access token works as a bearer
		// token, and net/http drops Authorization on a redirect to
		// another host (it would not drop PRIVATE-TOKEN).
		req.Header.Set("Authorization", "Bearer "+g.c.token)
	}
}

func projectPath(repo string, more ...string) []string {
	return append([]string{"projects", repo}, more...)
}

// resolve reads the commit a ref names: the commits endpoint takes a SHA,
// a short SHA, a branch or a tag.
func (g gitlabAPI) resolve(rq request, repo, ref string) (string, error) {
	resp, err := g.c.reader.get(rq, g.c.endpoint(nil, projectPath(repo, "repository", "commits", ref)...), acceptJSON)
	if err != nil {
		return "", err
	}
	var commit struct {
		ID string `json:"id"`
	}
	if err := json.Unmarshal(resp.Body, &commit); err != nil {
		return "", g.c.badJSON(err)
	}
	return commit.ID, nil
}

type gitlabPipeline struct {
	ID        int64  `json:"id"`
	Name      string `json:"name"`
	Status    string `json:"status"`
	Source    string `json:"source"`
	Ref       string `json:"ref"`
	SHA       string `json:"sha"`
	WebURL    string `json:"web_url"`
	CreatedAt string `json:"created_at"`
	UpdatedAt string `json:"updated_at"`
}

// checks reads the pipelines of the commit. Each pipeline is a check
// named by its name (workflow:name) or "pipeline"; of several with one
// name, the newest counts (a retried or re-run pipeline supersedes the
// old one). success and skipped pass; failed, canceled and manual (a
// pipeline blocked on a manual job, which nothing will start by itself)
// fail; running runs; created, waiting_for_resource, preparing, pending
// and scheduled are queued.
func (g gitlabAPI) checks(rq request, repo, sha string) ([]Check, error) {
	var out []Check
	q := url.Values{"sha": {sha}, "per_page": {"100"}}
	truncated, err := g.c.pages(rq, g.c.endpoint(q, projectPath(repo, "pipelines")...), func(body []byte) error {
		var page []gitlabPipeline
		if err := json.Unmarshal(body, &page); err != nil {
			return g.c.badJSON(err)
		}
		for _, p := range page {
			ch := Check{Name: p.Name, Source: "pipeline", ID: p.ID, URL: p.WebURL, Result: p.Status,
				Started: parseTime(p.CreatedAt), Updated: parseTime(p.UpdatedAt)}
			if ch.Name == "" {
				ch.Name = "pipeline"
			}
			switch p.Status {
			case "success", "skipped":
				ch.State = StatePassed
			case "failed", "canceled", "canceling", "manual":
				ch.State = StateFailed
			case "running":
				ch.State = StateRunning
			default: // created, waiting_for_resource, preparing, pending, scheduled
				ch.State = StateQueued
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

type gitlabTicket struct {
	IID            int64  `json:"iid"`
	Title          string `json:"title"`
	Description    string `json:"description"`
	State          string `json:"state"`
	Draft          bool   `json:"draft"`
	UserNotesCount int    `json:"user_notes_count"`
	WebURL         string `json:"web_url"`
}

type gitlabNote struct {
	System bool `json:"system"`
	Author struct {
		Username string `json:"username"`
	} `json:"author"`
}

// ticket reads an issue or a merge request. GitLab's state "opened" is
// spelled "open", as on the other forges. Its user_notes_count already
// leaves system notes out; with a token, the notes are read to leave out
// the token's own too.
func (g gitlabAPI) ticket(rq request, repo string, number int64, typ string, self string) (*Ticket, error) {
	n := strconv.FormatInt(number, 10)
	coll := "issues"
	if typ == TypeMergeRequest {
		coll = "merge_requests"
	}
	resp, err := g.c.reader.get(rq, g.c.endpoint(nil, projectPath(repo, coll, n)...), acceptJSON)
	if err != nil {
		return nil, err
	}
	var is gitlabTicket
	if err := json.Unmarshal(resp.Body, &is); err != nil {
		return nil, g.c.badJSON(err)
	}
	t := &Ticket{Kind: TypeIssue, Title: is.Title, State: is.State, URL: is.WebURL, Comments: is.UserNotesCount,
		BodySHA256: bodyDigest(is.Description)}
	if typ == TypeMergeRequest {
		t.Kind, t.Draft = TypeMergeRequest, is.Draft
	}
	if t.State == "opened" {
		t.State = "open"
	}
	if self == "" || is.UserNotesCount == 0 {
		return t, nil
	}
	q := url.Values{"per_page": {"100"}}
	t.Comments, err = countOthers(g.c, rq, g.c.endpoint(q, projectPath(repo, coll, n, "notes")...), self, is.UserNotesCount,
		func(body []byte) ([]string, error) {
			var notes []gitlabNote
			if err := json.Unmarshal(body, &notes); err != nil {
				return nil, err
			}
			var authors []string
			for _, note := range notes {
				if !note.System {
					authors = append(authors, note.Author.Username)
				}
			}
			return authors, nil
		})
	return t, err
}

func (g gitlabAPI) self(rq request) (string, error) {
	return readLogin(g.c, rq, g.c.endpoint(nil, "user"), "username")
}
