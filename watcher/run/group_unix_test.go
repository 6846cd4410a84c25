//go:build unix

package run_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/vigil-run/vigil"
	"github.com/vigil-run/vigil/store/memstore"
	"github.com/vigil-run/vigil/watcher/run"
)

// TestRunDeadlineKillsTheGroup: at the deadline the whole process group
// is terminated, a background child included, and the watch expires.
func TestRunDeadlineKillsTheGroup(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	bg := filepath.Join(t.TempDir(), "bg.pid")
	d := startDaemon(t, memstore.New(), dir)
	w := register(t, d, `{"shell":"sleep 60 & echo $! > `+bg+`; sleep 60"}`, "2s", 0)
	got := wait(t, d, w.ID, 10*time.Second)
	if got.State != vigil.StateExpired || !strings.Contains(got.LastObservation.Summary, "terminated") {
		t.Fatalf("watch = %s %+v, want expired with its run terminated", got.State, got.LastObservation)
	}
	// The supervisor records the end once the group is gone.
	status := filepath.Join(dir, w.ID+".json")
	for end := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if _, err := os.Stat(status); err == nil {
			break
		}
		if time.Now().After(end) {
			t.Fatal("no status file after the deadline")
		}
	}
	b, _ := os.ReadFile(status)
	var s run.Status
	if err := json.Unmarshal(b, &s); err != nil || !s.Terminated || s.Signal != "SIGTERM" {
		t.Fatalf("status = %s, want terminated by SIGTERM", b)
	}
	raw, err := os.ReadFile(bg)
	if err != nil {
		t.Fatal(err)
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(raw)))
	if alive(pid) {
		t.Fatalf("the background child %d outlived the deadline", pid)
	}
}

// TestRunCancelKillsTheGroup: cancelling a run watch ends its program and
// what it started, as its deadline would.
func TestRunCancelKillsTheGroup(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	bg := filepath.Join(t.TempDir(), "bg.pid")
	d := startDaemon(t, memstore.New(), dir)
	w := register(t, d, `{"shell":"sleep 60 & echo $! > `+bg+`; sleep 60"}`, "1h", 0)
	bgPid := waitPid(t, bg)
	got, err := d.eng.Cancel(context.Background(), w.ID)
	if err != nil || got.State != vigil.StateCancelled {
		t.Fatalf("Cancel = %v, %v; want cancelled", got, err)
	}
	s := waitStatus(t, dir, w.ID)
	if !s.Terminated || s.Signal != "SIGTERM" {
		t.Fatalf("status = %+v, want terminated by SIGTERM", s)
	}
	if alive(bgPid) {
		t.Fatalf("the background child %d outlived the cancel", bgPid)
	}
}

// waitPid waits for a program to write its pid into path.
func waitPid(t *testing.T, path string) int {
	t.Helper()
	for end := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if raw, err := os.ReadFile(path); err == nil {
			if pid, err := strconv.Atoi(strings.TrimSpace(string(raw))); err == nil && pid > 0 {
				return pid
			}
		}
		if time.Now().After(end) {
			t.Fatalf("no pid in %s", path)
		}
	}
}

// alive reports whether pid is a live process (not gone, not a zombie).
func alive(pid int) bool {
	if pid <= 0 || syscall.Kill(pid, 0) != nil {
		return false
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true
	}
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
	return len(f) == 0 || f[0] != "Z"
}

// TestRunDeadlinePassedWhileDownEndsTheGroup: a run whose deadline passed
// while no daemon ran is expired at the next start (down_past_deadline),
// and its program is ended then, as its deadline would have ended it.
func TestRunDeadlinePassedWhileDownEndsTheGroup(t *testing.T) {
	t.Parallel()
	st, dir := memstore.New(), t.TempDir()
	w, pid := runThenStop(t, st, dir)

	// The next start is past the deadline: it passed while none ran.
	d2 := startDaemonAt(t, st, dir, func() time.Time { return time.Now().Add(2 * time.Hour) })
	got, err := d2.eng.Watch(context.Background(), w.ID)
	if err != nil || got.State != vigil.StateExpired {
		t.Fatalf("after the start: %+v, %v; want expired", got, err)
	}
	wantEnded(t, dir, w.ID, pid, "its watch's expiry")
}

