package ticket

import (
	"fmt"
	"time"

	"github.com/vigil-run/vigil"
	"github.com/vigil-run/vigil/watcher"
)

// Descriptor describes kind ticket: standing, checked every minute.
func Descriptor() watcher.Descriptor {
	return watcher.Descriptor{
		Kind: vigil.KindTicket,
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
	}
}

// Descriptor returns the kind's descriptor.
func (*Watcher) Descriptor() watcher.Descriptor { return Descriptor() }
