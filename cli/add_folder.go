package cli

import (
	"errors"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/vigil-run/vigil"
)

func newAddFolderCmd(e *env, f *addFlags) *cobra.Command {
	var (
		patterns                         []string
		settle, maxWait, onChange        string
		onChangeTimeout                  string
		standing                         bool
		maxFileBytes, maxFiles, maxChars int
	)
	cmd := &cobra.Command{
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
		Example: `  vigil add folder ./docs --pattern '*.md'
  vigil add folder ./src --standing --pattern '*.go,*.mod' --settle 30s
  vigil add folder ./src --standing -- llm -s "Review this diff"
  vigil add folder ./notes.txt --settle 0`,
		RunE: func(cmd *cobra.Command, args []string) error {
			p, err := f.basePredicate()
			if err != nil {
				return err
			}
			dash := cmd.ArgsLenAtDash()
			pathArgs, reviewer := args, []string(nil)
			if dash >= 0 {
				pathArgs, reviewer = args[:dash], args[dash:]
			}
			switch {
			case len(pathArgs) > 1:
				return usageErr(errors.New("give one path; put a reviewer command after --"))
			case len(pathArgs) == 1:
				abs, err := filepath.Abs(pathArgs[0])
				if err != nil {
					return usageErr(err)
				}
				p["path"] = abs
			case p["path"] == nil:
				return usageErr(errors.New("give the folder to watch: vigil add folder PATH"))
			}
			if len(patterns) > 0 {
				p["pattern"] = patterns
			}
			if settle != "" {
				p["settle"] = settle
			}
			if maxWait != "" {
				p["max_wait"] = maxWait
			}
			if standing {
				p["standing"] = true
			}
			for name, n := range map[string]int{"max_file_bytes": maxFileBytes, "max_files": maxFiles, "report_max_chars": maxChars} {
				if n != 0 {
					p[name] = n
				}
			}
			switch {
			case onChange != "" && len(reviewer) > 0:
				return usageErr(errors.New("give the reviewer as --on-change or after --, not both"))
			case onChange != "" || len(reviewer) > 0:
				r := map[string]any{}
				if onChange != "" {
					r["shell"] = onChange
				} else {
					r["argv"] = reviewer
				}
				if onChangeTimeout != "" {
					r["timeout"] = onChangeTimeout
				}
				p["on_change"] = r
			case onChangeTimeout != "":
				return usageErr(errors.New("--on-change-timeout needs a reviewer (--on-change, or a command after --)"))
			}
			return f.register(cmd, e, vigil.KindFolder, p)
		},
	}
	fl := cmd.Flags()
	fl.StringArrayVar(&patterns, "pattern", nil, `globs of the files to watch, "**" crossing folders; a glob without "/" matches names at any depth (repeatable, or comma-separated)`)
	fl.StringVar(&settle, "settle", "", "how long the folder must be still before a report (default 20s; 0 reports every change)")
	fl.StringVar(&maxWait, "max-wait", "", "report a burst that never goes quiet after this long anyway (default 5× settle, at least 1m)")
	fl.BoolVar(&standing, "standing", false, "report every burst until cancelled, instead of firing on the first")
	fl.StringVar(&onChange, "on-change", "", "reviewer as a /bin/sh command line: gets each report on stdin, its output goes into the message")
	fl.StringVar(&onChangeTimeout, "on-change-timeout", "", "how long one review may take (default 5m)")
	fl.IntVar(&maxFileBytes, "max-file-bytes", 0, "larger files are tracked by size and time alone (default 1 MiB)")
	fl.IntVar(&maxFiles, "max-files", 0, "most files tracked (default 2000)")
	fl.IntVar(&maxChars, "report-max-chars", 0, "longest report (default 24000)")
	return cmd
}
