//go:build unix

package run

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
)

// TestMakePidFile: a pid file is made once, locked from the moment it is
// there: a second make finds it (fs.ErrExist) and leaves it as it was,
// record and lock, rather than replace it (a second start), and no
// temporary name is left in the run directory.
func TestMakePidFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	const id = "01MADEONCE"
	path := filepath.Join(dir, id+".pid")
	f, err := makePidFile(dir, id)
	if err != nil {
		t.Fatalf("makePidFile = %v", err)
	}
	defer f.Close()
	if held, err := locked(path); err != nil || !held {
		t.Fatalf("locked(pid file) = %v, %v; want held by its maker", held, err)
	}
	const rec = `{"supervisor":7,"pid":8}`
	if _, err := f.WriteAt([]byte(rec), 0); err != nil {
		t.Fatal(err)
	}
	if g, err := makePidFile(dir, id); !errors.Is(err, fs.ErrExist) {
		if g != nil {
			g.Close()
		}
		t.Fatalf("a second makePidFile = %v, want fs.ErrExist", err)
	}
	if b, err := os.ReadFile(path); err != nil || string(b) != rec {
		t.Errorf("after a second make the pid file holds %q, %v; want the first's record", b, err)
	}
	if held, err := locked(path); err != nil || !held {
		t.Errorf("after a second make locked(pid file) = %v, %v; want still held", held, err)
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	if len(names) != 1 || names[0] != id+".pid" {
		t.Errorf("the run directory holds %q, want the pid file alone", names)
	}
}
