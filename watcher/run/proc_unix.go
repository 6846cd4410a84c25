//go:build unix

package run

import (
	"errors"
	"os"
	"os/exec"
	"syscall"
)

// newSession makes cmd's process the leader of a new session, out of the
// daemon's process group and terminal.
func newSession(cmd *exec.Cmd) error {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	return nil
}

// lock takes an exclusive flock on f without waiting.
func lock(f *os.File) error {
	return syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
}

// tryLock takes an exclusive flock on f without waiting, and reports
// false if another open file holds it.
func tryLock(f *os.File) (bool, error) {
	err := lock(f)
	if errors.Is(err, syscall.EWOULDBLOCK) {
		return false, nil
	}
	return err == nil, err
}

// locked reports whether some process holds the flock on path: a
// supervisor still alive, or a daemon starting one. The lock goes with its
// holder however it ends.
func locked(path string) (bool, error) {
	f, err := os.Open(path)
	if err != nil {
		return false, err
	}
	defer f.Close()
	ok, err := tryLock(f)
	if err != nil {
		return false, err
	}
	if !ok {
		return true, nil
	}
	_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
	return false, nil
}

// terminate asks a supervisor to end its program.
func terminate(pid int) error { return syscall.Kill(pid, syscall.SIGTERM) }

// childEnded is the signal a process gets when a child of its ends.
var childEnded = []os.Signal{syscall.SIGCHLD}
