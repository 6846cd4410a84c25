// Package ticket is the watcher for kind ticket, a standing watch on one
// issue, pull request or merge request of a forge (GitHub, Gitea or
// GitLab), read through package forge.
//
// The predicate:
//
//	{
//	  "provider": "github",         github (default), gitea or gitlab
//	  "repo":     "acme/api",       owner/name (GitLab: group/…/name)
//	  "number":   7,                the issue or pull request number (1 or more)
//	  "type":     "merge_request",  GitLab only: issue (default) or merge_request
//	  "bots":     true              optional: count comments and reviews by bots too
//	}
//
// GitHub and Gitea number issues and pull requests together, so the
// number alone names either; GitLab numbers them apart, so its canonical
// form always carries type. Identity is provider, repo and number (and
// type on GitLab, and bots when true).
//
// A probe compares only what a person changes: the title, the state
// (open, closed, merged, locked), draft, a SHA-256 digest of the body,
// the count of comments written by people, and on a pull request the
// count of its reviews and review comments by people and which review
// is the newest. A comment or review by people is one not written by
// vigil's own credentials (the login of forges.PROVIDER.login, or the
// configured token's, read once from the forge: /user, or for a GitHub
// App installation token GraphQL's viewer, the app's "SLUG[bot]"; without
// a token every comment counts) nor by a bot (GitHub: a user of type Bot,
// or a comment performed via a GitHub App; GitLab: the users of access
// tokens and service accounts; Gitea: its Actions user), unless the
// predicate says "bots": true. Assignees, labels, reactions and
// updated-at are ignored. The facts of every observation are exactly
// these (title, state, draft, body_sha256, human_comments, reviews,
// review_comments, latest_review) plus type and url.
//
// With no last observation (watcher.Probe.Last) the probe answers pending
// with the facts: the silent baseline. Afterwards it answers satisfied,
// with a summary of exactly what changed ("title: \"A\" → \"B\"; 1 new
// comment"), when any compared fact differs from the last observation's,
// and pending with the same facts otherwise. The scheduler writes a
// satisfied answer as the new baseline together with its "changed"
// message, in one transaction, so a crash can neither lose nor repeat a
// change. The watch has no deadline: cancel it, or close its recipient.
//
// Reads go through the forge's shared cache: one read per ticket per
// Config.Freshness (default the kind's interval, 60 s).
package ticket

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/vigil-run/vigil"
	"github.com/vigil-run/vigil/forge"
	"github.com/vigil-run/vigil/watcher"
)

// MaxNumber bounds an issue number.
const MaxNumber = math.MaxInt32

const (
	maxTitleFact    = 1024
	maxTitleSummary = 120
	maxSummary      = 1024
)

// Config configures the ticket watcher.
type Config struct {
	// Forges are the configured providers; nil means none.
	Forges *forge.Set
	// Freshness is how old a shared forge read may be; zero means the
	// kind's default interval (Descriptor().Spec.Every).
	Freshness time.Duration
}

// Watcher answers ticket watches.
type Watcher struct {
	forges    *forge.Set
	freshness time.Duration
}

var _ watcher.Watcher = (*Watcher)(nil)

// New returns a ticket watcher.
func New(cfg Config) *Watcher {
	if cfg.Freshness <= 0 {
		spec := Descriptor().Spec
		cfg.Freshness = spec.Every
	}
	return &Watcher{forges: cfg.Forges, freshness: cfg.Freshness}
}

type input struct {
	Provider string `json:"provider,omitempty"`
	Repo     string `json:"repo"`
	Number   *int64 `json:"number"`
	Type     string `json:"type,omitempty"`
	Bots     bool   `json:"bots,omitempty"`
}

type canonical struct {
	Bots     bool   `json:"bots,omitempty"`
	Number   int64  `json:"number"`
	Provider string `json:"provider"`
	Repo     string `json:"repo"`
	Type     string `json:"type,omitempty"`
}

// Kind returns vigil.KindTicket.
func (*Watcher) Kind() vigil.Kind { return vigil.KindTicket }

