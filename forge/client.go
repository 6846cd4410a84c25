package forge

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

// State is a check's state, the same words for every provider.
type State string

// The states of a check. Queued and Running are not finished; Passed
// covers success, neutral and skipped; Manual is a check blocked on a
// job only a person starts (GitLab's manual), which will not go on by
// itself; Failed covers every other finish.
const (
	StateQueued  State = "queued"
	StateRunning State = "running"
	StatePassed  State = "passed"
	StateFailed  State = "failed"
	StateManual  State = "manual"
)

// Done reports whether the check has finished, or will not go on by
// itself.
func (s State) Done() bool { return s == StatePassed || s == StateFailed || s == StateManual }

// The sources of a check.
const (
	SourceCheckRun   = "check_run"   // a GitHub check run
	SourceCheckSuite = "check_suite" // a GitHub check suite with no run to stand for it
	SourceStatus     = "status"      // a commit status (GitHub, Gitea)
	SourcePipeline   = "pipeline"    // a GitLab pipeline
)

// Check is one check of a commit: a GitHub check run, check suite or
// commit status, a Gitea commit status, a GitLab pipeline.
type Check struct {
	Name string
	// Group says where the check comes from, for when its name alone
	// does not tell it from another: the workflow or app of a GitHub
	// check run, "commit status", a GitLab pipeline's source and ref.
	Group string
	// Key identifies the check: of several checks with one key only the
	// newest counts (see Merge). Checks of one name under different
	// keys are different checks, each of which must pass.
	Key   string
	State State
	// Result is the forge's own word: "in_progress", "success",
	// "timed_out", "pending", "canceled", …
	Result string
	URL    string
	// Started orders checks of one key: the newest counts.
	Started time.Time
	// Updated is the check's last sign of life, for stall detection and
	// for when it finished; zero when the forge gives none.
	Updated time.Time
	// Source is one of SourceCheckRun, SourceCheckSuite, SourceStatus
	// and SourcePipeline.
	Source string
	// ID breaks ties between checks of one key started at once.
	ID int64
}

// Merge keeps one check per Key (per Name when the key is empty), the
// newest (by Started, then ID), and returns them sorted by name, group
// and key. A re-run of a check, or a newer run of the same workflow,
// replaces the older; two workflows with a job of one name, or a check
// run and a commit status of one name, stay two checks.
func Merge(cs []Check) []Check {
	byKey := make(map[string]Check, len(cs))
	for _, c := range cs {
		k := c.Key
		if k == "" {
			k = c.Name
		}
		old, ok := byKey[k]
		if !ok || c.Started.After(old.Started) || c.Started.Equal(old.Started) && c.ID >= old.ID {
			byKey[k] = c
		}
	}
	out := make([]Check, 0, len(byKey))
	for _, c := range byKey {
		out = append(out, c)
	}
	slices.SortFunc(out, func(a, b Check) int {
		if c := strings.Compare(a.Name, b.Name); c != 0 {
			return c
		}
		if c := strings.Compare(a.Group, b.Group); c != 0 {
			return c
		}
		return strings.Compare(a.Key, b.Key)
	})
	return out
}

// Report is what a forge shows about the CI of one commit.
type Report struct {
	Provider Provider
	// Checks are the commit's checks, merged (see Merge).
	Checks []Check
	// Ignored names the apps (by slug) whose queued GitHub check suites
	// are not waited for: they hold no check run, and the app has added
	// no check run to this commit, as an app does that opens a suite on
	// every push and never runs in it.
	Ignored []string
	// Read is when the newest of the forge's answers the report was made
	// from was read from the forge (fetched, or confirmed by a 304), in
	// the callers' time: a report answered from the cache has the Read
	// of the one it repeats, and one made of a new read a later Read.
	Read time.Time
}

// Ticket is what a person can change about an issue, pull request or
// merge request.
type Ticket struct {
	// Kind is "issue", "pull_request" or "merge_request".
	Kind  string
	Title string
	// State is "open", "closed", "merged" or "locked".
	State string
	Draft bool
	// BodySHA256 is the hex SHA-256 of the description.
	BodySHA256 string
	// Comments counts the comments written by people: not by the token's
	// own login (when it is known) nor, unless TicketQuery.Bots, by a bot.
	// GitLab system notes are never counted.
	Comments int
	// Reviews counts a pull request's reviews by people, as Comments
	// does (a pending review, and on Gitea a review request, is none);
	// ReviewComments the comments on lines of the diff they hold; and
	// LatestReview says the newest, "changes requested by ada". Zero on
	// GitLab, whose notes hold its review comments.
	Reviews        int
	ReviewComments int
	LatestReview   string
	URL            string
	// Read is when the newest of the forge's answers the ticket was made
	// from was read from the forge, as Report.Read.
	Read time.Time
}

