package run_test

import (
	"testing"

	"github.com/vigil-run/vigil/watcher/run"
	"github.com/vigil-run/vigil/watcher/watchertest"
)

// FuzzCanonicalize: predicate decoding never panics, and what it accepts
// has one stable spelling (see watchertest.CheckCanonicalize). Seeds are
// in testdata/fuzz/FuzzCanonicalize.
func FuzzCanonicalize(f *testing.F) {
	w := run.New(run.Config{AllowExec: true, Dir: f.TempDir()})
	f.Fuzz(func(t *testing.T, raw []byte) { watchertest.CheckCanonicalize(t, w, raw) })
}
