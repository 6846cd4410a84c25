package folder_test

import (
	"testing"

	"github.com/vigil-run/vigil/watcher/folder"
	"github.com/vigil-run/vigil/watcher/watchertest"
)

// FuzzCanonicalize: predicate decoding never panics, and what it accepts
// has one stable spelling (see watchertest.CheckCanonicalize): globs split
// at commas outside braces, settle as a string or seconds, on_change in
// its three spellings. Seeds are in testdata/fuzz/FuzzCanonicalize.
func FuzzCanonicalize(f *testing.F) {
	w := folder.New(folder.Config{Roots: []string{"/srv", "/tmp"}})
	f.Fuzz(func(t *testing.T, raw []byte) { watchertest.CheckCanonicalize(t, w, raw) })
}
