//go:build unix

package scheduler_test

import (
	"syscall"
	"time"
)

// processCPU is the CPU time this process used so far, every thread
// (the collector's workers too): on a machine shared with other work it
// says what an op cost where the wall clock does not.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
