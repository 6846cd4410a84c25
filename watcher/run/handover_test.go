//go:build unix

package run_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/vigil-run/vigil"
	"github.com/vigil-run/vigil/store/memstore"
	"github.com/vigil-run/vigil/watcher"
	"github.com/vigil-run/vigil/watcher/run"
)

// TestHandOverAfterTheDaemonGaveUp: the daemon gives up on a start (its
// first stage is killed, as by the start timeout or a shutdown) after the
// second stage was started, in its own session, but before it reported.
// The second stage holds the run: the pid file stays, the next probe
// finds the run starting rather than starting it again, and the program
// runs once. The report the second stage writes then meets a broken pipe
// (the first stage is gone), which does not keep it from recording the
// status.
func TestHandOverAfterTheDaemonGaveUp(t *testing.T) {
	t.Parallel()
	dir, tmp := t.TempDir(), t.TempDir()
	up, hold, count := filepath.Join(tmp, "up"), filepath.Join(tmp, "go"), filepath.Join(tmp, "count")
	c := testConfig(t, dir, nil, nil)
	c.SupervisorEnv = append(c.SupervisorEnv, "VIGIL_TEST_SUPERVISE_HOLD2="+hold, "VIGIL_TEST_SUPERVISE_UP="+up)
	w := run.New(c)
	t.Cleanup(func() { _ = os.WriteFile(hold, nil, 0o600) }) // never leave the second stage held
	canon, err := w.Canonicalize(t.Context(), json.RawMessage(`{"shell":"echo ran >> `+count+`"}`), time.Now())
	if err != nil {
		t.Fatal(err)
	}
	const id = "01HANDOVER"
	probe := func(ctx context.Context) (vigil.Observation, error) {
		return w.Probe(ctx, watcher.Probe{WatchID: id, Kind: vigil.KindRun, Predicate: canon.Predicate, Now: time.Now()})
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	first := make(chan error, 1)
	go func() {
		_, err := probe(ctx)
		first <- err
	}()
	waitFile(up)
	if _, err := os.Stat(up); err != nil {
		t.Fatal("the second stage never came up")
	}
	cancel() // the daemon gives up: its first stage is killed
	if err := <-first; err == nil {
		t.Fatal("the start the daemon gave up on reported no error")
	}
	if _, err := os.Stat(filepath.Join(dir, id+".pid")); err != nil {
		t.Fatalf("the pid file of a run whose second stage is up was removed (%v): the next probe would start it again", err)
	}
	obs, err := probe(context.Background())
	if err != nil || obs.Verdict != vigil.VerdictPending || !strings.HasPrefix(obs.Summary, "starting") {
		t.Fatalf("the next probe = %+v, %v; want pending, starting", obs, err)
	}
	if err := os.WriteFile(hold, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if s := waitStatus(t, dir, id); s.ExitCode == nil || *s.ExitCode != 0 {
		t.Fatalf("status = %+v, want exit 0", s)
	}
	if b, _ := os.ReadFile(count); string(b) != "ran\n" {
		t.Errorf("the program's runs wrote %q, want one run", b)
	}
	if obs, err := probe(context.Background()); err != nil || obs.Verdict != vigil.VerdictSatisfied {
		t.Errorf("the probe after the run = %+v, %v; want satisfied", obs, err)
	}
}

// TestProgramInheritsOnlyItsStdio: the program's open files are its
// stdin, stdout and stderr, none of its supervisor's: not the locked pid
// file (the lock, which says a supervisor is alive, would go on with a
// program that outlives it) nor the write end of the pipe on which the
// second stage reports its start (fd 3, the program's to write into).
func TestProgramInheritsOnlyItsStdio(t *testing.T) {
	t.Parallel()
	if _, err := os.Stat("/proc/self/fd"); err != nil {
		t.Skip("no /proc to list a process's open files")
	}
	if fds, tail := programFiles(t); !slices.Equal(fds, []string{"0", "1", "2"}) {
		t.Errorf("the program's open files are %v, want [0 1 2] (stdin, stdout, stderr):\n%s", fds, tail)
	}
}

// TestProgramInheritsNoFileOfTheDaemons: files the daemon holds open
// without close-on-exec stay with it, and its program gets only its stdin,
// stdout and stderr. Go opens its own files close-on-exec, but a daemon
// holds others: those it was given by whoever started it (a shell's
// redirection, systemd's sockets, a parent's pipe that the parent waits on
// to close), and those a library opens without the flag. Each went through
// both stages of the supervisor to the program, which may run for hours
// and outlive the daemon, holding them open all the while.
//
// Not parallel: the files this test opens are its whole process's, and
// every process any other test started meanwhile would inherit them.
func TestProgramInheritsNoFileOfTheDaemons(t *testing.T) {
	if _, err := os.Stat("/proc/self/fd"); err != nil {
		t.Skip("no /proc to list a process's open files")
	}
	// A file, as a library opens one, and both ends of a pipe, as given by
	// a parent: none close-on-exec.
	fd, err := syscall.Open(filepath.Join(t.TempDir(), "daemon.db"), syscall.O_RDWR|syscall.O_CREAT, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Close(fd)
	var p [2]int
	if err := syscall.Pipe(p[:]); err != nil {
		t.Fatal(err)
	}
	defer syscall.Close(p[0])
	defer syscall.Close(p[1])
	for _, n := range []int{fd, p[0], p[1]} {
		if flags, err := unix.FcntlInt(uintptr(n), unix.F_GETFD, 0); err != nil || flags&unix.FD_CLOEXEC != 0 {
			t.Fatalf("fd %d: flags %#x, %v; want it open without close-on-exec", n, flags, err)
		}
	}
	if fds, tail := programFiles(t); !slices.Equal(fds, []string{"0", "1", "2"}) {
		t.Errorf("the program's open files are %v, want [0 1 2] (stdin, stdout, stderr; the daemon holds a file, %d, and a pipe, %d and %d):\n%s",
			fds, fd, p[0], p[1], tail)
	}
}

// programFiles runs a program under a daemon of this test process and
// returns the numbers of the files it has open, sorted, and the listing
// they were read from.
func programFiles(t *testing.T) ([]string, string) {
	t.Helper()
	d := startDaemon(t, memstore.New(), t.TempDir())
	// ls, a child, lists the shell's files; "; true" keeps the shell from
	// becoming ls.
	w := register(t, d, `{"shell":"ls -l /proc/$$/fd; true"}`, "", 0)
	got := wait(t, d, w.ID, 10*time.Second)
	if got.State != vigil.StateFired {
		t.Fatalf("watch = %s %+v, want fired", got.State, got.LastObservation)
	}
	tail, _ := got.Outcome.Observation.Facts["tail"].(string)
	var fds []string
	for line := range strings.Lines(tail) {
		if before, _, ok := strings.Cut(line, " -> "); ok {
			f := strings.Fields(before)
			fds = append(fds, f[len(f)-1])
		}
	}
	slices.Sort(fds)
	return fds, tail
}

// TestNotStartedAgainElsewhere: a watch whose run was recorded as started
// (its last observation is pending: running) and that has no pid file in
// this run directory was started by another daemon (the replica that held
// its shard before it moved): the probe settles it errored and does not
// run the program a second time.
func TestNotStartedAgainElsewhere(t *testing.T) {
	t.Parallel()
	dir, tmp := t.TempDir(), t.TempDir()
	count := filepath.Join(tmp, "count")
	w := run.New(testConfig(t, dir, nil, nil))
	canon, err := w.Canonicalize(t.Context(), json.RawMessage(`{"shell":"echo ran >> `+count+`"}`), time.Now())
	if err != nil {
		t.Fatal(err)
	}
	last := &vigil.Observation{Verdict: vigil.VerdictPending, Summary: "running (pid 4242)", Facts: map[string]any{"pid": 4242}}
	obs, err := w.Probe(t.Context(), watcher.Probe{WatchID: "01MOVED", Kind: vigil.KindRun, Predicate: canon.Predicate, Now: time.Now(), Last: last})
	if err == nil || !watcher.IsPermanent(err) || !strings.Contains(err.Error(), "another daemon") {
		t.Fatalf("probe of a run started elsewhere = %+v, %v; want a permanent error saying so", obs, err)
	}
	if _, err := os.Stat(filepath.Join(dir, "01MOVED.pid")); !os.IsNotExist(err) {
		t.Errorf("a pid file was made (%v): the run was started again", err)
	}
	if _, err := os.Stat(count); !os.IsNotExist(err) {
		t.Errorf("the program ran here (%v)", err)
	}
}

// TestStartThatNeverHappened: a pid file with no record and no status is
// a start in the making while someone holds it, and one that never
// happened once nobody does: its daemon died after making it and before a
// supervisor wrote into it (a build before this one also left it so when
// it died between making the file and locking it). The probe leaves a
// held one alone, and removes one let go and starts the run, once.
func TestStartThatNeverHappened(t *testing.T) {
	t.Parallel()
	dir, tmp := t.TempDir(), t.TempDir()
	count := filepath.Join(tmp, "count")
	w := run.New(testConfig(t, dir, nil, nil))
	now := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	canon, err := w.Canonicalize(t.Context(), json.RawMessage(`{"shell":"echo ran >> `+count+`"}`), now)
	if err != nil {
		t.Fatal(err)
	}
	const id = "01NEVERHAPPENED"
	probe := func() (vigil.Observation, error) {
		return w.Probe(t.Context(), watcher.Probe{WatchID: id, Kind: vigil.KindRun, Predicate: canon.Predicate, Now: now})
	}
	pidPath := filepath.Join(dir, id+".pid")
	f, err := os.OpenFile(pidPath, os.O_CREATE|os.O_EXCL|os.O_RDWR, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		t.Fatal(err)
	}
	// Held: a daemon is starting the run.
	if obs, err := probe(); err != nil || obs.Verdict != vigil.VerdictPending || obs.Summary != "starting" {
		t.Fatalf("probe of a held pid file with no record = %+v, %v; want pending, starting", obs, err)
	}
	if _, err := os.Stat(pidPath); err != nil {
		t.Fatalf("the held pid file was removed (%v)", err)
	}
	// Let go: the daemon died before any supervisor took it.
	f.Close()
	if obs, err := probe(); err != nil || !strings.HasPrefix(obs.Summary, "running") {
		t.Fatalf("probe of a pid file let go with no record = %+v, %v; want the run started", obs, err)
	}
	if s := waitStatus(t, dir, id); s.ExitCode == nil || *s.ExitCode != 0 {
		t.Fatalf("the run ended by %s, want exit 0", ending(s))
	}
	if obs, err := probe(); err != nil || obs.Verdict != vigil.VerdictSatisfied {
		t.Errorf("the probe after the run = %+v, %v; want satisfied", obs, err)
	}
	if b, _ := os.ReadFile(count); string(b) != "ran\n" {
		t.Errorf("the program's runs wrote %q, want one run", b)
	}
}

// TestEndedBeforeItStarted: a supervisor told to end (SIGTERM: the
// deadline's final probe, a cancel) after it wrote its record but before
// it started the program does not start it: the status says terminated,
// no program. (Before, it started the program and then ended it.)
func TestEndedBeforeItStarted(t *testing.T) {
	t.Parallel()
	dir, tmp := t.TempDir(), t.TempDir()
	up, hold := filepath.Join(tmp, "up"), filepath.Join(tmp, "go")
	c := testConfig(t, dir, nil, nil)
	c.SupervisorEnv = append(c.SupervisorEnv, "VIGIL_TEST_SUPERVISE_HOLD3="+hold, "VIGIL_TEST_SUPERVISE_UP="+up)
	w := run.New(c)
	t.Cleanup(func() { _ = os.WriteFile(hold, nil, 0o600) }) // never leave the second stage held
	canon, err := w.Canonicalize(t.Context(), json.RawMessage(`{"shell":"sleep 30"}`), time.Now())
	if err != nil {
		t.Fatal(err)
	}
	const id = "01ENDEDEARLY"
	probe := func(final bool) (vigil.Observation, error) {
		return w.Probe(t.Context(), watcher.Probe{WatchID: id, Kind: vigil.KindRun, Predicate: canon.Predicate, Now: time.Now(), Final: final})
	}
	first := make(chan error, 1)
	go func() {
		_, err := probe(false)
		first <- err
	}()
	waitFile(up)
	if _, err := os.Stat(up); err != nil {
		t.Fatal("the second stage never came up")
	}
	// The deadline: the final probe finds the run starting and ends it.
	if obs, err := probe(true); err != nil || obs.Verdict != vigil.VerdictPending {
		t.Fatalf("final probe = %+v, %v; want pending, its supervisor terminated", obs, err)
	}
	// The SIGTERM lets the second stage go (TestMain); the hold file is
	// written only at cleanup. Written here it could be seen before the
	// signal reached the supervisor, which then rightly started the
	// program: a SIGTERM that never comes fails the start at its timeout.
	if err := <-first; err != nil {
		t.Fatalf("the start = %v", err)
	}
	s := waitStatus(t, dir, id)
	if s.Pid != 0 || !s.Terminated {
		t.Fatalf("status = %+v, want terminated with no program started", s)
	}
	if obs, err := probe(false); err != nil || obs.Verdict != vigil.VerdictFailed || obs.Summary != "terminated before it started" {
		t.Errorf("the probe after = %+v, %v; want failed, terminated before it started", obs, err)
	}
}
