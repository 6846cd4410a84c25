package forge

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"
)

// giteaAPI reads the Gitea (and Forgejo) API: the combined commit status
// of a commit (which Gitea Actions reports to as well), issues and pull
// requests (which share one numbering) with their comments.
type giteaAPI struct{ c *Client }

func (g giteaAPI) authorize(req *http.Request) {
	if g.c.token != "" {
		req.Header.Set("Authorization", "token "+g.c.token)
	}
}

// resolve reads the commit a ref names: Gitea's git/commits endpoint
// takes a SHA, a short SHA, a branch or a tag.
func (g giteaAPI) resolve(rq request, repo, ref string) (string, error) {
	q := url.Values{"stat": {"false"}, "verification": {"false"}, "files": {"false"}}
	resp, err := g.c.reader.get(rq, g.c.endpoint(q, repoPath(repo, "git", "commits", ref)...), acceptJSON)
	if err != nil {
		return "", err
	}
	var commit struct {
		SHA string `json:"sha"`
	}
	if err := json.Unmarshal(resp.Body, &commit); err != nil {
		return "", g.c.badJSON(err)
	}
	return commit.SHA, nil
}

type giteaCombinedStatus struct {
	State    string `json:"state"`
	SHA      string `json:"sha"`
	Statuses []struct {
		ID        int64  `json:"id"`
		Status    string `json:"status"`
		Context   string `json:"context"`
		TargetURL string `json:"target_url"`
		CreatedAt string `json:"created_at"`
		UpdatedAt string `json:"updated_at"`
	} `json:"statuses"`
	TotalCount int `json:"total_count"`
}

// giteaLimit is the page size asked of Gitea: its default
// MAX_RESPONSE_ITEMS, the most it gives by default.
const giteaLimit = 50

// checks reads the combined status: the latest status of each context.
// Gitea pages it with page and limit, newest context first, and counts
// it in X-Total-Count with no Link header (its total_count field is the
// page's length), so it is read page after page until that count. An
// empty body (what Gitea before 1.17 sent for no statuses) is no
// statuses. Gitea's states are pending, success, error, failure,
// warning and skipped; warning and skipped pass (Gitea does not block a
// merge on them), error and failure fail.
func (g giteaAPI) checks(rq request, repo, sha string) (Report, error) {
	var rep Report
	pageURL := func(page int) string {
		q := url.Values{"limit": {strconv.Itoa(giteaLimit)}, "page": {strconv.Itoa(page)}}
		return g.c.endpoint(q, repoPath(repo, "commits", sha, "status")...)
	}
	truncated, err := g.c.pagesByCount(rq, pageURL, giteaLimit, func(body []byte) (int, error) {
		if len(bytes.TrimSpace(body)) == 0 {
			return 0, nil
		}
		var page giteaCombinedStatus
		if err := json.Unmarshal(body, &page); err != nil {
			return 0, g.c.badJSON(err)
		}
		for _, s := range page.Statuses {
			ch := Check{Name: s.Context, Key: "status\x00" + s.Context, Source: SourceStatus, ID: s.ID, URL: s.TargetURL,
				Result: s.Status, Started: parseTime(s.CreatedAt), Updated: parseTime(s.UpdatedAt)}
			switch s.Status {
			case "success", "warning", "skipped":
				ch.State = StatePassed
			case "pending":
				ch.State = StateRunning
			default: // error, failure
				ch.State = StateFailed
			}
			rep.Checks = append(rep.Checks, ch)
		}
		return len(page.Statuses), nil
	})
	if err != nil {
		return rep, err
	}
	if truncated {
		return rep, g.c.tooMany()
	}
	return rep, nil
}

type giteaIssue struct {
	Number      int64  `json:"number"`
	Title       string `json:"title"`
	Body        string `json:"body"`
	State       string `json:"state"`
	Comments    int    `json:"comments"`
	HTMLURL     string `json:"html_url"`
	PullRequest *struct {
		Merged bool `json:"merged"`
		Draft  bool `json:"draft"`
	} `json:"pull_request"`
}

// giteaUser is the author of a comment or review. Gitea's (and
// Forgejo's) Actions user, id -2, is its bot; the API marks no other.
type giteaUser struct {
	ID    int64  `json:"id"`
	Login string `json:"login"`
}

func (u giteaUser) author() author {
	return author{login: u.Login, bot: u.ID == -2 || u.Login == "gitea-actions" || u.Login == "forgejo-actions"}
}

type giteaReview struct {
	User          *giteaUser `json:"user"`
	State         string     `json:"state"`
	CommentsCount int        `json:"comments_count"`
}

func (g giteaAPI) ticket(rq request, tq TicketQuery, k counter) (*Ticket, error) {
	n := strconv.FormatInt(tq.Number, 10)
	resp, err := g.c.reader.get(rq, g.c.endpoint(nil, repoPath(tq.Repo, "issues", n)...), acceptJSON)
	if err != nil {
		return nil, err
	}
	var is giteaIssue
	if err := json.Unmarshal(resp.Body, &is); err != nil {
		return nil, g.c.badJSON(err)
	}
	t := &Ticket{Kind: "issue", Title: is.Title, State: is.State, URL: is.HTMLURL, Comments: is.Comments, BodySHA256: bodyDigest(is.Body)}
	if is.PullRequest != nil {
		t.Kind = "pull_request"
		t.Draft = is.PullRequest.Draft
		if is.PullRequest.Merged {
			t.State = "merged"
		}
	}
	if is.Comments > 0 && !k.all() {
		q := url.Values{"limit": {"50"}}
		t.Comments, err = countOthers(g.c, rq, g.c.endpoint(q, repoPath(tq.Repo, "issues", n, "comments")...), k, is.Comments,
			func(body []byte) ([]author, error) {
				var cs []struct {
					User giteaUser `json:"user"`
				}
				if err := json.Unmarshal(body, &cs); err != nil {
					return nil, err
				}
				as := make([]author, len(cs))
				for i, c := range cs {
					as[i] = c.User.author()
				}
				return as, nil
			})
		if err != nil {
			return nil, err
		}
	}
	if t.Kind != "pull_request" {
		return t, nil
	}
	// Reviews page as the combined status does: page and limit, counted
	// in X-Total-Count. A review request (REQUEST_REVIEW) and a pending
	// review are no review; each review counts its comments.
	pageURL := func(page int) string {
		q := url.Values{"limit": {strconv.Itoa(giteaLimit)}, "page": {strconv.Itoa(page)}}
		return g.c.endpoint(q, repoPath(tq.Repo, "pulls", n, "reviews")...)
	}
	_, err = g.c.pagesByCount(rq, pageURL, giteaLimit, func(body []byte) (int, error) {
		var rs []giteaReview
		if err := json.Unmarshal(body, &rs); err != nil {
			return 0, g.c.badJSON(err)
		}
		for _, r := range rs {
			var a author
			if r.User != nil {
				a = r.User.author()
			}
			if r.State == "PENDING" || r.State == "REQUEST_REVIEW" || r.User == nil || k.skip(a) {
				continue
			}
			t.Reviews++
			t.ReviewComments += r.CommentsCount
			t.LatestReview = reviewWords(r.State) + " by " + a.login
		}
		return len(rs), nil
	})
	if err != nil {
		return nil, err
	}
	return t, nil
}

func (g giteaAPI) self(rq request) (string, error) {
	return readLogin(g.c, rq, g.c.endpoint(nil, "user"), "login")
}
