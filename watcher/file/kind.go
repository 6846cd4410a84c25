package file

import (
	"errors"
	"path/filepath"
	"time"

	"github.com/vigil-run/vigil"
	"github.com/vigil-run/vigil/watcher"
)

// Descriptor describes kind file: checked every 5 s (and woken by file
// system events), for 30 min by default.
func Descriptor() watcher.Descriptor {
	return watcher.Descriptor{
		Kind: vigil.KindFile,
		New:  fromDeps,
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
		CLI: watcher.CLI{
			Use:   "file PATH",
			Short: "Watch for a file to appear (or, with --absent, to go), optionally holding some text",
			Long: `Watch a file. The path must lie inside the daemon's roots (its --roots,
default the home directory). A relative path is taken from the current
directory.`,
			Examples: []string{"vigil add file ./build/done.txt"},
			MaxArgs:  1,
			Flags: []watcher.Flag{
				{Name: "absent", Type: watcher.FlagBool, Usage: "wait for the file to be gone instead"},
				{Name: "contains", Type: watcher.FlagString, Usage: "text the file must hold"},
				{Name: "matches", Type: watcher.FlagString, Usage: "RE2 regular expression the file must match"},
			},
			Build: func(p map[string]any, in watcher.CLIInput) error {
				if len(in.Args) == 1 {
					abs, err := filepath.Abs(in.Args[0])
					if err != nil {
						return err
					}
					p["path"] = abs
				} else if p["path"] == nil {
					return errors.New("give the path to watch: vigil add file PATH")
				}
				if in.Flags.Bool("absent") {
					p["exists"] = false
				}
				watcher.SetString(p, in, "contains", "contains")
				watcher.SetString(p, in, "matches", "matches")
				return nil
			},
		},
	}
}

// Descriptor returns the kind's descriptor.
func (*Watcher) Descriptor() watcher.Descriptor { return Descriptor() }

// fromDeps builds the watcher the daemon registers, with the daemon's roots
// and file system notifier.
func fromDeps(d watcher.Deps) watcher.Watcher {
	cfg := Config{Roots: d.Roots}
	if d.Notifier != nil {
		cfg.Waker = d.Notifier
	}
	return New(cfg)
}
