//go:build unix

package cputime_test

import (
	"testing"

	"github.com/vigil-run/vigil/internal/cputime"
)

// TestSelfGrows: CPU spent between two readings shows in the second.
func TestSelfGrows(t *testing.T) {
	before := cputime.Self()
	x := 0
	for n := 0; n < 1000 && (x == 0 || cputime.Self() == before); n++ {
		for i := range 1_000_000 {
			x += i
		}
	}
	if x == 0 || cputime.Self() <= before {
		t.Fatal("the CPU time did not grow")
	}
}
