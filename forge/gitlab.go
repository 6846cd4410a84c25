package forge

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
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

// checks reads the pipelines of the commit, its child pipelines among
// them (GitLab lists those only when asked with source=parent_pipeline).
//
// Each pipeline is a check named by its name (workflow:name) or
// "pipeline", keyed by its ref, source and name: only a newer pipeline of
// the same key replaces an older one (a retried pipeline, a new push of
// the same commit), so a failed tag, schedule, API or trigger pipeline is
// never hidden by a later pipeline of another kind. A job retried inside
// a pipeline stays in that pipeline. Two cases are keyed apart:
//
//   - a merge request pipeline (refs/merge-requests/N/head) shares the
//     key of the push pipelines of the merge request's source branch, so
//     the newest of them counts, as GitLab's own merge request widget
//     shows the newest (its head pipeline);
//   - a child pipeline is a check of its own, keyed by its id: without
//     strategy: depend its parent passes as soon as it is created, and
//     vigil waits for it anyway.
//
// success and skipped pass; failed, canceled and canceling fail; manual
// (blocked on a manual job only a person starts) is StateManual;
// running runs; created, waiting_for_resource, preparing, pending and
// scheduled are queued.
func (g gitlabAPI) checks(rq request, repo, sha string) (Report, error) {
	var rep Report
	var ps []gitlabPipeline
	seen := make(map[int64]bool)
	for _, source := range []string{"", "parent_pipeline"} {
		q := url.Values{"sha": {sha}, "per_page": {"100"}}
		if source != "" {
			q.Set("source", source)
		}
		truncated, err := g.c.pages(rq, g.c.endpoint(q, projectPath(repo, "pipelines")...), func(body []byte) error {
			var page []gitlabPipeline
			if err := json.Unmarshal(body, &page); err != nil {
				return g.c.badJSON(err)
			}
			for _, p := range page {
				if !seen[p.ID] {
					seen[p.ID] = true
					ps = append(ps, p)
				}
			}
			return nil
		})
		if err != nil {
			return rep, err
		}
		if truncated {
			return rep, g.c.tooMany()
		}
	}
	branches := make(map[string]string) // merge request iid → its source branch
	for _, p := range ps {
		if iid, ok := mergeRequestRef(p.Ref); ok && p.Source == "merge_request_event" {
			if _, done := branches[iid]; done {
				continue
			}
			b, err := g.sourceBranch(rq, repo, iid)
			if err != nil {
				return rep, err
			}
			branches[iid] = b
		}
	}
	for _, p := range ps {
		ch := Check{Name: p.Name, Source: SourcePipeline, ID: p.ID, URL: p.WebURL, Result: p.Status,
			Started: parseTime(p.CreatedAt), Updated: parseTime(p.UpdatedAt)}
		if ch.Name == "" {
			ch.Name = "pipeline"
		}
		iid, isMR := mergeRequestRef(p.Ref)
		switch {
		case p.Source == "parent_pipeline":
			ch.Group = fmt.Sprintf("child pipeline #%d", p.ID)
			ch.Key = fmt.Sprintf("pipeline\x00child\x00%d", p.ID)
		case p.Source == "merge_request_event" && isMR:
			ch.Group = "merge request !" + iid
			ch.Key = "pipeline\x00mr\x00" + iid + "\x00" + ch.Name
			if b := branches[iid]; b != "" {
				ch.Key = "pipeline\x00branch\x00" + b + "\x00" + ch.Name
			}
		case p.Source == "push":
			ch.Group = "push on " + p.Ref
			ch.Key = "pipeline\x00branch\x00" + p.Ref + "\x00" + ch.Name
		default:
			ch.Group = p.Source + " on " + p.Ref
			ch.Key = "pipeline\x00" + p.Source + "\x00" + p.Ref + "\x00" + ch.Name
		}
		switch p.Status {
		case "success", "skipped":
			ch.State = StatePassed
		case "failed", "canceled", "canceling":
			ch.State = StateFailed
		case "manual":
			ch.State = StateManual
		case "running":
			ch.State = StateRunning
		default: // created, waiting_for_resource, preparing, pending, scheduled
			ch.State = StateQueued
		}
		rep.Checks = append(rep.Checks, ch)
	}
	return rep, nil
}

