//go:build unix

package run

import (
	"errors"
	"os"
	"os/exec"
	"strconv"
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

// closeOnExecFrom marks every file this process holds open from fd first
// up close-on-exec, so that a program it starts inherits only its stdio
// and the files handed to it by name (exec.Cmd.ExtraFiles, whose copies in
// the child lose the flag).
//
// They are marked, not closed: a Go process holds files of its own from fd
// 3 up (the runtime's epoll and the eventfd or pipe that wakes it, the
// files of a test binary), which closing would take from under it, and a
// number closed could be taken at once by another file. Go opens its own
// files close-on-exec, so marking leaves this process as it was and drops
// at exec only the files it holds without the flag.
//
// It marks them all in one call where the system can (close_range(2) on
// Linux 5.11 and later), else each file the system lists as open (fdDir),
// else each number below the limit on open files, at most maxFDs of them.
func closeOnExecFrom(first int) {
	if closeRangeOnExec(first) == nil {
		return
	}
	if err := closeOnExecListed(first, fdDir); err == nil {
		return
	}
	var lim syscall.Rlimit
	n := uint64(maxFDs)
	if syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim) == nil {
		n = min(uint64(lim.Cur), n)
	}
	closeOnExecBelow(first, int(n))
}

// maxFDs bounds the numbers closeOnExecFrom marks one by one when nothing
// lists the open files: Go raises its limit on open files to the hard
// limit, which can be a billion.
const maxFDs = 1 << 20

// closeOnExecListed marks close-on-exec each file from fd first up that
// dir, a directory named by file descriptor, lists.
func closeOnExecListed(first int, dir string) error {
	if dir == "" {
		return errors.ErrUnsupported
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range ents {
		// The directory's own file, listed too, was Go's, and is closed.
		if fd, err := strconv.Atoi(e.Name()); err == nil && fd >= first {
			syscall.CloseOnExec(fd)
		}
	}
	return nil
}

// closeOnExecBelow marks close-on-exec every fd from first up to n,
// exclusive; a number that is not open is let be.
func closeOnExecBelow(first, n int) {
	for fd := first; fd < n; fd++ {
		syscall.CloseOnExec(fd)
	}
}
