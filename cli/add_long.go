package cli

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/vigil-run/vigil"
)

// EnvChainDepth names the variable a vigil-started command finds its
// chain depth in; add sends it to the daemon, which refuses registrations
// from too deep a chain.
const EnvChainDepth = "VIGIL_CHAIN_DEPTH"

// chainDepth reads VIGIL_CHAIN_DEPTH: 0 when unset.
func chainDepth(e *env) (int, error) {
	v := strings.TrimSpace(e.getenv(EnvChainDepth))
	if v == "" {
		return 0, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		return 0, usageErr(fmt.Errorf("%s must be a non-negative whole number, not %q", EnvChainDepth, v))
	}
	return n, nil
}

// programFlags are the flags of the kinds that run a program: the program
// as an argv after -- or --shell, its working directory and environment.
type programFlags struct {
	shell, cwd string
	envs       []string
}

func (pf *programFlags) bind(cmd *cobra.Command) {
	cmd.Flags().StringVar(&pf.shell, "shell", "", "run this string with /bin/sh -c")
	cmd.Flags().StringVar(&pf.cwd, "cwd", "", "working directory (default the current directory)")
	cmd.Flags().StringArrayVar(&pf.envs, "env", nil, "environment variable NAME=value (repeatable)")
}

// apply sets argv or shell, cwd and env in p.
func (pf *programFlags) apply(p map[string]any, args []string, kind string) error {
	switch {
	case pf.shell != "" && len(args) > 0:
		return usageErr(errors.New("give --shell or an argv after --, not both"))
	case pf.shell != "":
		p["shell"] = pf.shell
	case len(args) > 0:
		p["argv"] = args
	case p["argv"] == nil && p["shell"] == nil:
		return usageErr(fmt.Errorf("give the command: vigil add %s -- ARGV... (or --shell STRING)", kind))
	}
	cwd := pf.cwd
	if cwd == "" && p["cwd"] == nil {
		if wd, err := os.Getwd(); err == nil {
			cwd = wd
		}
	}
	if cwd != "" {
		abs, err := filepath.Abs(cwd)
		if err != nil {
			return usageErr(err)
		}
		p["cwd"] = abs
	}
	if len(pf.envs) > 0 {
		m := map[string]any{}
		for _, kv := range pf.envs {
			k, v, ok := strings.Cut(kv, "=")
			if !ok || k == "" {
				return usageErr(fmt.Errorf("--env %q: want NAME=value", kv))
			}
			m[k] = v
		}
		p["env"] = m
	}
	return nil
}

func newAddRunCmd(e *env, f *addFlags) *cobra.Command {
	var pf programFlags
	var tail int
	cmd := &cobra.Command{
		Use:   "run [--shell STRING | -- ARGV...]",
		Short: "Run a long command once and report how it exited",
		Long: `Start a command once, under a supervisor that outlives the daemon, and settle
when it exits: fired on exit 0, failed on any other exit or a signal. The
outcome holds the exit code, the duration and the end of the output (--tail
bytes, 64 KiB by default). At the deadline (1h by default) the command's whole
process group is terminated. The daemon must be started with --allow-exec.`,
		Example: `  vigil add run -- make release
  vigil add run --deadline 3h --shell './train.sh > train.log'`,
		RunE: func(cmd *cobra.Command, args []string) error {
			p, err := f.basePredicate()
			if err != nil {
				return err
			}
			if err := pf.apply(p, args, "run"); err != nil {
				return err
			}
			if cmd.Flags().Changed("tail") {
				p["tail"] = tail
			}
			return f.register(cmd, e, vigil.KindRun, p)
		},
	}
	pf.bind(cmd)
	cmd.Flags().IntVar(&tail, "tail", 64<<10, "bytes of the end of the output to keep in the outcome")
	return cmd
}

func newAddScheduleCmd(e *env, f *addFlags) *cobra.Command {
	var pf programFlags
	var every, cron, tz, timeout string
	cmd := &cobra.Command{
		Use:   "schedule (--every DURATION | --cron EXPR) [--shell STRING | -- ARGV...]",
		Short: "Run a command on a schedule and leave each output as a note",
		Long: `Run a command every interval or on a 5-field cron schedule, and leave what it
printed (or how it failed) as a note in the mailbox, one per run. A run that is
still going when the next one comes due makes that one skipped. The watch is
standing: it runs until cancelled. The daemon must be started with --allow-exec.`,
		Example: `  vigil add schedule --every 1h -- ./check-disk.sh
  vigil add schedule --cron "0 9 * * 1-5" --tz Europe/Paris --shell 'gh pr list'`,
		RunE: func(cmd *cobra.Command, args []string) error {
			p, err := f.basePredicate()
			if err != nil {
				return err
			}
			switch {
			case every != "" && cron != "":
				return usageErr(errors.New("give --every or --cron, not both"))
			case every != "":
				p["every"] = every
			case cron != "":
				p["cron"] = cron
			case p["every"] == nil && p["cron"] == nil:
				return usageErr(errors.New("give --every DURATION or --cron EXPR"))
			}
			if tz != "" {
				p["tz"] = tz
			}
			if timeout != "" {
				p["timeout"] = timeout
			}
			if err := pf.apply(p, args, "schedule"); err != nil {
				return err
			}
			return f.register(cmd, e, vigil.KindSchedule, p)
		},
	}
	pf.bind(cmd)
	cmd.Flags().StringVar(&every, "every", "", "run every DURATION (1h), the first one DURATION from now")
	cmd.Flags().StringVar(&cron, "cron", "", `run on a 5-field cron schedule ("0 * * * *")`)
	cmd.Flags().StringVar(&tz, "tz", "", "time zone of --cron (Europe/Paris; default the daemon's local time)")
	cmd.Flags().StringVar(&timeout, "timeout", "", "timeout of one run (default 60s, at most 10m)")
	return cmd
}

func newAddTokenCmd(e *env, f *addFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "token",
		Short: "Make a completion URL that settles the watch when called",
		Long: `Register a watch that something else settles by calling its completion URL
once: POST {"status": "success"} fires it, {"status": "failure"} fails it, and
"data" (a JSON object) goes into the outcome. The URL holds a secret and is
shown only now; it expires with the watch (24h by default).`,
		Example: `  vigil add token --note "deploy finished" --deadline 2h`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			p, err := f.basePredicate()
			if err != nil {
				return err
			}
			return f.register(cmd, e, vigil.KindToken, p)
		},
	}
}

// printCompletion shows a token watch's completion URL, once, with an
// example call.
func printCompletion(out io.Writer, w *vigil.Watch) {
	if w.CompletionURL == "" {
		return
	}
	u := term(w.CompletionURL)
	fmt.Fprintf(out, "Completion URL (shown only now; it is a secret): %s\n", u)
	fmt.Fprintf(out, "Complete it with:\n  curl -fsS -X POST -H 'Content-Type: application/json' -d '{\"status\":\"success\"}' '%s'\n", u)
}
