// Package ci is the watcher for kind ci: CI on one commit of a forge
// repository (GitHub, Gitea or GitLab), read through package forge.
//
// The predicate:
//
//	{
//	  "provider": "github",              github (default), gitea or gitlab
//	  "repo":     "acme/api",            owner/name (GitLab: group/…/name)
//	  "sha":      "main",                a full SHA, or a branch, tag or short SHA
//	  "checks":   ["build", "test"],     optional: the checks that decide
//	  "stall":    "30m"                  optional: when a waiting check is a ghost
//	}
//
// The watch keys on an immutable commit. A branch, tag or short SHA is
// resolved to the full SHA once, at registration (the only network read
// Canonicalize makes, bounded by ResolveTimeout); the SHA is what is
// stored, hashed into identity and shown, so a later push to the branch
// does not change the watch's answer. The canonical form is lowercase
// (provider, repo, sha), with checks sorted and deduplicated and stall
// always present.
//
// The checks of the commit are (see package forge): GitHub's check runs,
// one per app, workflow (and event) and name, its commit statuses apart
// from them, and its check suites where no run stands for them; Gitea's
// combined status; GitLab's pipelines, one per ref, source and name, and
// its child pipelines. A probe answers:
//
//   - no check at all: pending, "no checks have appeared yet" (the window
//     right after a push legitimately has none; it is never success);
//   - a commit GitHub does not know (422 "No commit found for SHA"):
//     pending, saying so, until UnknownCommitBound after the watch was
//     registered; then errored: the commit never arrived;
//   - any deciding check queued or running (a GitHub check suite still to
//     run included): pending;
//   - every deciding check finished, any of them failed, cancelled, timed
//     out or waiting for an action: failed, naming each failed check and
//     its URL; a GitLab pipeline blocked on a manual job fails too, said
//     apart as waiting for a manual job, never as a test failure;
//   - every deciding check finished and passed (success, neutral,
//     skipped), and every named check has appeared: satisfied;
//   - a named check that has not appeared keeps the watch pending; once
//     every other check has finished, for MissingGrace, then it fails,
//     naming the checks that do exist (and on GitHub explaining a name
//     copied from the web page, "CI / build (push)", where a check run is
//     named "build").
//
// Two checks of one name (two workflows with a job "test", a check run
// and a commit status) are both shown with where they come from:
// "test [CI]". Queued GitHub check suites that are not waited for (their
// app has added no check run to the commit) are named in the summary and
// in the facts (ignored_suites).
//
// Without "checks" every check decides; with it only the named ones do
// (as a forge's required checks do), every check of a named name, and
// the others are counted in the facts but never fail or hold the watch.
//
// A deciding check queued or running with no update for longer than
// stall (default 30 min) is a ghost: it is named in the observation's
// summary and facts, so "vigil why" says which runner never came. It does
// not change the verdict. A check with no update time (a GitHub check run
// in progress: forge.Check.Updated zero) is never one.
//
// Reads go through the forge's shared cache: one read per commit per
// Config.Freshness (default the kind's interval, 30 s), however many
// watches ask. Probes answered from one read carry its time
// (vigil.Observation.Read), so a watch probed more often than that
// counts the read once toward stable. A network error, a 5xx or a rate limit is unavailable,
// never failure; a repository that is not there or a token the forge
// rejects settles the watch errored, with a sentence saying what to fix.
package ci

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/vigil-run/vigil"
	"github.com/vigil-run/vigil/forge"
	"github.com/vigil-run/vigil/watcher"
)

// Defaults and bounds of a ci predicate.
const (
	DefaultStall   = 30 * time.Minute
	MaxStall       = 7 * 24 * time.Hour
	MaxChecks      = 50
	MaxCheckName   = 200
	ResolveTimeout = 10 * time.Second
	// UnknownCommitBound is how long a commit GitHub does not know keeps
	// a watch pending after it was registered: time for a push to land.
	UnknownCommitBound = 10 * time.Minute
	// maxListed bounds the names a summary lists per state.
	maxListed = 3
	// maxFailedListed bounds the failed checks a summary names with URLs.
	maxFailedListed = 5
	// maxFactChecks bounds the checks listed in the facts.
	maxFactChecks = 50
	maxSummary    = 1024
)

// Config configures the ci watcher.
type Config struct {
	// Forges are the configured providers; nil means none.
	Forges *forge.Set
	// Freshness is how old a shared forge read may be; zero means the
	// kind's default interval (Descriptor().Spec.Every).
	Freshness time.Duration
}

// Watcher answers ci watches.
type Watcher struct {
	forges    *forge.Set
	freshness time.Duration
}

var _ watcher.Watcher = (*Watcher)(nil)

