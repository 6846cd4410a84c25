package command_test

import (
	"testing"

	"github.com/vigil-run/vigil/watcher/command"
	"github.com/vigil-run/vigil/watcher/watchertest"
)

// FuzzCanonicalize: predicate decoding never panics, and what it accepts
// has one stable spelling (see watchertest.CheckCanonicalize). Seeds are
// in testdata/fuzz/FuzzCanonicalize.
func FuzzCanonicalize(f *testing.F) {
	w := command.New(command.Config{AllowExec: true})
	f.Fuzz(func(t *testing.T, raw []byte) { watchertest.CheckCanonicalize(t, w, raw) })
}
