package ticket

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/vigil-run/vigil"
	"github.com/vigil-run/vigil/watcher"
)

// Descriptor describes kind ticket: standing, checked every minute.
func Descriptor() watcher.Descriptor {
	return watcher.Descriptor{
		Kind: vigil.KindTicket,
		New:  fromDeps,
		Spec: vigil.KindSpec{Every: 60 * time.Second, Standing: true},
		Doc:  `{"provider": "github", "repo": "owner/name", "number": 7} — standing: each change people make to the issue or pull request (title, state, body, comments, reviews)`,
		Schema: watcher.PredicateSchema[input](map[string]string{
			"provider": "github (default), gitea or gitlab",
			"repo":     "owner/name (GitLab: group/…/name)",
			"number":   "the issue or pull request number",
			"type":     "GitLab only: issue (default) or merge_request",
			"bots":     "count comments and reviews by bots too",
		}),
		Subject: func(p map[string]any) string {
			return fmt.Sprintf("%s#%v", watcher.SubjectString(p, "repo"), p["number"])
		},
		CLI: watcher.CLI{
			Use:   "ticket OWNER/NAME#NUMBER | GROUP/NAME!NUMBER",
			Short: "Watch an issue or pull request: one message per change (standing)",
			Long: `Watch an issue, pull request or merge request until cancelled. The first
check records it silently; after that, each change a person makes to the
title, the state, draft, the description, the comments or a pull request's
reviews (other than those written with the daemon's own token, or by bots
unless --bots) is one "changed" message in the mailbox.
GitHub and Gitea number issues and pull requests together: OWNER/NAME#N names
either. On GitLab OWNER/NAME#N is an issue and OWNER/NAME!N a merge request
(! implies --provider gitlab).`,
			Examples: []string{
				"vigil add ticket acme/api#41",
				"vigil add ticket --provider gitea acme/api#7",
				"vigil add ticket group/project!12",
			},
			MaxArgs: 1,
			Flags: []watcher.Flag{
				{Name: "repo", Type: watcher.FlagString, Usage: "repository, OWNER/NAME (GitLab: GROUP/…/NAME)"},
				{Name: "number", Type: watcher.FlagInt, Usage: "issue, pull request or merge request number"},
				{Name: "provider", Type: watcher.FlagString, Usage: "github (default), gitea or gitlab"},
				{Name: "type", Type: watcher.FlagString, Usage: "GitLab only: issue (default) or merge_request"},
				{Name: "bots", Type: watcher.FlagBool, Usage: "count the comments and reviews of bots too"},
			},
			Build: buildCLI,
		},
	}
}

// Descriptor returns the kind's descriptor.
func (*Watcher) Descriptor() watcher.Descriptor { return Descriptor() }

func buildCLI(p map[string]any, in watcher.CLIInput) error {
	repo, provider, typ := in.Flags.String("repo"), in.Flags.String("provider"), in.Flags.String("type")
	number := int64(in.Flags.Int("number"))
	if len(in.Args) == 1 {
		arg := in.Args[0]
		if repo != "" || in.Flags.Changed("number") {
			return errors.New("give OWNER/NAME#NUMBER or --repo and --number, not both")
		}
		i := strings.LastIndexAny(arg, "#!")
		if i <= 0 || i == len(arg)-1 {
			return fmt.Errorf("%q: want OWNER/NAME#NUMBER, like acme/api#41", arg)
		}
		n, err := strconv.ParseInt(arg[i+1:], 10, 64)
		if err != nil {
			return fmt.Errorf("%q: %q is not an issue number", arg, arg[i+1:])
		}
		repo, number = arg[:i], n
		if arg[i] == '!' {
			if typ == "" {
				typ = "merge_request"
			}
			if provider == "" && p["provider"] == nil {
				provider = "gitlab"
			}
		}
	}
	if repo != "" {
		p["repo"] = repo
	}
	if len(in.Args) == 1 || in.Flags.Changed("number") {
		p["number"] = number
	}
	if p["repo"] == nil || p["number"] == nil {
		return errors.New("give the ticket to watch: vigil add ticket OWNER/NAME#NUMBER (or --repo and --number)")
	}
	if provider != "" {
		p["provider"] = provider
	}
	if typ != "" {
		p["type"] = typ
	}
	if in.Flags.Bool("bots") {
		p["bots"] = true
	}
	return nil
}

// fromDeps builds the watcher the daemon registers, with the forges the
// daemon shares.
func fromDeps(d watcher.Deps) watcher.Watcher {
	return New(Config{Forges: d.Forges})
}
