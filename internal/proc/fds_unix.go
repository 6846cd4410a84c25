//go:build unix

package proc

import (
	"errors"
	"os"
	"strconv"
	"syscall"
)

// CloseOnExecFrom marks every file this process holds open from fd first
// up close-on-exec, so that a program it starts inherits only its stdio
// and the files handed to it by name (exec.Cmd.ExtraFiles, whose copies in
// the child lose the flag). `vigil serve` calls it as it starts, so that
// no program the daemon starts inherits what the daemon was given, and a
// run watch's supervisor calls it as it starts too.
//
// They are marked, not closed: a Go process holds files of its own from fd
// 3 up (the runtime's epoll and the eventfd or pipe that wakes it, the
// files of a test binary), which closing would take from under it, and a
// number closed could be taken at once by another file. Go opens its own
// files close-on-exec, so marking leaves this process as it was and drops
// at exec only the files it holds without the flag. The flag is the
// descriptor's, not the open file's: the process that handed a file down
// keeps its copy as it was, and this process uses its own as before.
//
// It marks them all in one call where the system can (close_range(2) on
// Linux 5.11 and later), else each file the system lists as open (fdDir),
// else each number below the limit on open files, at most maxFDs of them.
func CloseOnExecFrom(first int) {
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

// maxFDs bounds the numbers CloseOnExecFrom marks one by one when nothing
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
