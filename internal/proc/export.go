package proc

import (
	"fmt"
	"os"
	"os/exec"
)

// Resolve finds p's program and builds what running it takes, as Runner
// does: the program's path, its argv (a shell command as /bin/sh -c) and
// its environment (the allow-listed variables of the daemon's plus p.Env).
// A program that cannot be found is an error marked watcher.Permanent.
// Watchers that run a program under their own supervision (kind run) use
// it with Tail and the process-group functions, so every program vigil
// runs is found, bounded and ended alike.
func Resolve(p Program) (path string, argv, env []string, err error) {
	env = environ(p.Env)
	argv = p.Argv
	if p.Shell != "" {
		argv = []string{shellPath, "-c", p.Shell}
	}
	if p.Cwd != "" {
		if info, err := os.Stat(p.Cwd); err != nil || !info.IsDir() {
			return "", nil, nil, fmt.Errorf("cwd %s is not a directory that can be entered", p.Cwd)
		}
	}
	path, err = lookPath(argv[0], p.Cwd, env)
	if err != nil {
		return "", nil, nil, err
	}
	return path, argv, env, nil
}

// Tail is an io.Writer that keeps the last bytes written to it, up to a
// bound, whatever is written; it is safe for concurrent writes.
type Tail struct{ t *tail }

// NewTail returns a Tail that keeps the last max bytes.
func NewTail(max int) *Tail { return &Tail{newTail(max)} }

// Write keeps the end of p; it never fails.
func (t *Tail) Write(p []byte) (int, error) { return t.t.Write(p) }

// String returns the bytes kept.
func (t *Tail) String() string { return t.t.String() }

// Total returns how many bytes were written in all.
func (t *Tail) Total() int64 {
	t.t.mu.Lock()
	defer t.t.mu.Unlock()
	return t.t.total
}

// OwnGroup makes cmd's process the leader of a new process group, so a
// signal to the group reaches every process it starts. It fails where
// there are no process groups.
func OwnGroup(cmd *exec.Cmd) error { return ownGroup(cmd) }

// TerminateGroup sends SIGTERM to the process group led by pid;
// os.ErrProcessDone when the group is gone.
func TerminateGroup(pid int) error { return terminateGroup(pid) }

// KillGroup sends SIGKILL to whatever is left in the process group led by pid.
func KillGroup(pid int) { killGroup(pid) }

// Signaled reports the signal that ended a process, if one did.
func Signaled(ps *os.ProcessState) (string, bool) { return signaled(ps) }
