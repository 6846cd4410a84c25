//go:build !unix

package postgres

import "time"

// selfCPU is not measured here: client-cpu-µs/settle reads 0.
func selfCPU() time.Duration { return 0 }
