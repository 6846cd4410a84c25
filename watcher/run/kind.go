package run

import (
	"time"

	"github.com/vigil-run/vigil"
	"github.com/vigil-run/vigil/watcher"
)

// Descriptor describes kind run. A run is started by its first probe, at
// once, and is woken when it ends; the 30 s interval is only a fallback
// for a lost wake-up or a supervisor that died without a word. It needs
// exec allowed.
func Descriptor() watcher.Descriptor {
	return watcher.Descriptor{
		Kind: vigil.KindRun,
		Spec: vigil.KindSpec{Every: 30 * time.Second, Deadline: time.Hour, Exec: true},
		Doc:  `{"argv": ["make", "release"], "cwd": "/abs/dir"} — starts the program once; fired when it exits 0, failed otherwise, with the end of its output (needs a daemon that allows exec)`,
		Schema: watcher.PredicateSchema[input](map[string]string{
			"argv":  "the program and its arguments; give argv or shell, not both",
			"shell": "a /bin/sh command line; give argv or shell, not both",
			"cwd":   "absolute working directory",
			"env":   "environment variables to add",
			"tail":  "bytes of the end of the output the outcome keeps; default 65536",
		}),
		Subject: watcher.ProgramSubject,
	}
}

// Descriptor returns the kind's descriptor.
func (*Watcher) Descriptor() watcher.Descriptor { return Descriptor() }
