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
		New:     fromDeps,
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
		CLI: watcher.CLI{
			Use:   "command [--shell STRING | -- ARGV...]",
			Short: "Run a command on each check and judge its exit code",
			Long: `Run a command on each check: done when it exits with a --done-exit code
(default 0), failed when it exits with a --fail-exit code, else checked again.
The daemon must be started with --allow-exec. The command runs in the current
directory unless --cwd says otherwise, with a small environment (PATH, HOME,
…) plus --env.`,
			Examples: []string{
				"vigil add command --wait -- make test",
				"vigil add command --fail-exit 1 -- ./ci-status.sh",
				"vigil add command --shell 'curl -s localhost:8080 | grep -q ready'",
			},
			MaxArgs: -1,
			Flags: append(watcher.ProgramFlags(),
				watcher.Flag{Name: "timeout", Type: watcher.FlagString, Usage: "timeout of one run (default 60s)"},
				watcher.Flag{Name: "done-exit", Type: watcher.FlagIntSlice, Usage: "exit codes that mean done (default 0)"},
				watcher.Flag{Name: "fail-exit", Type: watcher.FlagIntSlice, Usage: "exit codes that mean failed"},
			),
			Build: func(p map[string]any, in watcher.CLIInput) error {
				if err := watcher.ApplyProgram(p, in, "command"); err != nil {
					return err
				}
				watcher.SetString(p, in, "timeout", "timeout")
				if codes := in.Flags.Ints("done-exit"); len(codes) > 0 {
					p["done"] = codes
				}
				if codes := in.Flags.Ints("fail-exit"); len(codes) > 0 {
					p["fail"] = codes
				}
				return nil
			},
		},
	}
}

// Descriptor returns the kind's descriptor.
func (*Watcher) Descriptor() watcher.Descriptor { return Descriptor() }

// fromDeps builds the watcher the daemon registers, with the daemon's
// allow_exec.
func fromDeps(d watcher.Deps) watcher.Watcher {
	return New(Config{AllowExec: d.AllowExec})
}
