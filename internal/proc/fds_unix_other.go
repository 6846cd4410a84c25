//go:build unix && !linux

package proc

import (
	"errors"
	"runtime"
)

// fdDir lists the files this process holds open, one name a descriptor:
// macOS's /dev/fd does. Elsewhere none is trusted: FreeBSD's /dev/fd
// holds only 0, 1 and 2 unless fdescfs is mounted over it.
var fdDir = map[bool]string{true: "/dev/fd"}[runtime.GOOS == "darwin"]

// closeRangeOnExec says that this system has no call to mark a range of
// fds close-on-exec that package unix offers.
func closeRangeOnExec(int) error { return errors.ErrUnsupported }
