package proc

import (
	"os"
	"sync/atomic"
)

// servesReap says ServeReap was called: this process's executable runs
// Reap when started with the argument "reap".
var servesReap atomic.Bool

// ServeReap records that this process's executable, started with the
// argument "reap" (`vigil reap`), runs Reap: the vigil binary says so at
// the start of its main, and only it, since it alone dispatches that
// argument to Reap. A program that embeds the daemon is not the vigil
// binary and would take the argument as its own, so without this
// SelfReaper is nil and its deliveries start their programs directly.
func ServeReap() { servesReap.Store(true) }

// SelfReaper returns the argv that starts this executable as a reaper
// for a Runner's Reaper: its path and "reap", found as a run watch's
// supervisor is (os.Executable). It is nil unless ServeReap was called,
// on a system without child subreapers (only Linux has them), and when
// the executable cannot be found.
func SelfReaper() []string {
	if !servesReap.Load() || !canReap {
		return nil
	}
	exe, err := os.Executable()
	if err != nil {
		return nil
	}
	return []string{exe, "reap"}
}
