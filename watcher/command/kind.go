package command

import (
	"time"

	"github.com/vigil-run/vigil"
	"github.com/vigil-run/vigil/watcher"
)

// Descriptor describes kind command: runs its program every 30 s, for 30
// min by default; it needs exec allowed.
func Descriptor() watcher.Descriptor {
	return watcher.Descriptor{
		Kind:    vigil.KindCommand,
		Spec:    vigil.KindSpec{Every: 30 * time.Second, Deadline: 30 * time.Minute, Exec: true},
		DueOnly: true,
		Doc:     `{"argv": ["make", "check"], "cwd": "/abs/dir"} — done when it exits 0 (needs a daemon that allows exec)`,
		Schema: watcher.PredicateSchema[input](map[string]string{
			"argv":    "the program and its arguments; give argv or shell, not both",
			"shell":   "a /bin/sh command line; give argv or shell, not both",
			"cwd":     "absolute working directory",
			"env":     "environment variables to add",
			"timeout": "how long one run may take; default 60s",
		}),
		Subject: watcher.ProgramSubject,
	}
}

// Descriptor returns the kind's descriptor.
func (*Watcher) Descriptor() watcher.Descriptor { return Descriptor() }
