//go:build !unix

package httpwatch_test

import "time"

// cpuTime is not measured here: the cpu-µs/probe metric reads 0.
func cpuTime() time.Duration { return 0 }
