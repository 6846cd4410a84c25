package proc

import (
	"math"

	"golang.org/x/sys/unix"
)

// fdDir lists the files this process holds open, one name a descriptor.
const fdDir = "/proc/self/fd"

// closeRangeOnExec marks every fd from first up close-on-exec in one call:
// close_range(2) with CLOSE_RANGE_CLOEXEC, which Linux has since 5.11
// (before, or under a seccomp filter that forbids it, it fails: ENOSYS,
// EINVAL or EPERM).
func closeRangeOnExec(first int) error {
	return unix.CloseRange(uint(first), math.MaxUint32, unix.CLOSE_RANGE_CLOEXEC)
}
