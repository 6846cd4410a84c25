//go:build unix

package run

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/vigil-run/vigil/watcher"
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

// TestReclaim: reclaim removes a pid file, as a start that never happened,
// only as it finds it under the file's own lock: nobody else holds it, it
// names neither a supervisor nor a program, and there is no status. Every
// other pid file stays where it is.
func TestReclaim(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name   string
		rec    string
		held   bool // another open file holds the lock
		status bool // the status file is there
		gone   bool
	}{
		{"let go, no record", "", false, false, true},
		{"let go, a record naming nobody", `{"supervisor":0,"pid":0}`, false, false, true},
		{"held, no record", "", true, false, false},
		{"names a supervisor", `{"supervisor":41,"pid":0}`, false, false, false},
		{"names a program", `{"supervisor":0,"pid":42}`, false, false, false},
		{"record cut short", `{"supervisor":4`, false, false, false},
		{"status written", "", false, true, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			w := New(Config{AllowExec: true, Dir: dir})
			const id = "01RECLAIM"
			path := filepath.Join(dir, id+".pid")
			if err := os.WriteFile(path, []byte(tt.rec), 0o600); err != nil {
				t.Fatal(err)
			}
			if tt.held {
				f, err := os.Open(path)
				if err != nil {
					t.Fatal(err)
				}
				defer f.Close()
				if err := lock(f); err != nil {
					t.Fatal(err)
				}
			}
			if tt.status {
				if err := os.WriteFile(filepath.Join(dir, id+".json"), []byte(`{"watch_id":"`+id+`"}`), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			gone, err := w.reclaim(id)
			if err != nil || gone != tt.gone {
				t.Errorf("reclaim = %v, %v; want %v", gone, err, tt.gone)
			}
			if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) != tt.gone {
				t.Errorf("after reclaim the pid file's stat says %v, want it gone: %v", err, tt.gone)
			}
		})
	}
}

// TestMakePidFileWithoutHardLinks: where the run directory cannot hold a
// hard link (vfat, exFAT, some FUSE mounts), making the pid file fails as
// a permanent error saying so, and leaves nothing behind.
func TestMakePidFileWithoutHardLinks(t *testing.T) {
	dir := t.TempDir()
	link = func(string, string) error { return &os.LinkError{Op: "link", Err: syscall.EPERM} }
	defer func() { link = os.Link }()
	_, err := makePidFile(dir, "01NOLINKS")
	if err == nil || errors.Is(err, fs.ErrExist) || !watcher.IsPermanent(err) || !strings.Contains(err.Error(), "hard links") {
		t.Fatalf("makePidFile where the link fails = %v, want a permanent error saying runs need hard links", err)
	}
	if left, _ := os.ReadDir(dir); len(left) != 0 {
		t.Fatalf("left %v behind", left)
	}
}

// TestFailedStartKeepsAStartedRecord: a start whose supervisor reports
// failure after a second stage wrote its record into the pid file (killed
// after it started the program, before it said so) may have started the
// program: the pid file stays, and the next probe settles the watch
// errored rather than start the program a second time.
func TestFailedStartKeepsAStartedRecord(t *testing.T) {
	t.Parallel()
	dir, tmp := t.TempDir(), t.TempDir()
	starts := filepath.Join(tmp, "starts")
	// Fd 3 is the locked pid file the daemon hands on.
	fake := `echo x >> ` + starts + `; printf '{"supervisor":2147483000,"pid":2147483001}' >&3; echo "the supervisor exited without a report" >&2; exit 1`
	w := New(Config{AllowExec: true, Dir: dir, SupervisorArgv: []string{"/bin/sh", "-c", fake}})
	const id = "01FAILEDSTART"
	p := watcher.Probe{WatchID: id, Kind: "run", Predicate: []byte(`{"argv":["/bin/true"]}`)}
	if _, err := w.Probe(context.Background(), p); err == nil || watcher.IsPermanent(err) {
		t.Fatalf("first probe = %v, want the start's passing failure", err)
	}
	if _, err := os.Stat(filepath.Join(dir, id+".pid")); err != nil {
		t.Fatalf("the pid file naming a supervisor was removed: %v", err)
	}
	_, err := w.Probe(context.Background(), p)
	if !watcher.IsPermanent(err) {
		t.Errorf("second probe = %v, want the supervisor's silent end (permanent)", err)
	}
	if b, _ := os.ReadFile(starts); strings.Count(string(b), "x") != 1 {
		t.Fatalf("the supervisor was started %d times, want once", strings.Count(string(b), "x"))
	}
}

// TestMakePidFileSyncsItsName: the pid file's name is synced to disk
// (its directory fsynced) once it is there, before makePidFile returns and
// a start is made: a crash after the program started must not lose the
// name, which would let the run be taken for one never started.
func TestMakePidFileSyncsItsName(t *testing.T) {
	dir := t.TempDir()
	const id = "01SYNCED"
	var synced []string
	syncDir = func(d string) error {
		if _, err := os.Stat(filepath.Join(d, id+".pid")); err == nil {
			synced = append(synced, d)
		}
		return nil
	}
	defer func() { syncDir = syncDirOS }()
	f, err := makePidFile(dir, id)
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	if len(synced) != 1 || synced[0] != dir {
		t.Fatalf("directories synced with the pid file in them: %q, want %q once", synced, dir)
	}
}