func parse(raw json.RawMessage) (*canonical, forge.Provider, error) {
	var in input
	if err := watcher.Decode(raw, "", &in); err != nil {
		return nil, "", err
	}
	p, err := forge.ParseProvider(in.Provider)
	if err != nil {
		return nil, "", watcher.InvalidPredicate("provider", "%s, not %q", err, watcher.Clip(in.Provider, 40))
	}
	c := &canonical{Provider: string(p), Bots: in.Bots}
	if in.Repo == "" {
		return nil, "", watcher.InvalidPredicate("repo", "is required, as owner/name")
	}
	if c.Repo, err = forge.ParseRepo(p, in.Repo); err != nil {
		return nil, "", watcher.InvalidPredicate("repo", "%s, not %q", err, watcher.Clip(in.Repo, 80))
	}
	switch {
	case in.Number == nil:
		return nil, "", watcher.InvalidPredicate("number", "is required: the issue or pull request number")
	case *in.Number < 1 || *in.Number > MaxNumber:
		return nil, "", watcher.InvalidPredicate("number", "must be an issue or pull request number from 1 to %d, not %d", MaxNumber, *in.Number)
	}
	c.Number = *in.Number
	switch t := strings.ToLower(in.Type); {
	case p != forge.GitLab && t != "":
		return nil, "", watcher.InvalidPredicate("type", "applies to gitlab only: %s numbers issues and pull requests together", p)
	case p == forge.GitLab && (t == "" || t == forge.TypeIssue):
		c.Type = forge.TypeIssue
	case p == forge.GitLab && (t == forge.TypeMergeRequest || t == "mr"):
		c.Type = forge.TypeMergeRequest
	case p == forge.GitLab:
		return nil, "", watcher.InvalidPredicate("type", "must be issue or merge_request, not %q", watcher.Clip(in.Type, 40))
	}
	return c, p, nil
}

// Canonicalize validates the predicate. It reads no network.
func (*Watcher) Canonicalize(_ context.Context, raw json.RawMessage, _ time.Time) (watcher.Canonical, error) {
	c, _, err := parse(raw)
	if err != nil {
		return watcher.Canonical{}, err
	}
	b, err := watcher.Encode(c)
	if err != nil {
		return watcher.Canonical{}, err
	}
	return watcher.Canonical{Predicate: b}, nil
}

// Repository implements watcher.RepoNamer: the predicate's provider and
// repo, "github/acme/api".
func (*Watcher) Repository(predicate json.RawMessage) (string, error) {
	c, p, err := parse(predicate)
	if err != nil {
		return "", err
	}
	return forge.RepoPath(p, c.Repo), nil
}

// Admit refuses a watch on a provider the daemon has no URL for. It
// reads no network.
func (w *Watcher) Admit(_ context.Context, predicate json.RawMessage) error {
	_, p, err := parse(predicate)
	if err != nil {
		return err
	}
	if _, ok := w.forges.Client(p); !ok {
		return watcher.Unobservable("%s", forge.Unconfigured("ticket", p))
	}
	return nil
}

// Probe reads the ticket (through the shared cache) and compares it with
// the last observation.
func (w *Watcher) Probe(ctx context.Context, p watcher.Probe) (vigil.Observation, error) {
	if err := watcher.CheckKind(p, vigil.KindTicket); err != nil {
		return vigil.Observation{}, err
	}
	c, prov, err := parse(p.Predicate)
	if err != nil {
		return vigil.Observation{}, watcher.Permanent(fmt.Errorf("stored ticket predicate is invalid: %w", err))
	}
	client, ok := w.forges.Client(prov)
	if !ok {
		return vigil.Observation{}, watcher.Permanent(errors.New(forge.Unconfigured("ticket", prov)))
	}
	t, err := client.Ticket(ctx, forge.TicketQuery{Repo: c.Repo, Number: c.Number, Type: c.Type, Bots: c.Bots}, p.Now, w.freshness)
	if err != nil {
		if forge.IsPermanent(err) {
			return vigil.Observation{}, watcher.Permanent(err)
		}
		return vigil.Observation{}, err
	}
	now := factsOf(t)
	// Probes answered from one cached read count once toward stable.
	obs := vigil.Observation{Verdict: vigil.VerdictPending, Summary: describe(t, now), Facts: now.facts(t), Read: t.Read}
	if p.Last == nil {
		return obs, nil
	}
	last, ok := readFacts(p.Last.Facts)
	if !ok {
		return obs, nil // no baseline to compare with: this is it
	}
	if changes := diff(last, now); len(changes) > 0 {
		obs.Verdict = vigil.VerdictSatisfied
		obs.Summary = watcher.Clip(strings.Join(changes, "; "), maxSummary)
	}
	return obs, nil
}

// compared holds the facts a person changes.
type compared struct {
	title, state string
	draft        bool
	body         string
	comments     int
	// reviews, reviewComments and latestReview are unknown (false) in
	// an observation made before vigil read reviews: they are then not
	// compared.
	reviewsKnown   bool
	reviews        int
	reviewComments int
	latestReview   string
}

func factsOf(t *forge.Ticket) compared {
	return compared{title: watcher.Clip(t.Title, maxTitleFact), state: t.State, draft: t.Draft, body: t.BodySHA256, comments: t.Comments,
		reviewsKnown: true, reviews: t.Reviews, reviewComments: t.ReviewComments, latestReview: watcher.Clip(t.LatestReview, maxTitleFact)}
}

