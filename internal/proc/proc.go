// Package proc runs the programs vigil runs (command watches' probes, run
// watches' supervised commands, schedule fires, a folder's reviewer,
// command deliveries) all alike: found as given or on an absolute PATH
// entry only, in their own process group, with stdin given or empty, an
// environment of only PATH, HOME, USER, LOGNAME, LANG, LC_ALL, TZ, TMPDIR
// and SHELL from the daemon plus the program's own, bounded output and a
// timeout. On timeout or cancellation the whole group gets SIGTERM, then
// SIGKILL after the kill grace; once the program has exited, whatever it
// left running in its group is killed, and output pipes that stay open are
// abandoned after the grace, so no child can hang a caller. The last
// OutputTail bytes of stdout and of stderr are kept.
//
// CloseOnExecFrom marks the files a process holds from an fd up
// close-on-exec, so that the programs it starts inherit none of them but
// those handed to them by name.
package proc

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/vigil-run/vigil"
	"github.com/vigil-run/vigil/watcher"
)

// Defaults and bounds of a program and of a run.
const (
	DefaultTimeout   = 60 * time.Second
	MaxTimeout       = 10 * time.Minute
	DefaultKillGrace = 5 * time.Second
	MaxArgs          = 256
	MaxArg           = 4 << 10
	MaxShell         = 16 << 10
	MaxEnv           = 64
	MaxEnvName       = 256
	MaxEnvValue      = 4 << 10
	MaxPath          = 4096
	// OutputTail is how much of the end of stdout and of stderr a probe keeps.
	OutputTail = 64 << 10
	// FactTail is how much of the end of each output the facts hold.
	FactTail  = 4 << 10
	shellPath = "/bin/sh"
)

// inheritedEnv lists the variables a program inherits from the daemon.
func inheritedEnv() []string {
	return []string{"PATH", "HOME", "USER", "LOGNAME", "LANG", "LC_ALL", "TZ", "TMPDIR", "SHELL"}
}

// Program is one program to run, spelled as a command predicate spells
// it: exactly one of Argv (run directly) or Shell (run by /bin/sh -c),
// with an optional absolute working directory and extra environment.
// Every kind and channel that runs a program uses it with Check and Run,
// so every program vigil runs is bounded alike.
type Program struct {
	Argv  []string          `json:"argv,omitempty"`
	Shell string            `json:"shell,omitempty"`
	Cwd   string            `json:"cwd,omitempty"`
	Env   map[string]string `json:"env,omitempty"`
}

// Check validates p as a command predicate's argv, shell, cwd and env are
// validated, cleaning Cwd and dropping an empty Env. Refusals are
// invalid_predicate errors whose field names start with prefix ("" for a
// command predicate, "on_change" for a folder's reviewer).
func (p *Program) Check(prefix string) error {
	field := func(name string) string { return watcher.JoinField(prefix, name) }
	switch {
	case len(p.Argv) > 0 && p.Shell != "":
		return watcher.InvalidPredicate(prefix, "has both argv and shell: give exactly one")
	case len(p.Argv) > 0:
		if err := checkArgv(p.Argv, p.Cwd != "", field); err != nil {
			return err
		}
	case p.Shell != "":
		if len(p.Shell) > MaxShell {
			return watcher.InvalidPredicate(field("shell"), "is longer than %d bytes", MaxShell)
		}
		if strings.ContainsRune(p.Shell, 0) {
			return watcher.InvalidPredicate(field("shell"), "must not hold a NUL byte")
		}
	default:
		return watcher.InvalidPredicate(prefix, "needs argv (a program and its arguments) or shell (a /bin/sh command line)")
	}
	if p.Cwd != "" {
		switch {
		case len(p.Cwd) > MaxPath:
			return watcher.InvalidPredicate(field("cwd"), "is longer than %d bytes", MaxPath)
		case strings.ContainsRune(p.Cwd, 0):
			return watcher.InvalidPredicate(field("cwd"), "must not hold a NUL byte")
		case !filepath.IsAbs(p.Cwd):
			return watcher.InvalidPredicate(field("cwd"), "must be an absolute path")
		}
		p.Cwd = filepath.Clean(p.Cwd)
	}
	if err := checkEnv(p.Env, field); err != nil {
		return err
	}
	if len(p.Env) == 0 {
		p.Env = nil
	}
	return nil
}