// TicketQuery names a ticket to read and what counts about it.
type TicketQuery struct {
	Repo   string
	Number int64
	// Type is TypeIssue or TypeMergeRequest on GitLab and "" elsewhere.
	Type string
	// Bots counts the comments and reviews of bots too.
	Bots bool
}

// author is who wrote a comment or a review.
type author struct {
	login string
	bot   bool
}

// counter decides which comments and reviews count: not the token's own
// (self, when known), and not a bot's unless bots.
type counter struct {
	self string
	bots bool
}

func (k counter) skip(a author) bool {
	return k.self != "" && strings.EqualFold(a.login, k.self) || !k.bots && a.bot
}

// all reports whether every comment counts, so that a forge's own count
// of them is the answer and they need not be read.
func (k counter) all() bool { return k.self == "" && k.bots }

// reviewWords says a review state in words: GitHub's and Gitea's.
func reviewWords(state string) string {
	switch state {
	case "APPROVED":
		return "approved"
	case "CHANGES_REQUESTED", "REQUEST_CHANGES":
		return "changes requested"
	case "COMMENTED", "COMMENT":
		return "commented"
	case "DISMISSED":
		return "dismissed"
	}
	return strings.ToLower(state)
}

func bodyDigest(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:])
}

// Ticket types of GitLab, where issues and merge requests are numbered
// apart. GitHub and Gitea number them together and take none.
const (
	TypeIssue        = "issue"
	TypeMergeRequest = "merge_request"
)

