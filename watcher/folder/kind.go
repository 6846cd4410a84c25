package folder

import (
	"time"

	"github.com/vigil-run/vigil"
	"github.com/vigil-run/vigil/watcher"
)

// Descriptor describes kind folder: woken by file system events, checked
// every 10 s as a fallback, for 30 min by default (standing on request).
func Descriptor() watcher.Descriptor {
	return watcher.Descriptor{
		Kind: vigil.KindFolder,
		Spec: vigil.KindSpec{Every: 10 * time.Second, Deadline: 30 * time.Minute},
		Doc:  `{"path": "/abs/src", "pattern": ["*.go"], "standing": true} — the changes someone else makes, as a summary and diffs once the folder settles; "on_change": ["reviewer", "--stdin"] runs a reviewer on them (needs exec)`,
		Schema: watcher.PredicateSchema[input](map[string]string{
			"path":      "absolute path of a folder (watched recursively) or one file, inside the daemon's roots",
			"pattern":   `a glob or a list of globs ("*.go", "docs/**/*.md"); default every file`,
			"settle":    "how long the folder must stay still before a burst is reported; default 20s",
			"max_wait":  "how long a burst that never goes quiet waits; default five times settle",
			"standing":  "report each burst until cancelled",
			"on_change": "a reviewer run on each report: argv (a list), a shell line, or {argv | shell, cwd, env, timeout}",
		}),
		Subject: func(p map[string]any) string { return "the folder " + watcher.SubjectString(p, "path") },
	}
}

// Descriptor returns the kind's descriptor.
func (*Watcher) Descriptor() watcher.Descriptor { return Descriptor() }
