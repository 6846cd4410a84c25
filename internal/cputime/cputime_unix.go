//go:build unix

package cputime

import (
	"syscall"
	"time"
)

// Self is the user and system CPU time this process has used so far,
// every thread (the collector's workers too), from getrusage; 0 if it
// cannot be read.
func Self() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