var (
	fullSHA = regexp.MustCompile(`^(?:[0-9a-f]{40}|[0-9a-f]{64})$`)
	segment = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,100}$`)
)

// IsFullSHA reports whether s is a full commit SHA: 40 (or, for SHA-256
// repositories, 64) lowercase hex digits.
func IsFullSHA(s string) bool { return fullSHA.MatchString(s) }

// ParseRepo checks a repository name and returns its canonical spelling,
// lowercased (every provider looks names up without regard to case).
// GitHub and Gitea take owner/name; GitLab also takes nested groups,
// group/subgroup/name.
func ParseRepo(p Provider, s string) (string, error) {
	parts := strings.Split(s, "/")
	max := 2
	if p == GitLab {
		max = 20
	}
	if len(parts) < 2 || len(parts) > max {
		if p == GitLab {
			return "", errors.New("must be group/name (or group/subgroup/name)")
		}
		return "", errors.New("must be owner/name")
	}
	for _, seg := range parts {
		if !segment.MatchString(seg) || seg == "." || seg == ".." || strings.HasPrefix(seg, ".") && p != GitLab {
			if p == GitLab {
				return "", errors.New("must be group/name: letters, digits, . _ and - between the slashes")
			}
			return "", errors.New("must be owner/name: letters, digits, . _ and - on each side of the slash")
		}
	}
	return strings.ToLower(s), nil
}

// ValidRef checks a branch, tag or short SHA given for resolving.
func ValidRef(s string) error {
	switch {
	case s == "":
		return errors.New("is required")
	case len(s) > 255:
		return errors.New("is longer than 255 bytes")
	case strings.HasPrefix(s, "-") || strings.HasPrefix(s, "/") || strings.HasSuffix(s, "/") ||
		strings.Contains(s, "..") || strings.Contains(s, "//") || strings.Contains(s, "@{"):
		return errors.New("is not a valid branch, tag or commit name")
	}
	for _, c := range s {
		if c <= ' ' || c == 0x7f || strings.ContainsRune("~^:?*[\\", c) {
			return errors.New("is not a valid branch, tag or commit name")
		}
	}
	return nil
}

// ResolveRef resolves a branch, tag or short SHA of repo to the full
// SHA of the commit it names now. It reads past the cache: a branch moves.
// A ref the forge does not know is an error for which IsNotFound holds.
func (c *Client) ResolveRef(ctx context.Context, repo, ref string, now time.Time) (string, error) {
	rq := request{ctx: ctx, now: now, maxAge: 0}
	sha, err := c.api.resolve(rq, repo, ref)
	if err != nil {
		return "", c.describe(err, fmt.Sprintf("%q in %s", ref, repo), repo)
	}
	sha = strings.ToLower(strings.TrimSpace(sha))
	if !IsFullSHA(sha) {
		return "", &Error{Provider: c.provider, Kind: KindUnavailable,
			msg: fmt.Sprintf("%s answered %.50q for the commit of %q in %s, which is not a commit SHA", c.provider, sha, ref, repo)}
	}
	return sha, nil
}

// Checks returns what the forge shows of the CI of commit sha in repo:
// its checks, one per key (see Merge), and on GitHub the check suites
// it does not wait for. now is the caller's time and maxAge how old a
// cached read may be. Zero checks is a valid answer: nothing has
// reported yet. A commit GitHub does not know (yet) is an error for
// which IsNoCommit holds.
func (c *Client) Checks(ctx context.Context, repo, sha string, now time.Time, maxAge time.Duration) (Report, error) {
	var read time.Time
	r, err := c.api.checks(request{ctx: ctx, now: now, maxAge: maxAge, read: &read}, repo, sha)
	if err != nil {
		return Report{}, c.describe(err, fmt.Sprintf("the checks of %s@%s", repo, short(sha)), repo)
	}
	r.Provider = c.provider
	r.Read = read
	r.Checks = Merge(r.Checks)
	slices.Sort(r.Ignored)
	r.Ignored = slices.Compact(r.Ignored)
	return r, nil
}

// Ticket returns an issue, pull request or merge request, with the
// comments and reviews of people counted (see Ticket).
func (c *Client) Ticket(ctx context.Context, q TicketQuery, now time.Time, maxAge time.Duration) (*Ticket, error) {
	rq := request{ctx: ctx, now: now, maxAge: maxAge}
	what := fmt.Sprintf("%s#%d", q.Repo, q.Number)
	if q.Type == TypeMergeRequest {
		what = fmt.Sprintf("%s!%d", q.Repo, q.Number)
	}
	self, err := c.login(rq)
	if err != nil {
		return nil, c.describe(err, "the token's own user", q.Repo)
	}
	var read time.Time
	trq := rq
	trq.read = &read
	t, err := c.api.ticket(trq, q, counter{self: self, bots: q.Bots})
	if err != nil {
		return nil, c.describe(err, what, q.Repo)
	}
	t.Read = read
	return t, nil
}

// login returns the login vigil's own comments are written as: the
// configured one, else the token's, read once; "" without a token, or
// when the forge will not say.
func (c *Client) login(rq request) (string, error) {
	c.mu.Lock()
	if c.self != nil {
		s := *c.self
		c.mu.Unlock()
		return s, nil
	}
	c.mu.Unlock()
	if c.token == "" {
		return "", nil
	}
	s, err := c.api.self(rq)
	var fe *Error
	if errors.As(err, &fe) && (fe.Kind == KindForbidden || fe.Kind == KindNotFound) {
		s, err = "", nil
	}
	if err != nil {
		return "", err
	}
	c.mu.Lock()
	c.self = &s
	c.mu.Unlock()
	return s, nil
}

// describe turns a reader error into the sentence a person reads: what
// was read, and for a permanent error, what to fix.
func (c *Client) describe(err error, what, repo string) error {
	var fe *Error
	if !errors.As(err, &fe) {
		return err // the caller's context ended
	}
	out := *fe
	p := c.provider
	detail := ""
	if fe.Detail != "" {
		detail = ": " + fe.Detail
	}
	switch fe.Kind {
	case KindNotFound:
		out.msg = fmt.Sprintf("%s: %s not found (HTTP %d%s): check the repository, or, if it is private, set %s to a token that can read it",
			p, what, fe.Status, detail, TokenSetting(p))
	case KindUnauthorized:
		switch {
		case c.token == "" && c.base.User != nil:
			// A proxy in front of the forge that wants basic auth refuses
			// the URL's credentials with 401 as the forge refuses a
			// request without a token: either may be what is wrong.
			out.msg = fmt.Sprintf("%s refused the credentials in its URL reading %s (HTTP 401%s): check the user and password in %s, or, if the forge itself wants a token, set %s",
				p, what, detail, URLSetting(p), TokenSetting(p))
		case c.base.User != nil:
			out.msg = fmt.Sprintf("%s refused the configured token or the credentials in its URL reading %s (HTTP 401%s): check the token in %s and the user and password in %s",
				p, what, detail, TokenSetting(p), URLSetting(p))
		case c.token == "":
			out.msg = fmt.Sprintf("%s wants a token to read %s (HTTP 401%s): set %s", p, what, detail, TokenSetting(p))
		default:
			out.msg = fmt.Sprintf("%s rejected the configured token reading %s (HTTP 401%s): set a valid token in %s", p, what, detail, TokenSetting(p))
		}
	case KindForbidden:
		out.msg = fmt.Sprintf("%s refused to show %s (HTTP 403%s): give the token in %s read access to %s", p, what, detail, TokenSetting(p), repo)
	case KindNoCommit:
		out.msg = fmt.Sprintf("%s: %s: no such commit in %s (HTTP %d%s)", p, what, repo, fe.Status, detail)
	case KindRateLimited:
		out.msg = fmt.Sprintf("%s rate limit reached; reads resume at %s", p, formatTime(fe.Until))
	default:
		if fe.msg != "" {
			out.msg = fe.msg
		} else {
			out.msg = fmt.Sprintf("%s: reading %s: %s", p, what, fe.Detail)
		}
	}
	out.msg = c.redact(out.msg)
	return &out
}

// pages reads a listing page by page, handing each body to each; it
// follows rel="next" links to the configured host only, with the
// credentials of the configured URL (see withCredentials), and after a
// full page a 304 confirmed, the next page (see pageAfter); it reports
// truncated when MaxPages did not reach the end.
func (c *Client) pages(rq request, first string, each func(body []byte) error) (truncated bool, err error) {
	u := first
	for range MaxPages {
		resp, err := c.reader.get(rq, u, acceptJSON)
		if err != nil {
			return false, err
		}
		if err := each(resp.Body); err != nil {
			return false, err
		}
		next := resp.Next
		if next == "" && resp.revalidated {
			next = pageAfter(u, resp.Body)
		}
		if next == "" {
			return false, nil
		}
		if !c.sameHost(next) {
			// Never the end of the listing: judging its first pages
			// could call a commit green that is not.
			return false, &Error{Provider: c.provider, Kind: KindUnavailable,
				Detail: fmt.Sprintf("the next page of a listing is on another host than %s, and the token is not sent there: set %s to the URL the forge's own links name",
					c.base.Host, URLSetting(c.provider))}
		}
		u = c.withCredentials(next)
	}
	return true, nil
}

// pageAfter returns the URL of the page after u when its body, confirmed
// by a 304, is a full page (as many items as u's per_page asks): GitHub's
// ETag is of the page's items alone and its 304 has no Link header, so a
// full last page stays 304 when a page appears after it (a 101st
// comment), and only reading that page tells. "" when the page is not
// full, or u does not page by page and per_page.
func pageAfter(u string, body []byte) string {
	pu, err := url.Parse(u)
	if err != nil {
		return ""
	}
	q := pu.Query()
	per, err := strconv.Atoi(q.Get("per_page"))
	if err != nil || per <= 0 || pageItems(body) < per {
		return ""
	}
	page := 1
	if p := q.Get("page"); p != "" {
		if page, err = strconv.Atoi(p); err != nil || page < 1 {
			return ""
		}
	}
	q.Set("page", strconv.Itoa(page+1))
	pu.RawQuery = q.Encode()
	return pu.String()
}

// pageItems counts the items of a listing's page: a JSON array, or the
// longest array of an envelope ({"total_count": …, "check_runs": […]}).
func pageItems(body []byte) int {
	var items []json.RawMessage
	if json.Unmarshal(body, &items) == nil {
		return len(items)
	}
	var doc map[string]json.RawMessage
	if json.Unmarshal(body, &doc) != nil {
		return 0
	}
	most := 0
	for _, v := range doc {
		if json.Unmarshal(v, &items) == nil && len(items) > most {
			most = len(items)
		}
	}
	return most
}

// pagesByCount reads a listing that pages by number (page and limit) and
// counts in X-Total-Count without a Link header, as Gitea does: each
// reads one page's body and returns how many items it held. It stops at
// an empty page, once X-Total-Count items are read, or, without that
// header, at a page shorter than limit; it reports truncated when
// MaxPages did not reach the end.
func (c *Client) pagesByCount(rq request, pageURL func(page int) string, limit int, each func(body []byte) (int, error)) (truncated bool, err error) {
	seen := 0
	for page := 1; page <= MaxPages; page++ {
		resp, err := c.reader.get(rq, pageURL(page), acceptJSON)
		if err != nil {
			return false, err
		}
		n, err := each(resp.Body)
		if err != nil {
			return false, err
		}
		seen += n
		switch {
		case n == 0:
			return false, nil
		case resp.Total >= 0 && seen >= resp.Total:
			return false, nil
		case resp.Total < 0 && n < limit:
			return false, nil
		}
	}
	return true, nil
}

// tooMany is the error of a check listing longer than MaxPages: judging
// part of the checks could call a commit green that is not.
func (c *Client) tooMany() error {
	return &Error{Provider: c.provider, Kind: KindUnavailable, Detail: fmt.Sprintf("more than %d pages of checks; vigil does not judge part of them", MaxPages)}
}

func short(sha string) string {
	if len(sha) > 7 {
		return sha[:7]
	}
	return sha
}

const acceptJSON = "application/json"

// badJSON is the error of a body that is not what the API documents.
func (c *Client) badJSON(err error) error {
	return &Error{Provider: c.provider, Kind: KindUnavailable, Detail: "the answer is not the JSON the API documents: " + c.redact(err.Error())}
}

// parseTime reads an API timestamp; zero when absent or unreadable.
func parseTime(s string) time.Time {
	if s == "" {
		return time.Time{}
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}
	}
	return t.UTC()
}
