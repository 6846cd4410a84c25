package file_test

import (
	"testing"

	"github.com/vigil-run/vigil/watcher/file"
	"github.com/vigil-run/vigil/watcher/watchertest"
)

// FuzzCanonicalize: predicate decoding never panics, and what it accepts
// has one stable spelling (see watchertest.CheckCanonicalize). Seeds are
// in testdata/fuzz/FuzzCanonicalize.
func FuzzCanonicalize(f *testing.F) {
	w := file.New(file.Config{Roots: []string{"/srv", "/tmp"}})
	f.Fuzz(func(t *testing.T, raw []byte) { watchertest.CheckCanonicalize(t, w, raw) })
}