func checkArgv(argv []string, haveCwd bool, field func(string) string) error {
	if len(argv) > MaxArgs {
		return watcher.InvalidPredicate(field("argv"), "holds %d arguments; at most %d are allowed", len(argv), MaxArgs)
	}
	for i, a := range argv {
		f := field(fmt.Sprintf("argv[%d]", i))
		if len(a) > MaxArg {
			return watcher.InvalidPredicate(f, "is longer than %d bytes", MaxArg)
		}
		if strings.ContainsRune(a, 0) {
			return watcher.InvalidPredicate(f, "must not hold a NUL byte")
		}
	}
	switch name := argv[0]; {
	case name == "":
		return watcher.InvalidPredicate(field("argv[0]"), "must name a program")
	case strings.HasPrefix(name, "-"):
		return watcher.InvalidPredicate(field("argv[0]"), "must name a program, not an option starting with \"-\"")
	case strings.Contains(name, "/") && !filepath.IsAbs(name) && !haveCwd:
		return watcher.InvalidPredicate(field("argv[0]"), "is a relative path: give cwd too, or an absolute path")
	}
	return nil
}

func checkEnv(env map[string]string, field func(string) string) error {
	if len(env) > MaxEnv {
		return watcher.InvalidPredicate(field("env"), "holds %d variables; at most %d are allowed", len(env), MaxEnv)
	}
	for name, value := range env {
		if !validEnvName(name) {
			return watcher.InvalidPredicate(watcher.Clip(field("env."+name), 64), "is not a valid variable name (letters, digits and _, not starting with a digit)")
		}
		if len(value) > MaxEnvValue {
			return watcher.InvalidPredicate(field("env."+name), "is longer than %d bytes", MaxEnvValue)
		}
		if strings.ContainsRune(value, 0) {
			return watcher.InvalidPredicate(field("env."+name), "must not hold a NUL byte")
		}
	}
	return nil
}

func validEnvName(s string) bool {
	if s == "" || len(s) > MaxEnvName || s[0] >= '0' && s[0] <= '9' {
		return false
	}
	for _, c := range []byte(s) {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_') {
			return false
		}
	}
	return true
}

// environ builds the program's environment: the allow-listed variables of
// the daemon's environment, overridden by the predicate's.
func environ(extra map[string]string) []string {
	m := make(map[string]string)
	for _, name := range inheritedEnv() {
		if v, ok := os.LookupEnv(name); ok {
			m[name] = v
		}
	}
	for k, v := range extra {
		m[k] = v
	}
	env := make([]string, 0, len(m))
	for k, v := range m {
		env = append(env, k+"="+v)
	}
	slices.Sort(env)
	return env
}

// lookPath finds the program to run: a path with a slash as given (against
// cwd if relative), else the first executable file of that name in the
// program's PATH. A program that cannot be found is a permanent error.
func lookPath(name, cwd string, env []string) (string, error) {
	if strings.Contains(name, "/") {
		path := name
		if !filepath.IsAbs(path) {
			path = filepath.Join(cwd, path)
		}
		info, err := os.Stat(path)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			return "", watcher.Permanent(fmt.Errorf("%s: no such program", name))
		case err != nil:
			return "", fmt.Errorf("%s: %w", name, unwrapPath(err))
		case !info.Mode().IsRegular() || info.Mode().Perm()&0o111 == 0:
			return "", watcher.Permanent(fmt.Errorf("%s: not an executable file", name))
		}
		return path, nil
	}
	var pathEnv string
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "PATH="); ok {
			pathEnv = v
		}
	}
	for _, dir := range filepath.SplitList(pathEnv) {
		if !filepath.IsAbs(dir) {
			continue // never run a program found through a relative PATH entry
		}
		path := filepath.Join(dir, name)
		if info, err := os.Stat(path); err == nil && info.Mode().IsRegular() && info.Mode().Perm()&0o111 != 0 {
			return path, nil
		}
	}
	return "", watcher.Permanent(fmt.Errorf("%s: program not found in PATH", name))
}

