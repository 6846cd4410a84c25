//go:build !linux

package proc

import (
	"errors"
	"fmt"
	"os"
	"time"
)

// canReap says this system has no child subreapers that package unix
// offers: a program's descendants that leave its process group are not
// found (FreeBSD's procctl PROC_REAP_ACQUIRE is not used).
const canReap = false

// BecomeSubreaper fails: only Linux has child subreapers here.
func BecomeSubreaper() error { return errors.ErrUnsupported }

// KillOrphans has no orphans to find where nothing is a subreaper.
func KillOrphans(time.Duration) {}

// ReapZombies has nothing to reap where nothing is a subreaper.
func ReapZombies(int) {}

// Reap refuses: only Linux has child subreapers here, and a Runner
// starts no reaper elsewhere.
func Reap([]string) int {
	fmt.Fprintln(os.Stderr, "vigil reap: needs Linux (child subreapers)")
	return 2
}