// New returns a ci watcher.
func New(cfg Config) *Watcher {
	if cfg.Freshness <= 0 {
		spec := Descriptor().Spec
		cfg.Freshness = spec.Every
	}
	return &Watcher{forges: cfg.Forges, freshness: cfg.Freshness}
}

type input struct {
	Provider string   `json:"provider,omitempty"`
	Repo     string   `json:"repo"`
	SHA      string   `json:"sha"`
	Checks   []string `json:"checks,omitempty"`
	Stall    string   `json:"stall,omitempty"`
}

type canonical struct {
	Checks   []string `json:"checks,omitempty"`
	Provider string   `json:"provider"`
	Repo     string   `json:"repo"`
	SHA      string   `json:"sha"`
	Stall    string   `json:"stall"`
}

type spec struct {
	provider forge.Provider
	repo     string
	sha      string // a full SHA, or (before resolving) a ref
	checks   []string
	stall    time.Duration
}

func (s *spec) canonical() canonical {
	return canonical{Checks: s.checks, Provider: string(s.provider), Repo: s.repo, SHA: s.sha, Stall: vigil.FormatDuration(s.stall)}
}

// Kind returns vigil.KindCI.
func (*Watcher) Kind() vigil.Kind { return vigil.KindCI }

// parseProvider reads the provider field: "" means github.
func parseProvider(s string) (forge.Provider, error) {
	p, err := forge.ParseProvider(s)
	if err != nil {
		return "", watcher.InvalidPredicate("provider", "%s, not %q", err, watcher.Clip(s, 40))
	}
	return p, nil
}

// parse validates a predicate without touching the network; sha may be a
// ref still to resolve.
func parse(raw json.RawMessage) (*spec, error) {
	var in input
	if err := watcher.Decode(raw, "", &in); err != nil {
		return nil, err
	}
	s := &spec{}
	var err error
	if s.provider, err = parseProvider(in.Provider); err != nil {
		return nil, err
	}
	if in.Repo == "" {
		return nil, watcher.InvalidPredicate("repo", "is required, as owner/name")
	}
	if s.repo, err = forge.ParseRepo(s.provider, in.Repo); err != nil {
		return nil, watcher.InvalidPredicate("repo", "%s, not %q", err, watcher.Clip(in.Repo, 80))
	}
	s.sha = strings.TrimSpace(in.SHA)
	if s.sha == "" {
		return nil, watcher.InvalidPredicate("sha", "is required: a full 40-hex commit SHA, or a branch, tag or short SHA to resolve")
	}
	if forge.IsFullSHA(strings.ToLower(s.sha)) {
		s.sha = strings.ToLower(s.sha)
	} else if err := forge.ValidRef(s.sha); err != nil {
		return nil, watcher.InvalidPredicate("sha", "%s: give a full 40-hex SHA, or a branch, tag or short SHA", err)
	}
	if len(in.Checks) > MaxChecks {
		return nil, watcher.InvalidPredicate("checks", "names %d checks; at most %d are allowed", len(in.Checks), MaxChecks)
	}
	for i, c := range in.Checks {
		f := fmt.Sprintf("checks[%d]", i)
		switch {
		case strings.TrimSpace(c) == "":
			return nil, watcher.InvalidPredicate(f, "is empty: name a check")
		case len(c) > MaxCheckName:
			return nil, watcher.InvalidPredicate(f, "is longer than %d bytes", MaxCheckName)
		case strings.ContainsAny(c, "\r\n\x00"):
			return nil, watcher.InvalidPredicate(f, "must not hold a line break or NUL")
		}
		if !slices.Contains(s.checks, c) {
			s.checks = append(s.checks, c)
		}
	}
	slices.Sort(s.checks)
	if s.stall, err = watcher.DurationField("stall", in.Stall, DefaultStall, MaxStall); err != nil {
		return nil, err
	}
	return s, nil
}

// Canonicalize validates the predicate and resolves a branch, tag or
// short SHA to the full SHA of the commit it names now. That read is the
// only network I/O, bounded by ResolveTimeout.
func (w *Watcher) Canonicalize(ctx context.Context, raw json.RawMessage, now time.Time) (watcher.Canonical, error) {
	s, err := parse(raw)
	if err != nil {
		return watcher.Canonical{}, err
	}
	if !forge.IsFullSHA(s.sha) {
		c, ok := w.forges.Client(s.provider)
		if !ok {
			return watcher.Canonical{}, watcher.Unobservable("%s", forge.Unconfigured("ci", s.provider))
		}
		rctx, cancel := context.WithTimeout(ctx, ResolveTimeout)
		sha, err := c.ResolveRef(rctx, s.repo, s.sha, now)
		cancel()
		if err != nil {
			return watcher.Canonical{}, resolveError(err, s)
		}
		s.sha = sha
	}
	b, err := watcher.Encode(s.canonical())
	if err != nil {
		return watcher.Canonical{}, err
	}
	return watcher.Canonical{Predicate: b}, nil
}