func (c compared) facts(t *forge.Ticket) map[string]any {
	return map[string]any{
		"title": c.title, "state": c.state, "draft": c.draft, "body_sha256": c.body, "human_comments": c.comments,
		"reviews": c.reviews, "review_comments": c.reviewComments, "latest_review": c.latestReview,
		"type": t.Kind, "url": t.URL,
	}
}

// readFacts reads the compared facts of a stored observation (numbers
// come back from JSON as float64); ok is false when any is missing. The
// review facts may be missing (an observation from before they were
// read): they are then unknown.
func readFacts(m map[string]any) (compared, bool) {
	var c compared
	var ok1, ok2, ok3, ok4 bool
	c.title, ok1 = m["title"].(string)
	c.state, ok2 = m["state"].(string)
	c.draft, ok3 = m["draft"].(bool)
	c.body, ok4 = m["body_sha256"].(string)
	n, ok5 := number(m["human_comments"])
	c.comments = n
	r, ok6 := number(m["reviews"])
	rc, ok7 := number(m["review_comments"])
	lr, ok8 := m["latest_review"].(string)
	if ok6 && ok7 && ok8 {
		c.reviewsKnown, c.reviews, c.reviewComments, c.latestReview = true, r, rc, lr
	}
	return c, ok1 && ok2 && ok3 && ok4 && ok5
}

func number(v any) (int, bool) {
	switch n := v.(type) {
	case int:
		return n, true
	case int64:
		return int(n), true
	case float64:
		return int(n), true
	case json.Number:
		i, err := n.Int64()
		return int(i), err == nil
	}
	return 0, false
}

// diff says what changed from a to b, in a fixed order.
func diff(a, b compared) []string {
	var out []string
	if a.title != b.title {
		out = append(out, fmt.Sprintf("title: %q → %q", watcher.Clip(a.title, maxTitleSummary), watcher.Clip(b.title, maxTitleSummary)))
	}
	if a.state != b.state {
		out = append(out, fmt.Sprintf("state: %s → %s", a.state, b.state))
	}
	if a.draft != b.draft {
		if b.draft {
			out = append(out, "marked as draft")
		} else {
			out = append(out, "marked ready for review")
		}
	}
	if a.body != b.body {
		out = append(out, "description edited")
	}
	out = appendCount(out, b.comments-a.comments, "comment")
	if !a.reviewsKnown || !b.reviewsKnown {
		return out
	}
	switch d := b.reviews - a.reviews; {
	case d > 0 && b.latestReview != "":
		s := fmt.Sprintf("1 new review (%s)", watcher.Clip(b.latestReview, maxTitleSummary))
		if d > 1 {
			s = fmt.Sprintf("%d new reviews (the newest: %s)", d, watcher.Clip(b.latestReview, maxTitleSummary))
		}
		out = append(out, s)
	case d == 0 && a.latestReview != b.latestReview:
		out = append(out, fmt.Sprintf("latest review: %s → %s", watcher.Clip(a.latestReview, maxTitleSummary), watcher.Clip(b.latestReview, maxTitleSummary)))
	default:
		out = appendCount(out, d, "review")
	}
	return appendCount(out, b.reviewComments-a.reviewComments, "review comment")
}

// appendCount says a change of a count: "1 new comment", "3 reviews
// removed".
func appendCount(out []string, d int, noun string) []string {
	switch {
	case d == 1:
		out = append(out, "1 new "+noun)
	case d > 1:
		out = append(out, fmt.Sprintf("%d new %ss", d, noun))
	case d == -1:
		out = append(out, "1 "+noun+" removed")
	case d < -1:
		out = append(out, fmt.Sprintf("%d %ss removed", -d, noun))
	}
	return out
}

// describe is the summary of an unchanged ticket: `open pull request
// (draft): "Fix the parser", 3 comments`.
func describe(t *forge.Ticket, c compared) string {
	kind := strings.ReplaceAll(t.Kind, "_", " ")
	s := c.state + " " + kind
	if c.draft {
		s += " (draft)"
	}
	comments := fmt.Sprintf("%d comments", c.comments)
	if c.comments == 1 {
		comments = "1 comment"
	}
	switch {
	case c.reviews == 1:
		comments += ", 1 review (" + watcher.Clip(c.latestReview, maxTitleSummary) + ")"
	case c.reviews > 1:
		comments += fmt.Sprintf(", %d reviews (the newest: %s)", c.reviews, watcher.Clip(c.latestReview, maxTitleSummary))
	}
	return watcher.Clip(fmt.Sprintf("%s: %q, %s", s, watcher.Clip(c.title, maxTitleSummary), comments), maxSummary)
}
