// Package cputime reads the CPU time this process has used, for the
// benchmarks that report what an operation cost where the wall clock, on a
// machine shared with other work, does not say.
package cputime
