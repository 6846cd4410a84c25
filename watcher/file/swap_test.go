//go:build unix

package file

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/vigil-run/vigil"
	"github.com/vigil-run/vigil/watcher"
)

// TestRootsNotLeftBetweenLookAndRead: with roots, what a probe reads is
// what it resolved inside them. A file swapped, between the probe's look
// and its read, for a link to a file outside the roots is not read
// through the link; nor is a link that pointed nowhere when the path was
// resolved and points outside once the probe reads. (Before, both read
// the file outside the roots and answered from it.)
func TestRootsNotLeftBetweenLookAndRead(t *testing.T) {
	root, outside := t.TempDir(), t.TempDir()
	secret := filepath.Join(outside, "secret")
	for _, tt := range []struct {
		name  string
		setup func(path string) // before the probe
		swap  func(path string) // between its look and its read
	}{
		{"a file swapped for a link", func(path string) {
			must(t, os.WriteFile(path, []byte("nothing here\n"), 0o600))
		}, func(path string) {
			must(t, os.Remove(path))
			must(t, os.Symlink(secret, path))
		}},
		{"a link to nothing that comes to point outside", func(path string) {
			must(t, os.Symlink(secret, path))
		}, func(string) {}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			os.Remove(secret)
			path := filepath.Join(root, "f")
			os.Remove(path)
			tt.setup(path)
			afterLook = func(string) {
				tt.swap(path)
				must(t, os.WriteFile(secret, []byte("the needle\n"), 0o600))
			}
			defer func() { afterLook = nil }()
			w := New(Config{Roots: []string{root}})
			pred, _ := json.Marshal(map[string]any{"path": path, "contains": "needle"})
			obs, _ := watcher.Run(context.Background(), w, watcher.Probe{WatchID: "w", Kind: vigil.KindFile, Predicate: pred})
			if obs.Verdict == vigil.VerdictSatisfied {
				t.Fatalf("Probe = %+v: answered from a file outside the roots", obs)
			}
		})
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