// resolveError sorts a failed resolution: a ref the forge does not know
// is the caller's mistake; a token the forge refuses is the daemon's
// configuration; anything else may pass.
func resolveError(err error, s *spec) error {
	switch {
	case forge.IsNotFound(err):
		return watcher.InvalidPredicate("sha", "%q is neither a full 40-hex SHA nor a branch, tag or commit of %s on %s (or the repository does not exist, or the token cannot read it)",
			watcher.Clip(s.sha, 80), s.repo, s.provider)
	case forge.IsPermanent(err):
		return &vigil.Error{Code: vigil.CodeWatchUnobservable, Message: err.Error(), Err: err}
	}
	return &vigil.Error{Code: vigil.CodeUnavailable, Err: err,
		Message: fmt.Sprintf("could not resolve %q to a commit now (%v); try again, or give the full 40-hex SHA", watcher.Clip(s.sha, 80), err)}
}

// Repository implements watcher.RepoNamer: the predicate's provider and
// repo, "github/acme/api".
func (w *Watcher) Repository(predicate json.RawMessage) (string, error) {
	s, err := parse(predicate)
	if err != nil {
		return "", err
	}
	return forge.RepoPath(s.provider, s.repo), nil
}

// Admit refuses a watch on a provider the daemon has no URL for. It
// reads no network.
func (w *Watcher) Admit(_ context.Context, predicate json.RawMessage) error {
	s, err := parse(predicate)
	if err != nil {
		return err
	}
	if _, ok := w.forges.Client(s.provider); !ok {
		return watcher.Unobservable("%s", forge.Unconfigured("ci", s.provider))
	}
	return nil
}

// Probe reads the commit's checks (through the shared cache) and judges
// them.
func (w *Watcher) Probe(ctx context.Context, p watcher.Probe) (vigil.Observation, error) {
	if err := watcher.CheckKind(p, vigil.KindCI); err != nil {
		return vigil.Observation{}, err
	}
	s, err := parse(p.Predicate)
	if err == nil && !forge.IsFullSHA(s.sha) {
		err = errors.New("sha is not a full commit SHA")
	}
	if err != nil {
		return vigil.Observation{}, watcher.Permanent(fmt.Errorf("stored ci predicate is invalid: %w", err))
	}
	c, ok := w.forges.Client(s.provider)
	if !ok {
		return vigil.Observation{}, watcher.Permanent(errors.New(forge.Unconfigured("ci", s.provider)))
	}
	report, err := c.Checks(ctx, s.repo, s.sha, p.Now, w.freshness)
	if err != nil {
		if forge.IsNoCommit(err) {
			return unknownCommit(s, p)
		}
		if forge.IsPermanent(err) {
			return vigil.Observation{}, watcher.Permanent(err)
		}
		return vigil.Observation{}, err
	}
	obs := Judge(report, s.checks, s.stall, p.Now)
	// Probes answered from one cached read count once toward stable.
	obs.Read = report.Read
	return obs, nil
}

// unknownCommit answers a probe of a commit GitHub does not know (422
// "No commit found for SHA"): an agent registers the SHA while it is
// still pushing it, so the watch stays pending, saying why, for
// UnknownCommitBound after it was registered (or, when the probe does
// not carry that time, after the first probe that found no commit, kept
// in the facts); then the commit never arrived, and the watch errors
// with a sentence saying so.
func unknownCommit(s *spec, p watcher.Probe) (vigil.Observation, error) {
	since := p.Created
	if since.IsZero() && p.Last != nil {
		if v, ok := p.Last.Facts["commit_unknown_since"].(string); ok {
			if t, err := vigil.ParseTime(v); err == nil {
				since = t
			}
		}
	}
	if since.IsZero() || since.After(p.Now) {
		since = p.Now
	}
	short := s.sha[:7]
	if p.Now.Sub(since) >= UnknownCommitBound {
		from := "the watch was registered"
		if p.Created.IsZero() {
			from = "vigil first asked"
		}
		return vigil.Observation{}, watcher.Permanent(fmt.Errorf(
			"commit %s never arrived in %s: %s after %s, %s still answers \"No commit found for SHA\"; push the commit to %s (a commit only in a fork or another repository is not in it), or check the SHA",
			short, s.repo, vigil.FormatDuration(UnknownCommitBound), from, s.provider, s.repo))
	}
	return vigil.Observation{Verdict: vigil.VerdictPending,
		Summary: fmt.Sprintf("GitHub does not know commit %s in %s yet (\"No commit found for SHA\"): waiting for it to be pushed, until %s",
			short, s.repo, wordTime(since.Add(UnknownCommitBound))),
		Facts: map[string]any{"commit_unknown_since": vigil.FormatTime(since)}}, nil
}
