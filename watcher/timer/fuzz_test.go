package timer_test

import (
	"testing"

	"github.com/vigil-run/vigil/watcher/timer"
	"github.com/vigil-run/vigil/watcher/watchertest"
)

// FuzzCanonicalize: predicate decoding never panics, and what it accepts
// has one stable spelling (see watchertest.CheckCanonicalize). Seeds are
// in testdata/fuzz/FuzzCanonicalize.
func FuzzCanonicalize(f *testing.F) {
	w := timer.New(timer.Config{})
	f.Fuzz(func(t *testing.T, raw []byte) { watchertest.CheckCanonicalize(t, w, raw) })
}
