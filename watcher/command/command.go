// Package command is the watcher for kind command: a watch that runs a
// program once per probe and judges its exit code or its JSON stdout.
//
// The predicate gives exactly one of argv (a program and its arguments,
// run directly) or shell (a string run by /bin/sh -c), and optionally:
//
//	cwd      an absolute working directory (needed for a relative argv[0]
//	         like "./check.sh")
//	env      variables to set, {"NAME": "value"}
//	timeout  how long one run may take: 60s by default, at most 10m
//	done     when the watch is satisfied: exit codes, default [0]
//	fail     when the watch has failed: exit codes
//
// done and fail each take exit codes (a number or a list of numbers, 0 to
// 255) or matchers on the JSON the program prints on stdout (a matcher
// object or a list of them; see package matcher). Matchers look at stdout
// only, whatever the exit code, and stdout must be JSON within the last
// 64 KiB the probe keeps. An exit code may not be in both done and fail.
//
// The canonical form spells done and fail as lists, codes sorted or
// matchers sorted; fills timeout and done; and omits empty fields:
//
//	{"argv": ["make", "check"], "cwd": "/src/app", "done": [0], "fail": [2], "timeout": "60s"}
//	{"done": [{"path": "state", "equals": "ready"}], "shell": "kubectl get x -o json", "timeout": "20s"}
//
// A probe runs the program once. fail matching answers failed (fail is
// checked first); done matching answers satisfied; any other exit is
// pending. A run that times out, is cancelled or is killed by a signal is
// unavailable; a program that cannot be found is a permanent error.
//
// The program runs in its own process group, with stdin empty and an
// environment of only PATH, HOME, USER, LOGNAME, LANG, LC_ALL, TZ, TMPDIR
// and SHELL from the daemon plus the predicate's env. On timeout or
// cancellation the whole group gets SIGTERM, then SIGKILL after
// Config.KillGrace; once the program has exited, whatever it left running
// in its group is killed, and output pipes that stay open are abandoned
// after KillGrace, so no child can hang a probe. The last 64 KiB of stdout
// and of stderr are kept; observation facts hold their last 4 KiB.
//
// Command watches run programs: Admit refuses them unless the daemon
// allows exec (Config.AllowExec).
package command

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/vigil-run/vigil"
	"github.com/vigil-run/vigil/internal/proc"
	"github.com/vigil-run/vigil/watcher"
	"github.com/vigil-run/vigil/watcher/matcher"
)

// Defaults and bounds of a command predicate and of a run (package proc
// runs the program and bounds it).
const (
	DefaultTimeout   = proc.DefaultTimeout
	MaxTimeout       = proc.MaxTimeout
	DefaultKillGrace = proc.DefaultKillGrace
	MaxArgs          = proc.MaxArgs
	MaxArg           = proc.MaxArg
	MaxShell         = proc.MaxShell
	MaxEnv           = proc.MaxEnv
	MaxEnvName       = proc.MaxEnvName
	MaxEnvValue      = proc.MaxEnvValue
	MaxPath          = proc.MaxPath
	MaxCodes         = 64
	// OutputTail is how much of the end of stdout and of stderr a probe keeps.
	OutputTail = proc.OutputTail
	// FactTail is how much of the end of each output the facts hold.
	FactTail = proc.FactTail
)

// Program is one program to run, as a command predicate spells it (see
// proc.Program).
type Program = proc.Program

// Config configures the command watcher.
type Config struct {
	// AllowExec allows command watches (the daemon's --allow-exec,
	// VIGIL_ALLOW_EXEC=1). Without it, Admit refuses them.
	AllowExec bool
	// KillGrace is how long a program has between SIGTERM and SIGKILL, and
	// how long a probe waits for output pipes left open after the program
	// exits. Zero means DefaultKillGrace.
	KillGrace time.Duration
}

// Watcher answers command watches.
type Watcher struct {
	allowExec bool
	runner    proc.Runner
}

var _ watcher.Watcher = (*Watcher)(nil)

