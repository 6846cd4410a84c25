package file

import (
	"time"

	"github.com/vigil-run/vigil"
	"github.com/vigil-run/vigil/watcher"
)

// Descriptor describes kind file: checked every 5 s (and woken by file
// system events), for 30 min by default.
func Descriptor() watcher.Descriptor {
	return watcher.Descriptor{
		Kind: vigil.KindFile,
		Spec: vigil.KindSpec{Every: 5 * time.Second, Deadline: 30 * time.Minute},
		Doc:  `{"path": "/abs/path/READY"} or {"path": "/abs/build.log", "contains": "BUILD OK"}; {"exists": false} waits for removal`,
		Schema: watcher.PredicateSchema[input](map[string]string{
			"path":     "absolute path, inside the daemon's roots",
			"exists":   "false waits for the file to be gone; default true",
			"contains": "text the file must hold",
			"matches":  "RE2 regular expression the file must match",
		}),
		Subject: func(p map[string]any) string {
			if e, ok := p["exists"].(bool); ok && !e {
				return "the removal of " + watcher.SubjectString(p, "path")
			}
			return "the file " + watcher.SubjectString(p, "path")
		},
	}
}

// Descriptor returns the kind's descriptor.
func (*Watcher) Descriptor() watcher.Descriptor { return Descriptor() }
