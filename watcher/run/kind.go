package run

import (
	"path/filepath"
	"time"

	"github.com/vigil-run/vigil"
	"github.com/vigil-run/vigil/watcher"
)

// DirName names the run directory in the data directory: <data_dir>/run
// holds the status and pid files of runs.
const DirName = "run"

// Descriptor describes kind run. A run is started by its first probe, at
// once, and is woken when it ends; the 30 s interval is only a fallback
// for a lost wake-up or a supervisor that died without a word. It needs
// exec allowed.
func Descriptor() watcher.Descriptor {
	return watcher.Descriptor{
		Kind: vigil.KindRun,
		New:  fromDeps,
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
		CLI: watcher.CLI{
			Use:   "run [--shell STRING | -- ARGV...]",
			Short: "Run a long command once and report how it exited",
			Long: `Start a command once, under a supervisor that outlives the daemon, and settle
when it exits: fired on exit 0, failed on any other exit or a signal. The
outcome holds the exit code, the duration and the end of the output (--tail
bytes, 64 KiB by default). At the deadline (1h by default) the command's whole
process group is terminated. The daemon must be started with --allow-exec.`,
			Examples: []string{
				"vigil add run -- make release",
				"vigil add run --deadline 3h --shell './train.sh > train.log'",
			},
			MaxArgs: -1,
			Flags: append(watcher.ProgramFlags(),
				watcher.Flag{Name: "tail", Type: watcher.FlagInt, Default: 64 << 10, Usage: "bytes of the end of the output to keep in the outcome"}),
			Build: func(p map[string]any, in watcher.CLIInput) error {
				if err := watcher.ApplyProgram(p, in, "run"); err != nil {
					return err
				}
				if in.Flags.Changed("tail") {
					p["tail"] = in.Flags.Int("tail")
				}
				return nil
			},
		},
	}
}

// Descriptor returns the kind's descriptor.
func (*Watcher) Descriptor() watcher.Descriptor { return Descriptor() }

// fromDeps builds the watcher the daemon registers, with the daemon's
// allow_exec, <data_dir>/run, its logger and replica id, and the
// scheduler's Poke and the store's check before a start. Files are kept
// DefaultRetention, or a day past max_deadline when that is longer: a
// status file older than the longest deadline is of a watch whose
// deadline has passed, which the daemon settles (by that status) before
// Run sweeps; a younger one may be the answer of a watch still pending.
func fromDeps(d watcher.Deps) watcher.Watcher {
	return New(Config{AllowExec: d.AllowExec, Dir: filepath.Join(d.DataDir, DirName), Logger: d.Logger,
		PokeFunc: d.PokeFunc, StartFunc: d.StartFunc, Replica: d.Replica,
		Retention: max(DefaultRetention, d.MaxDeadline+24*time.Hour)})
}