// New returns a command watcher.
func New(cfg Config) *Watcher {
	return &Watcher{allowExec: cfg.AllowExec, runner: proc.Runner{KillGrace: cfg.KillGrace}}
}

type input struct {
	Argv    []string          `json:"argv,omitempty"`
	Shell   string            `json:"shell,omitempty"`
	Cwd     string            `json:"cwd,omitempty"`
	Env     map[string]string `json:"env,omitempty"`
	Timeout string            `json:"timeout,omitempty"`
	Done    json.RawMessage   `json:"done,omitempty"`
	Fail    json.RawMessage   `json:"fail,omitempty"`
}

type canonical struct {
	Argv    []string          `json:"argv,omitempty"`
	Shell   string            `json:"shell,omitempty"`
	Cwd     string            `json:"cwd,omitempty"`
	Env     map[string]string `json:"env,omitempty"`
	Timeout string            `json:"timeout"`
	Done    *condition        `json:"done"`
	Fail    *condition        `json:"fail,omitempty"`
}

// condition is done or fail: exit codes or matchers on stdout, never both.
type condition struct {
	codes    []int
	matchers []matcher.Matcher
}

// MarshalJSON writes the list of codes or of matchers.
func (c *condition) MarshalJSON() ([]byte, error) {
	if c.matchers != nil {
		return json.Marshal(c.matchers)
	}
	return json.Marshal(c.codes)
}

type spec struct {
	canonical
	timeout time.Duration
	done    condition
	fail    *condition
}

// Kind returns vigil.KindCommand.
func (*Watcher) Kind() vigil.Kind { return vigil.KindCommand }

// Canonicalize validates the predicate and returns its canonical form.
func (*Watcher) Canonicalize(_ context.Context, raw json.RawMessage, _ time.Time) (watcher.Canonical, error) {
	s, err := parse(raw)
	if err != nil {
		return watcher.Canonical{}, err
	}
	b, err := watcher.Encode(s.canonical)
	if err != nil {
		return watcher.Canonical{}, err
	}
	return watcher.Canonical{Predicate: b}, nil
}

func parse(raw json.RawMessage) (*spec, error) {
	var in input
	if err := watcher.Decode(raw, "", &in); err != nil {
		return nil, err
	}
	s := &spec{}
	prog := proc.Program{Argv: in.Argv, Shell: in.Shell, Cwd: in.Cwd, Env: in.Env}
	if err := prog.Check(""); err != nil {
		return nil, err
	}
	s.Argv, s.Shell, s.Cwd, s.Env = prog.Argv, prog.Shell, prog.Cwd, prog.Env
	var err error
	if s.timeout, err = watcher.DurationField("timeout", in.Timeout, DefaultTimeout, MaxTimeout); err != nil {
		return nil, err
	}
	s.Timeout = vigil.FormatDuration(s.timeout)
	s.done = condition{codes: []int{0}}
	if in.Done != nil {
		if s.done, err = parseCondition(in.Done, "done"); err != nil {
			return nil, err
		}
	}
	s.canonical.Done = &s.done
	if in.Fail != nil {
		fail, err := parseCondition(in.Fail, "fail")
		if err != nil {
			return nil, err
		}
		for _, c := range fail.codes {
			if slices.Contains(s.done.codes, c) {
				return nil, watcher.InvalidPredicate("fail", "lists exit code %d, which done lists too", c)
			}
		}
		s.fail = &fail
		s.canonical.Fail = &fail
	}
	return s, nil
}

