package folder

import (
	"errors"
	"path/filepath"
	"time"

	"github.com/vigil-run/vigil"
	"github.com/vigil-run/vigil/watcher"
)

// BlobDirName names the directory in the data directory where folder
// watches keep the previous contents of the files they diff against.
const BlobDirName = "folder"

// Descriptor describes kind folder: woken by file system events, checked
// every 10 s as a fallback, for 30 min by default (standing on request).
func Descriptor() watcher.Descriptor {
	return watcher.Descriptor{
		Kind: vigil.KindFolder,
		New:  fromDeps,
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
		CLI: watcher.CLI{
			Use:   "folder PATH [-- REVIEWER ARGV...]",
			Short: "Watch a folder (or one file) and report each settled burst of changes as diffs",
			Long: `Watch a folder, recursively, or one file, for changes someone else makes. The
first look is the baseline; once the folder has been still for --settle
(20s; 0 reports every change) the changes since are reported: a summary
line ("1 added, 2 edited") and unified diffs. Without --standing the first
report fires the watch; with it, each report is a "changed" message until
the watch is cancelled.

A reviewer command, after -- (or --on-change for a shell line), gets each
report on stdin, and what it prints goes into the message; the daemon must
be started with --allow-exec. The path must lie inside the daemon's roots.`,
			Examples: []string{
				"vigil add folder ./docs --pattern '*.md'",
				"vigil add folder ./src --standing --pattern '*.go,*.mod' --settle 30s",
				`vigil add folder ./src --standing -- llm -s "Review this diff"`,
				"vigil add folder ./notes.txt --settle 0",
			},
			MaxArgs: -1,
			Flags: []watcher.Flag{
				{Name: "pattern", Type: watcher.FlagStringArray, Usage: `globs of the files to watch, "**" crossing folders; a glob without "/" matches names at any depth (repeatable, or comma-separated)`},
				{Name: "settle", Type: watcher.FlagString, Usage: "how long the folder must be still before a report (default 20s; 0 reports every change)"},
				{Name: "max-wait", Type: watcher.FlagString, Usage: "report a burst that never goes quiet after this long anyway (default 5× settle, at least 1m)"},
				{Name: "standing", Type: watcher.FlagBool, Usage: "report every burst until cancelled, instead of firing on the first"},
				{Name: "on-change", Type: watcher.FlagString, Usage: "reviewer as a /bin/sh command line: gets each report on stdin, its output goes into the message"},
				{Name: "on-change-timeout", Type: watcher.FlagString, Usage: "how long one review may take (default 5m)"},
				{Name: "max-file-bytes", Type: watcher.FlagInt, Usage: "larger files are tracked by size and time alone (default 1 MiB)"},
				{Name: "max-files", Type: watcher.FlagInt, Usage: "most files tracked (default 2000)"},
				{Name: "report-max-chars", Type: watcher.FlagInt, Usage: "longest report (default 24000)"},
			},
			Build: buildCLI,
		},
	}
}

// Descriptor returns the kind's descriptor.
func (*Watcher) Descriptor() watcher.Descriptor { return Descriptor() }

func buildCLI(p map[string]any, in watcher.CLIInput) error {
	pathArgs, reviewer := in.Args, []string(nil)
	if in.Dash >= 0 {
		pathArgs, reviewer = in.Args[:in.Dash], in.Args[in.Dash:]
	}
	switch {
	case len(pathArgs) > 1:
		return errors.New("give one path; put a reviewer command after --")
	case len(pathArgs) == 1:
		abs, err := filepath.Abs(pathArgs[0])
		if err != nil {
			return err
		}
		p["path"] = abs
	case p["path"] == nil:
		return errors.New("give the folder to watch: vigil add folder PATH")
	}
	if patterns := in.Flags.Strings("pattern"); len(patterns) > 0 {
		p["pattern"] = patterns
	}
	watcher.SetString(p, in, "settle", "settle")
	watcher.SetString(p, in, "max-wait", "max_wait")
	if in.Flags.Bool("standing") {
		p["standing"] = true
	}
	for flag, key := range map[string]string{"max-file-bytes": "max_file_bytes", "max-files": "max_files", "report-max-chars": "report_max_chars"} {
		if n := in.Flags.Int(flag); n != 0 {
			p[key] = n
		}
	}
	onChange, timeout := in.Flags.String("on-change"), in.Flags.String("on-change-timeout")
	switch {
	case onChange != "" && len(reviewer) > 0:
		return errors.New("give the reviewer as --on-change or after --, not both")
	case onChange != "" || len(reviewer) > 0:
		r := map[string]any{}
		if onChange != "" {
			r["shell"] = onChange
		} else {
			r["argv"] = reviewer
		}
		if timeout != "" {
			r["timeout"] = timeout
		}
		p["on_change"] = r
	case timeout != "":
		return errors.New("--on-change-timeout needs a reviewer (--on-change, or a command after --)")
	}
	return nil
}

// fromDeps builds the watcher the daemon registers, with the daemon's
// roots, allow_exec and file system notifier; it keeps the previous
// contents of files in <data_dir>/folder.
func fromDeps(d watcher.Deps) watcher.Watcher {
	cfg := Config{Roots: d.Roots, AllowExec: d.AllowExec, BlobDir: filepath.Join(d.DataDir, BlobDirName), DataDir: d.DataDir}
	if d.Notifier == nil {
		return New(cfg)
	}
	cfg.Waker = d.Notifier
	w := New(cfg)
	// A watch the notifier forgets as stale (settled, cancelled) lets go
	// of the contents it kept.
	d.Notifier.OnDrop(w.Forget)
	return w
}