func unwrapPath(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// Runner runs programs the way command probes do: in their own process
// group, with a minimal environment, bounded output and a timeout that
// terminates the whole group (see the package comment). The zero value
// uses DefaultKillGrace.
type Runner struct {
	// KillGrace is how long a program has between SIGTERM and SIGKILL,
	// and how long output pipes left open after it exits are waited for.
	KillGrace time.Duration
	// Reaper, when set, is the argv that starts `vigil reap` (Reap) to run
	// each program on Linux: a child subreaper, so that what the program
	// starts and leaves its process group (setsid, a daemon) is killed
	// with it too. Only an executable that runs Reap for that argument
	// may be named (the vigil binary's, SelfReaper). Elsewhere, or unset,
	// the program is started directly and only its process group is
	// ended.
	Reaper []string
}

// Output is what one run of a program left.
type Output struct {
	// ExitCode is the program's exit code when Ended is empty.
	ExitCode int
	// Ended says why the run ended without an exit code: a timeout, a
	// cancellation, a signal.
	Ended string
	// Stdout and Stderr are the last OutputTail bytes of each.
	Stdout, Stderr string
}

// Run runs p once, with stdin as its standard input (nil: empty), bounded
// by timeout and ctx. A program that cannot be found is an error marked
// watcher.Permanent; a run that times out or is killed is an Output with
// Ended set, not an error.
func (r Runner) Run(ctx context.Context, p Program, stdin []byte, timeout time.Duration) (Output, error) {
	res, err := r.run(ctx, p, stdin, timeout)
	if err != nil {
		return Output{}, err
	}
	return Output{ExitCode: res.code, Ended: res.ended, Stdout: res.stdout.String(), Stderr: res.stderr.String()}, nil
}

// result is what one run of a program left.
type result struct {
	code           int
	ended          string // why the run ended without an exit code: a timeout, a signal
	stdout, stderr *tail
}

// run finds and starts the program in its own process group and waits
// for it, bounded by timeout and ctx; see the package comment.
func (r Runner) run(ctx context.Context, p Program, stdin []byte, timeout time.Duration) (*result, error) {
	env := environ(p.Env)
	argv := p.Argv
	if p.Shell != "" {
		argv = []string{shellPath, "-c", p.Shell}
	}
	if p.Cwd != "" {
		if info, err := os.Stat(p.Cwd); err != nil || !info.IsDir() {
			return nil, fmt.Errorf("cwd %s is not a directory that can be entered", p.Cwd)
		}
	}
	path, err := lookPath(argv[0], p.Cwd, env)
	if err != nil {
		return nil, err
	}
	grace := r.KillGrace
	if grace <= 0 {
		grace = DefaultKillGrace
	}
	runCtx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	res := &result{stdout: newTail(OutputTail), stderr: newTail(OutputTail)}
	cmd := exec.CommandContext(runCtx, path)
	cmd.Args = argv
	var status, statusW *os.File
	if len(r.Reaper) > 0 && canReap {
		cmd = exec.CommandContext(runCtx, r.Reaper[0])
		cmd.Args = append(slices.Clone(r.Reaper), strconv.FormatInt(grace.Milliseconds(), 10), path)
		cmd.Args = append(cmd.Args, argv...)
		if status, statusW, err = os.Pipe(); err != nil {
			return nil, err
		}
		defer status.Close()
		cmd.ExtraFiles = []*os.File{statusW}
	}
	cmd.Dir = p.Cwd
	cmd.Env = env
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	cmd.Stdout = res.stdout
	cmd.Stderr = res.stderr
	cmd.WaitDelay = grace
	if status != nil {
		// The reaper passes the SIGTERM on and kills after the grace
		// itself: it is given the time to, and to end what is left.
		cmd.WaitDelay = 2*grace + time.Second
	}
	var cancelled atomic.Bool
	if err := ownGroup(cmd); err != nil {
		return nil, watcher.Permanent(err)
	}
	cmd.Cancel = func() error {
		err := terminateGroup(cmd.Process.Pid)
		if err == nil {
			cancelled.Store(true)
		}
		return err
	}
	err = cmd.Start()
	if statusW != nil {
		statusW.Close()
	}
	if err != nil {
		return nil, fmt.Errorf("starting %s: %w", argv[0], unwrapPath(err))
	}
	pid := cmd.Process.Pid
	err = cmd.Wait()
	// Whatever the program left running in its group goes with it.
	killGroup(pid)
	if status != nil {
		return reaped(res, status, cmd, err, argv[0], cancelled.Load(), ctx.Err() != nil, timeout)
	}

	var exitErr *exec.ExitError
	switch {
	case cancelled.Load() && ctx.Err() != nil:
		res.ended = "the run was cancelled; its process group was terminated"
	case cancelled.Load():
		res.ended = fmt.Sprintf("timed out after %s; its process group was terminated", vigil.FormatDuration(timeout))
	case cmd.ProcessState == nil:
		return nil, fmt.Errorf("running %s: %w", argv[0], err)
	case err == nil, errors.Is(err, exec.ErrWaitDelay), errors.As(err, &exitErr):
		if sig, ok := signaled(cmd.ProcessState); ok {
			res.ended = "killed by signal " + sig
		} else {
			res.code = cmd.ProcessState.ExitCode()
		}
	default:
		return nil, fmt.Errorf("running %s: %w", argv[0], err)
	}
	return res, nil
}

// reaped reads how the program a reaper (Reap) ran ended from its status
// pipe, as run judges a program it started itself.
func reaped(res *result, status *os.File, cmd *exec.Cmd, err error, name string, cancelled, ctxDone bool, timeout time.Duration) (*result, error) {
	b, _ := io.ReadAll(io.LimitReader(status, 4096))
	word, rest, _ := strings.Cut(strings.TrimSpace(string(b)), " ")
	switch {
	case word == "error":
		return nil, fmt.Errorf("starting %s: %s", name, rest)
	case cancelled && ctxDone:
		res.ended = "the run was cancelled; its process group was terminated"
	case cancelled:
		res.ended = fmt.Sprintf("timed out after %s; its process group was terminated", vigil.FormatDuration(timeout))
	case word == "signal":
		res.ended = "killed by signal " + rest
	case word == "exit":
		code, cerr := strconv.Atoi(rest)
		if cerr != nil {
			return nil, fmt.Errorf("running %s: the reaper said %q", name, b)
		}
		res.code = code
	default:
		return nil, fmt.Errorf("running %s: the reaper ended without saying how it did: %v", name, cmp.Or(err, errors.New(cmd.ProcessState.String())))
	}
	return res, nil
}

// tail is an io.Writer that keeps the last max bytes written to it.
type tail struct {
	mu    sync.Mutex
	max   int
	buf   []byte
	total int64
}

func newTail(max int) *tail { return &tail{max: max} }

// Write keeps the end of p; it never fails.
func (t *tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.total += int64(len(p))
	if len(p) >= t.max {
		t.buf = append(t.buf[:0], p[len(p)-t.max:]...)
		return len(p), nil
	}
	t.buf = append(t.buf, p...)
	if len(t.buf) > 2*t.max {
		t.buf = append(t.buf[:0], t.buf[len(t.buf)-t.max:]...)
	}
	return len(p), nil
}

// Bytes returns the last max bytes written, less the end of a character
// the cut split: where the kept bytes start after the first, the bytes
// before the first character that starts (at most utf8.UTFMax-1) are not
// kept, so text is cut on a character boundary.
func (t *tail) Bytes() []byte {
	t.mu.Lock()
	defer t.mu.Unlock()
	b := t.buf
	if len(b) > t.max {
		b = b[len(b)-t.max:]
	}
	if int64(len(b)) < t.total {
		for i := 0; i < utf8.UTFMax-1 && len(b) > 0 && !utf8.RuneStart(b[0]); i++ {
			b = b[1:]
		}
	}
	return slices.Clone(b)
}

// String returns the last max bytes written, as text.
func (t *tail) String() string { return string(t.Bytes()) }
