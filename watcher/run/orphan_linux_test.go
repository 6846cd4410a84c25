package run_test

import (
	"context"
	"encoding/json"
	"path/filepath"
	"testing"

	"github.com/vigil-run/vigil"
	"github.com/vigil-run/vigil/store/memstore"
)

// escape is a shell line that starts a process outside the program's
// process group and session (setsid -f forks, so it is orphaned at
// once), which writes its pid into path and sleeps.
func escape(path string) string {
	return `setsid -f sh -c 'echo $$ > ` + path + `.tmp; mv ` + path + `.tmp ` + path + `; exec sleep 60' </dev/null >/dev/null 2>&1`
}

// TestRunCancelKillsWhatLeftTheGroup: a process the program started in a
// session of its own (setsid, as a daemon does) is ended with the run
// when the watch is cancelled: a signal to the process group never
// reached it, and it ran on after the run's end.
func TestRunCancelKillsWhatLeftTheGroup(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	bg := filepath.Join(t.TempDir(), "bg.pid")
	d := startDaemon(t, memstore.New(), dir)
	w := register(t, d, `{"shell":"`+jsonEscape(escape(bg))+`; sleep 60"}`, "1h", 0)
	bgPid := waitPid(t, bg)
	got, err := d.eng.Cancel(context.Background(), w.ID)
	if err != nil || got.State != vigil.StateCancelled {
		t.Fatalf("Cancel = %v, %v; want cancelled", got, err)
	}
	if s := waitStatus(t, dir, w.ID); !s.Terminated {
		t.Fatalf("status = %+v, want terminated", s)
	}
	if alive(bgPid) {
		t.Fatalf("the process %d that left the group outlived the cancel", bgPid)
	}
}

// TestRunExitKillsWhatLeftTheGroup: a program that exits 0 leaving a
// daemon behind (setsid) settles the watch satisfied, and the daemon is
// ended with the run.
func TestRunExitKillsWhatLeftTheGroup(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	bg := filepath.Join(t.TempDir(), "bg.pid")
	d := startDaemon(t, memstore.New(), dir)
	w := register(t, d, `{"shell":"`+jsonEscape(escape(bg)+`; while [ ! -s `+bg+` ]; do sleep 0.01; done`)+`"}`, "1h", 0)
	s := waitStatus(t, dir, w.ID)
	if s.ExitCode == nil || *s.ExitCode != 0 || s.Terminated {
		t.Fatalf("status = %+v, want exit 0", s)
	}
	if pid := waitPid(t, bg); alive(pid) {
		t.Fatalf("the process %d that left the group outlived the run", pid)
	}
}

// jsonEscape spells s as the inside of a JSON string.
func jsonEscape(s string) string {
	b, _ := json.Marshal(s)
	return string(b[1 : len(b)-1])
}
