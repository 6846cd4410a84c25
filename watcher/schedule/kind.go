package schedule

import (
	"errors"
	"github.com/vigil-run/vigil"
	"github.com/vigil-run/vigil/watcher"
)

// Descriptor describes kind schedule: standing, on its own calendar; it
// needs exec allowed.
func Descriptor() watcher.Descriptor {
	return watcher.Descriptor{
		Kind: vigil.KindSchedule,
		New:  fromDeps,
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
		CLI: watcher.CLI{
			Use:   "schedule (--every DURATION | --cron EXPR) [--shell STRING | -- ARGV...]",
			Short: "Run a command on a schedule and leave each output as a note",
			Long: `Run a command every interval or on a 5-field cron schedule, and leave what it
printed (or how it failed) as a note in the mailbox, one per run. A run that is
still going when the next one comes due makes that one skipped. The watch is
standing: it runs until cancelled. The daemon must be started with --allow-exec.`,
			Examples: []string{
				"vigil add schedule --every 1h -- ./check-disk.sh",
				`vigil add schedule --cron "0 9 * * 1-5" --tz Europe/Paris --shell 'gh pr list'`,
			},
			MaxArgs: -1,
			Flags: append(watcher.ProgramFlags(),
				watcher.Flag{Name: "every", Type: watcher.FlagString, Usage: "run every DURATION (1h), the first one DURATION from now"},
				watcher.Flag{Name: "cron", Type: watcher.FlagString, Usage: `run on a 5-field cron schedule ("0 * * * *")`},
				watcher.Flag{Name: "tz", Type: watcher.FlagString, Usage: "time zone of --cron (Europe/Paris; default the daemon's local time)"},
				watcher.Flag{Name: "timeout", Type: watcher.FlagString, Usage: "timeout of one run (default 60s, at most 10m)"},
			),
			Build: func(p map[string]any, in watcher.CLIInput) error {
				every, cron := in.Flags.String("every"), in.Flags.String("cron")
				switch {
				case every != "" && cron != "":
					return errors.New("give --every or --cron, not both")
				case every != "":
					p["every"] = every
				case cron != "":
					p["cron"] = cron
				case p["every"] == nil && p["cron"] == nil:
					return errors.New("give --every DURATION or --cron EXPR")
				}
				watcher.SetString(p, in, "tz", "tz")
				watcher.SetString(p, in, "timeout", "timeout")
				return watcher.ApplyProgram(p, in, "schedule")
			},
		},
	}
}

// Descriptor returns the kind's descriptor.
func (*Watcher) Descriptor() watcher.Descriptor { return Descriptor() }

// fromDeps builds the watcher the daemon registers, with the daemon's
// allow_exec and min_every.
func fromDeps(d watcher.Deps) watcher.Watcher {
	return New(Config{AllowExec: d.AllowExec, MinEvery: d.MinEvery})
}
