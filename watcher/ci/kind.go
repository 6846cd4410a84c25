package ci

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/vigil-run/vigil"
	"github.com/vigil-run/vigil/watcher"
)

// Descriptor describes kind ci: checked every 30 s, for 2 h by default.
func Descriptor() watcher.Descriptor {
	return watcher.Descriptor{
		Kind:    vigil.KindCI,
		New:     fromDeps,
		Spec:    vigil.KindSpec{Every: 30 * time.Second, Deadline: 2 * time.Hour},
		DueOnly: true,
		Doc:     `{"provider": "github", "repo": "owner/name", "sha": "<commit or branch>"} — every check on the commit passed, or one failed`,
		Schema: watcher.PredicateSchema[input](map[string]string{
			"provider": "github (default), gitea or gitlab",
			"repo":     "owner/name (GitLab: group/…/name)",
			"sha":      "a full SHA, or a branch, tag or short SHA (resolved once)",
			"checks":   "the checks that decide; default all",
			"stall":    "how long a waiting check may wait before it counts as a ghost",
		}),
		Subject: func(p map[string]any) string {
			sha := watcher.SubjectString(p, "sha")
			if len(sha) > 7 {
				sha = sha[:7]
			}
			return "CI on " + watcher.SubjectString(p, "repo") + "@" + sha
		},
		CLI: watcher.CLI{
			Use:   "ci [OWNER/NAME@REF | --repo OWNER/NAME --sha REF]",
			Short: "Watch CI on one commit of a GitHub, Gitea or GitLab repository",
			Long: `Watch CI on one commit: done when every check has finished and passed,
failed when one failed. Zero checks is never success: right after a push
there are none yet. REF is a full commit SHA, or a branch, tag or short SHA
that the daemon resolves to the commit it names now, once: a later push to the
branch does not change the watch. --check names the checks that decide
(repeatable); without it every check does. The daemon needs the provider's
URL (and, for private repositories, a token): see docs/operations.md.`,
			Examples: []string{
				"vigil add ci acme/api@main --wait",
				"vigil add ci --repo acme/api --sha 3f2a1b0 --check build --check test",
				"vigil add ci --provider gitlab group/project@v1.2.0",
			},
			MaxArgs: 1,
			Flags: []watcher.Flag{
				{Name: "repo", Type: watcher.FlagString, Usage: "repository, OWNER/NAME (GitLab: GROUP/…/NAME)"},
				{Name: "sha", Type: watcher.FlagString, Usage: "commit: a full SHA, or a branch, tag or short SHA to resolve"},
				{Name: "provider", Type: watcher.FlagString, Usage: "github (default), gitea or gitlab"},
				{Name: "check", Type: watcher.FlagStringArray, Usage: "a check that decides (repeatable); default every check"},
				{Name: "stall", Type: watcher.FlagString, Usage: "report a check queued or running without an update this long (default 30m)"},
			},
			Build: func(p map[string]any, in watcher.CLIInput) error {
				repo, sha := in.Flags.String("repo"), in.Flags.String("sha")
				if len(in.Args) == 1 {
					if repo != "" || sha != "" {
						return errors.New("give OWNER/NAME@REF or --repo and --sha, not both")
					}
					r, ref, ok := strings.Cut(in.Args[0], "@")
					if !ok || r == "" || ref == "" {
						return fmt.Errorf("%q: want OWNER/NAME@REF, like acme/api@main", in.Args[0])
					}
					repo, sha = r, ref
				}
				if repo != "" {
					p["repo"] = repo
				}
				if sha != "" {
					p["sha"] = sha
				}
				if p["repo"] == nil || p["sha"] == nil {
					return errors.New("give the commit to watch: vigil add ci OWNER/NAME@REF (or --repo and --sha)")
				}
				watcher.SetString(p, in, "provider", "provider")
				if checks := in.Flags.Strings("check"); len(checks) > 0 {
					p["checks"] = checks
				}
				watcher.SetString(p, in, "stall", "stall")
				return nil
			},
		},
	}
}

// Descriptor returns the kind's descriptor.
func (*Watcher) Descriptor() watcher.Descriptor { return Descriptor() }

// fromDeps builds the watcher the daemon registers, with the forges the
// daemon shares.
func fromDeps(d watcher.Deps) watcher.Watcher {
	return New(Config{Forges: d.Forges})
}