// parseCondition reads exit codes (a number or a list of numbers) or
// matchers (an object or a list of objects).
func parseCondition(raw json.RawMessage, field string) (condition, error) {
	raw = bytes.TrimSpace(raw)
	isList := len(raw) > 0 && raw[0] == '['
	var items []json.RawMessage
	if isList {
		if err := json.Unmarshal(raw, &items); err != nil {
			return condition{}, watcher.InvalidPredicate(field, "must be exit codes or matchers")
		}
	} else {
		items = []json.RawMessage{raw}
	}
	if len(items) == 0 {
		return condition{}, watcher.InvalidPredicate(field, "must not be empty")
	}
	first := bytes.TrimSpace(items[0])
	if len(first) > 0 && first[0] == '{' {
		ms, err := matcher.ParseList(raw, field)
		if err != nil {
			return condition{}, err
		}
		return condition{matchers: ms}, nil
	}
	if len(items) > MaxCodes {
		return condition{}, watcher.InvalidPredicate(field, "lists %d exit codes; at most %d are allowed", len(items), MaxCodes)
	}
	var codes []int
	for i, item := range items {
		f := field
		if isList {
			f = fmt.Sprintf("%s[%d]", field, i)
		}
		var code *int
		if err := json.Unmarshal(item, &code); err != nil || code == nil {
			return condition{}, watcher.InvalidPredicate(f, "must be an exit code from 0 to 255 (or every entry a matcher object)")
		}
		if *code < 0 || *code > 255 {
			return condition{}, watcher.InvalidPredicate(f, "must be an exit code from 0 to 255")
		}
		codes = append(codes, *code)
	}
	slices.Sort(codes)
	return condition{codes: slices.Compact(codes)}, nil
}

// Admit refuses every command watch unless exec is allowed.
func (w *Watcher) Admit(context.Context, json.RawMessage) error {
	if !w.allowExec {
		return watcher.Unobservable("command watches run programs: start the daemon with --allow-exec (VIGIL_ALLOW_EXEC=1)")
	}
	return nil
}

// Probe runs the program once.
func (w *Watcher) Probe(ctx context.Context, p watcher.Probe) (vigil.Observation, error) {
	if err := watcher.CheckKind(p, vigil.KindCommand); err != nil {
		return vigil.Observation{}, err
	}
	if !w.allowExec {
		return vigil.Observation{}, watcher.Permanent(errors.New("command watches run programs and exec is not allowed on this daemon"))
	}
	s, err := parse(p.Predicate)
	if err != nil {
		return vigil.Observation{}, watcher.Permanent(fmt.Errorf("stored command predicate is invalid: %w", err))
	}
	run, err := w.runner.Run(ctx, proc.Program{Argv: s.Argv, Shell: s.Shell, Cwd: s.Cwd, Env: s.Env}, nil, s.timeout)
	if err != nil {
		return vigil.Observation{}, err
	}
	facts := map[string]any{}
	if out := run.Stdout; out != "" {
		facts["stdout"] = watcher.ClipTail(out, FactTail)
	}
	if out := run.Stderr; out != "" {
		facts["stderr"] = watcher.ClipTail(out, FactTail)
	}
	if run.Ended != "" {
		return vigil.Observation{Verdict: vigil.VerdictUnavailable, Summary: run.Ended, Reason: run.Ended, Facts: facts}, nil
	}
	facts["exit_code"] = run.ExitCode
	head := fmt.Sprintf("exited %d", run.ExitCode)

	stdout := []byte(run.Stdout)
	failed, failSummary := judge(s.fail, run.ExitCode, stdout, facts, "fail")
	done, doneSummary := judge(&s.done, run.ExitCode, stdout, facts, "done")
	var verdict vigil.Verdict
	var summary string
	switch {
	case failed:
		verdict, summary = vigil.VerdictFailed, join(head, failSummary)
	case done:
		verdict, summary = vigil.VerdictSatisfied, join(head, doneSummary)
	default:
		verdict, summary = vigil.VerdictPending, join(head, doneSummary)
	}
	return vigil.Observation{Verdict: verdict, Summary: watcher.Clip(summary, 512), Facts: facts}, nil
}

func join(head, tail string) string {
	if tail == "" {
		return head
	}
	return head + "; " + tail
}

// judge applies one condition, recording matcher facts under key.
func judge(c *condition, code int, stdout []byte, facts map[string]any, key string) (bool, string) {
	if c == nil {
		return false, ""
	}
	if c.matchers == nil {
		return slices.Contains(c.codes, code), ""
	}
	ev := matcher.Evaluate(c.matchers, stdout)
	facts[key] = ev.Facts()
	if !ev.JSON {
		return false, "stdout is not JSON"
	}
	return ev.Matched, ev.Summary()
}
