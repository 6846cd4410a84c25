package ci

import (
	"time"

	"github.com/vigil-run/vigil"
	"github.com/vigil-run/vigil/watcher"
)

// Descriptor describes kind ci: checked every 30 s, for 2 h by default.
func Descriptor() watcher.Descriptor {
	return watcher.Descriptor{
		Kind:    vigil.KindCI,
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
	}
}

// Descriptor returns the kind's descriptor.
func (*Watcher) Descriptor() watcher.Descriptor { return Descriptor() }