// TestRunErroredEndsTheGroup: a run watch that settles errored while its
// program runs (here: the next start may not run programs) has its
// program ended, as a cancel would: nothing of the watch is left to cancel.
func TestRunErroredEndsTheGroup(t *testing.T) {
	t.Parallel()
	st, dir := memstore.New(), t.TempDir()
	w, pid := runThenStop(t, st, dir)

	d2 := startDaemonWith(t, st, dir, nil, func(c *run.Config) { c.AllowExec = false })
	got, err := d2.eng.Check(context.Background(), w.ID)
	if err != nil || got.State != vigil.StateErrored {
		t.Fatalf("checked at the next start: %+v, %v; want errored", got, err)
	}
	wantEnded(t, dir, w.ID, pid, "its errored watch")
}

// runThenStop registers a run watch on a daemon over st and dir, waits for
// its program to start and stops the daemon, leaving the program running.
func runThenStop(t *testing.T, st vigil.Store, dir string) (*vigil.Watch, int) {
	t.Helper()
	bg := filepath.Join(t.TempDir(), "bg.pid")
	d := startDaemon(t, st, dir)
	w := register(t, d, `{"shell":"echo $$ > `+bg+`; sleep 60"}`, "1h", 0)
	pid := waitPid(t, bg)
	t.Cleanup(func() { _ = syscall.Kill(-pid, syscall.SIGKILL) })
	d.stop()
	return w, pid
}

// wantEnded waits for the status of watch id's run and fails t unless its
// program pid was ended by SIGTERM; what names what should have ended it.
func wantEnded(t *testing.T, dir, id string, pid int, what string) {
	t.Helper()
	s := waitStatus(t, dir, id)
	if !s.Terminated || s.Signal != "SIGTERM" {
		t.Fatalf("status = %+v, want the program ended by SIGTERM", s)
	}
	if alive(pid) {
		t.Fatalf("the program %d outlived %s", pid, what)
	}
}

// TestRunTerminatedExitZeroIsNotSuccess: a program that answers the
// SIGTERM its supervisor passes on by exiting 0 was ended, not done: its
// watch does not fire, neither at a probe nor, at a start past the
// deadline, by the recorded answer. Here the supervisor is sent SIGTERM
// from outside (an operator, a shutdown) while no daemon runs.
func TestRunTerminatedExitZeroIsNotSuccess(t *testing.T) {
	t.Parallel()
	for _, past := range []bool{false, true} {
		t.Run(fmt.Sprintf("past deadline %v", past), func(t *testing.T) {
			t.Parallel()
			st, dir := memstore.New(), t.TempDir()
			bg := filepath.Join(t.TempDir(), "bg.pid")
			d := startDaemon(t, st, dir)
			w := register(t, d, `{"shell":"trap 'exit 0' TERM; echo $$ > `+bg+`; sleep 60 & wait"}`, "1h", 0)
			pid := waitPid(t, bg)
			t.Cleanup(func() { _ = syscall.Kill(-pid, syscall.SIGKILL) })
			d.stop()
			raw, err := os.ReadFile(filepath.Join(dir, w.ID+".pid"))
			if err != nil {
				t.Fatal(err)
			}
			var rec struct {
				Supervisor int `json:"supervisor"`
			}
			if err := json.Unmarshal(raw, &rec); err != nil || rec.Supervisor <= 0 {
				t.Fatalf("pid record %s: %v", raw, err)
			}
			if err := syscall.Kill(rec.Supervisor, syscall.SIGTERM); err != nil {
				t.Fatal(err)
			}
			if s := waitStatus(t, dir, w.ID); s.ExitCode == nil || *s.ExitCode != 0 {
				t.Fatalf("status = %+v, want exit 0 after the supervisor passed SIGTERM on", s)
			}
			now := func() time.Time { return time.Now() }
			if past {
				now = func() time.Time { return time.Now().Add(2 * time.Hour) }
			}
			d2 := startDaemonAt(t, st, dir, now)
			// Past the deadline the start settles it; else a probe does.
			check, want := d2.eng.Check, vigil.StateFailed
			if past {
				check, want = d2.eng.Watch, vigil.StateExpired
			}
			got, err := check(context.Background(), w.ID)
			if err != nil && !past {
				// The new daemon's first probe, made as it starts, may
				// have settled it before this check: read it.
				got, err = d2.eng.Watch(context.Background(), w.ID)
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.State != want {
				t.Fatalf("watch = %s %+v, want %s: the program was ended, it did not finish", got.State, got.LastObservation, want)
			}
		})
	}
}
