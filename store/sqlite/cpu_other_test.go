//go:build !unix

package sqlite

import "time"

// processCPU is not measured here: the benchmarks' cpu-ms/op reads 0.
func processCPU() time.Duration { return 0 }
