//go:build unix

package proc

import (
	"os"
	"strconv"
	"testing"

	"golang.org/x/sys/unix"
)

// TestCloseOnExecFrom: each way CloseOnExecFrom has of marking the files
// from an fd up close-on-exec marks a file opened there without the flag.
// A way this system lacks is skipped; the last needs nothing.
//
// Not parallel: the file this test holds without close-on-exec is its
// whole process's, and every process any other test started meanwhile
// would inherit it.
func TestCloseOnExecFrom(t *testing.T) {
	for _, tt := range []struct {
		name string
		mark func(fd int) error
	}{
		{"CloseOnExecFrom", func(fd int) error { CloseOnExecFrom(fd); return nil }},
		{"in one call", closeRangeOnExec},
		{"as listed", func(fd int) error { return closeOnExecListed(fd, fdDir) }},
		{"one by one", func(fd int) error { closeOnExecBelow(fd, fd+1); return nil }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f, err := os.Open(os.DevNull)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			// Its copy above every file open, and without the flag: the
			// files of this process from there up are that copy alone.
			fd := aboveOpenFiles(t)
			if err := unix.Dup2(int(f.Fd()), fd); err != nil {
				t.Fatal(err)
			}
			defer unix.Close(fd)
			if flags, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0); err != nil || flags&unix.FD_CLOEXEC != 0 {
				t.Fatalf("fd %d: flags %#x, %v; want it open without close-on-exec", fd, flags, err)
			}
			if err := tt.mark(fd); err != nil {
				t.Skipf("not on this system: %v", err)
			}
			if flags, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0); err != nil || flags&unix.FD_CLOEXEC == 0 {
				t.Errorf("fd %d after: flags %#x, %v; want close-on-exec", fd, flags, err)
			}
		})
	}
}

// aboveOpenFiles returns an fd above every file this process has open, as
// fdDir lists them, or 1024 where nothing lists them.
func aboveOpenFiles(t *testing.T) int {
	t.Helper()
	if fdDir == "" {
		return 1024
	}
	ents, err := os.ReadDir(fdDir)
	if err != nil {
		t.Fatal(err)
	}
	top := 2
	for _, e := range ents {
		if fd, err := strconv.Atoi(e.Name()); err == nil {
			top = max(top, fd)
		}
	}
	return top + 1
}
