package schedule

import (
	"github.com/vigil-run/vigil"
	"github.com/vigil-run/vigil/watcher"
)

// Descriptor describes kind schedule: standing, on its own calendar; it
// needs exec allowed.
func Descriptor() watcher.Descriptor {
	return watcher.Descriptor{
		Kind: vigil.KindSchedule,
		Spec: vigil.KindSpec{Standing: true, Exec: true},
		Doc:  `{"every": "1h", "argv": ["./report.sh"]} or {"cron": "0 9 * * 1-5", "tz": "Europe/Paris", "shell": "make digest"} — standing: runs the program on the calendar and leaves what it printed as a note (needs a daemon that allows exec)`,
		Schema: watcher.PredicateSchema[input](map[string]string{
			"every":   "an interval like 1h; give every or cron, not both",
			"cron":    "a 5-field cron expression; give every or cron, not both",
			"tz":      "IANA zone the cron expression is read in",
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