// mergeRequestRef reads the iid of a merge request pipeline's ref,
// refs/merge-requests/IID/head (or /merge, /train).
func mergeRequestRef(ref string) (string, bool) {
	rest, ok := strings.CutPrefix(ref, "refs/merge-requests/")
	if !ok {
		return "", false
	}
	iid, _, _ := strings.Cut(rest, "/")
	if _, err := strconv.ParseInt(iid, 10, 64); err != nil {
		return "", false
	}
	return iid, true
}

// sourceBranch reads the source branch of merge request iid; "" when the
// token may not read it (its pipelines then stay a check of their own).
func (g gitlabAPI) sourceBranch(rq request, repo, iid string) (string, error) {
	resp, err := g.c.reader.get(rq, g.c.endpoint(nil, projectPath(repo, "merge_requests", iid)...), acceptJSON)
	var fe *Error
	if errors.As(err, &fe) && (fe.Kind == KindForbidden || fe.Kind == KindNotFound) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	var mr struct {
		SourceBranch string `json:"source_branch"`
	}
	if err := json.Unmarshal(resp.Body, &mr); err != nil {
		return "", g.c.badJSON(err)
	}
	return mr.SourceBranch, nil
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
		Bot      bool   `json:"bot"`
	} `json:"author"`
}

// gitlabBot matches the users GitLab makes for project and group access
// tokens (project_42_bot_3f2a…, group_7_bot1) and service accounts: the
// bots a note's author object, which carries no "bot" field, can be
// told by.
var gitlabBot = regexp.MustCompile(`^(?:(?:project|group)_\d+_bot(?:_?[0-9a-z]+)?|service_account_.+)$`)

// ticket reads an issue or a merge request. GitLab's state "opened" is
// spelled "open", as on the other forges. Its user_notes_count already
// leaves system notes out; the notes are read to leave out the token's
// own and the bots' too.
func (g gitlabAPI) ticket(rq request, tq TicketQuery, k counter) (*Ticket, error) {
	n := strconv.FormatInt(tq.Number, 10)
	coll := "issues"
	if tq.Type == TypeMergeRequest {
		coll = "merge_requests"
	}
	resp, err := g.c.reader.get(rq, g.c.endpoint(nil, projectPath(tq.Repo, coll, n)...), acceptJSON)
	if err != nil {
		return nil, err
	}
	var is gitlabTicket
	if err := json.Unmarshal(resp.Body, &is); err != nil {
		return nil, g.c.badJSON(err)
	}
	t := &Ticket{Kind: TypeIssue, Title: is.Title, State: is.State, URL: is.WebURL, Comments: is.UserNotesCount,
		BodySHA256: bodyDigest(is.Description)}
	if tq.Type == TypeMergeRequest {
		t.Kind, t.Draft = TypeMergeRequest, is.Draft
	}
	if t.State == "opened" {
		t.State = "open"
	}
	if is.UserNotesCount == 0 || k.all() {
		return t, nil
	}
	q := url.Values{"per_page": {"100"}}
	t.Comments, err = countOthers(g.c, rq, g.c.endpoint(q, projectPath(tq.Repo, coll, n, "notes")...), k, is.UserNotesCount,
		func(body []byte) ([]author, error) {
			var notes []gitlabNote
			if err := json.Unmarshal(body, &notes); err != nil {
				return nil, err
			}
			var authors []author
			for _, note := range notes {
				if !note.System {
					u := note.Author.Username
					authors = append(authors, author{login: u, bot: note.Author.Bot || gitlabBot.MatchString(strings.ToLower(u))})
				}
			}
			return authors, nil
		})
	return t, err
}

func (g gitlabAPI) self(rq request) (string, error) {
	return readLogin(g.c, rq, g.c.endpoint(nil, "user"), "username")
}
