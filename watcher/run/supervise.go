package run

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/vigil-run/vigil/internal/proc"
)

// maxJob bounds the job a supervisor reads.
const maxJob = 8 << 20

// Supervise is the body of the hidden command `vigil supervise`, which the
// run watcher starts with a job on stdin. It returns the process's exit
// code.
//
// It runs in two stages. The first, started by the daemon with the pid
// file open and locked as its fd 3, starts the second in a new session (so
// that it survives the daemon), hands it the job and the pid file (its fd
// 4; the lock goes with it, so the run is held without a gap from the
// daemon's start to the end of the second stage), waits until it reports
// that it has started the program, prints "ready PID" and exits, so the
// daemon never keeps a child of its own. The second starts the program in its
// own process group, keeps the end of its output, ends the group on
// SIGTERM (SIGTERM, then SIGKILL after the job's grace), and when the
// program has exited kills what is left of the group and, on Linux, where
// it is a child subreaper (proc.BecomeSubreaper), every process the
// program started that left the group (setsid, a daemon), then writes the
// status file atomically and exits.
//
// Each stage hands on only the files it means to: the second stage gets
// its stdin (the job), the report pipe and the pid file, the program its
// stdin, stdout and stderr, and neither gets any other file the stage was
// started with. A file the daemon holds without close-on-exec (one it was
// given by whoever started it: a shell's redirection, a socket, a pipe its
// parent waits on to close; one a library opened so) is inherited by the
// first stage, and without this went on to a program that may run for
// hours and outlive the daemon.
func Supervise(stdin io.Reader, stdout, stderr io.Writer) int {
	// `vigil serve` marks the files it was started with so at its start,
	// but not one a library opens so later, nor those of a process that
	// runs the daemon otherwise (a test's): marking them here too, in the
	// supervisor, keeps every such file from the program whatever it came
	// from. The files a stage hands on it passes by name (ExtraFiles),
	// which gives the child copies without the flag.
	proc.CloseOnExecFrom(3)
	b, err := io.ReadAll(io.LimitReader(stdin, maxJob))
	if err != nil {
		fmt.Fprintf(stderr, "vigil supervise: reading the job: %v\n", err)
		return 1
	}
	var j job
	if err := json.Unmarshal(b, &j); err != nil || !validID(j.WatchID) || j.Dir == "" || j.Path == "" || len(j.Argv) == 0 {
		fmt.Fprintln(stderr, "vigil supervise: no valid job on stdin (this command is started by the vigil daemon)")
		return 2
	}
	if os.Getenv(EnvStage) == "2" {
		return supervise(j)
	}
	var pidFile *os.File
	if j.Locked {
		pidFile = os.NewFile(3, filepath.Join(j.Dir, j.WatchID+".pid"))
	}
	pid, err := detach(b, pidFile)
	if err != nil {
		fmt.Fprintf(stderr, "vigil supervise: %v\n", err)
		return 1
	}
	fmt.Fprintf(stdout, "ready %d\n", pid)
	return 0
}

// detach starts the second stage in its own session and waits for its
// report on a pipe (its fd 3). pidFile, when set, is the locked pid file,
// handed on as the second stage's fd 4.
func detach(jobJSON []byte, pidFile *os.File) (int, error) {
	exe, err := os.Executable()
	if err != nil {
		return 0, err
	}
	r, wr, err := os.Pipe()
	if err != nil {
		return 0, err
	}
	defer r.Close()
	cmd := exec.Command(exe, os.Args[1:]...)
	cmd.Env = append(os.Environ(), EnvStage+"=2")
	cmd.Dir = "/"
	cmd.Stdin = bytes.NewReader(jobJSON)
	cmd.ExtraFiles = []*os.File{wr}
	if pidFile != nil {
		cmd.ExtraFiles = append(cmd.ExtraFiles, pidFile)
	}
	if err := newSession(cmd); err != nil {
		wr.Close()
		return 0, err
	}
	if err := cmd.Start(); err != nil {
		wr.Close()
		return 0, fmt.Errorf("starting the supervisor: %w", err)
	}
	wr.Close()
	go func() { _ = cmd.Wait() }() // copies stdin; the process outlives us
	done := make(chan string, 1)
	go func() {
		line, _ := bufio.NewReader(r).ReadString('\n')
		done <- strings.TrimSpace(line)
	}()
	var line string
	select {
	case line = <-done:
	case <-time.After(startTimeout):
		return 0, errors.New("the supervisor did not report within " + startTimeout.String())
	}
	if pid, ok := strings.CutPrefix(line, "ready "); ok {
		var n int
		_, _ = fmt.Sscan(pid, &n)
		return n, nil
	}
	if line == "" {
		line = "the supervisor exited without a report"
	}
	return 0, errors.New(line)
}

// supervise is the second stage.
func supervise(j job) int {
	// The report pipe is the first stage's; the program must not inherit
	// it (nor write into it), and does not: it is close-on-exec, as every
	// file from fd 3 up (Supervise).
	report := os.NewFile(3, "report")
	say := func(s string) {
		if report != nil {
			fmt.Fprintln(report, s)
			report.Close()
			report = nil
		}
	}
	defer say("error: the supervisor ended early")
	pidPath := filepath.Join(j.Dir, j.WatchID+".pid")
	var f *os.File
	if j.Locked {
		// Inherited, locked, from the daemon through the first stage. The
		// program must not inherit it (the lock would outlive us), and
		// does not: it is close-on-exec, as every file from fd 3 up
		// (Supervise).
		f = os.NewFile(4, pidPath)
	} else {
		var err error
		if f, err = os.OpenFile(pidPath, os.O_RDWR, 0); err != nil {
			say("error: " + err.Error())
			return 1
		}
	}
	defer f.Close()
	// Inherited, the lock is already this file's: taking it again is a
	// check that it is.
	if err := lock(f); err != nil {
		say("error: cannot lock " + pidPath + ": " + err.Error())
		return 1
	}
	// Signals are handled from here: a SIGTERM before the program starts
	// keeps it from starting (one that comes while it starts ends it as
	// soon as it is up). The record names this supervisor at
	// once, so a daemon can reach it before the program starts, and is on
	// disk before the program starts: a pid file nobody holds that names
	// no supervisor is taken for a start that never happened, and started
	// again, which after a crash must not be one whose program ran.
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
	// A SIGHUP is caught, not ignored, and dropped: a signal caught is at
	// its default in the program (exec resets it), one ignored would stay
	// ignored there, and the program must see signals as from a shell.
	// Catching it also lifts an ignore inherited from the daemon (nohup),
	// which Go keeps for SIGHUP. SIGPIPE is left to Go, which catches it
	// too: a write to a broken pipe fails with EPIPE here and kills only
	// on fds 1 and 2, which are /dev/null (detach), so a first stage gone
	// before the report (fd 3) cannot keep the status from being written.
	signal.Notify(make(chan os.Signal, 1), syscall.SIGHUP)
	early, _ := json.Marshal(pidRecord{Supervisor: os.Getpid()})
	if _, err := f.WriteAt(early, 0); err != nil {
		say("error: writing " + pidPath + ": " + err.Error())
		return 1
	}
	if err := f.Sync(); err != nil {
		say("error: syncing " + pidPath + ": " + err.Error())
		return 1
	}
	tail := proc.NewTail(j.Tail)
	cmd := exec.Command(j.Path)
	cmd.Args = j.Argv
	cmd.Dir = j.Cwd
	cmd.Env = j.Env
	cmd.Stdout, cmd.Stderr = tail, tail
	grace := time.Duration(j.GraceMS) * time.Millisecond
	if grace <= 0 {
		grace = proc.DefaultKillGrace
	}
	cmd.WaitDelay = grace
	if beforeStart != nil {
		beforeStart()
	}
	st := Status{WatchID: j.WatchID, StartedAt: time.Now().UTC()}
	select {
	case <-sigs:
		// Told to end before the program started (the deadline, a
		// cancel, a start given up on): it is not started at all.
		st.EndedAt, st.Terminated = st.StartedAt, true
		if err := writeStatus(j.Dir, st); err != nil {
			say("error: " + err.Error())
			return 1
		}
		say("ready 0")
		return 0
	default:
	}
	// A child subreaper (Linux): what the program starts and leaves its
	// process group (setsid, a daemonizing double fork) comes to this
	// supervisor when its parent ends, and is ended with the program. It
	// starts nothing else, and reaps what comes to it (reaped, below).
	// Elsewhere the process group alone is ended.
	_ = proc.BecomeSubreaper()
	reaped := make(chan os.Signal, 1)
	if len(childEnded) > 0 { // Notify with none would take every signal
		signal.Notify(reaped, childEnded...)
	}
	if err := proc.OwnGroup(cmd); err != nil {
		st.Error = err.Error()
	} else if err := cmd.Start(); err != nil {
		st.Error = fmt.Sprintf("starting %s: %v", j.Argv[0], err)
	}
	if st.Error != "" {
		st.EndedAt = st.StartedAt
		if err := writeStatus(j.Dir, st); err != nil {
			say("error: " + err.Error())
			return 1
		}
		say("ready 0")
		return 0
	}
	pid := cmd.Process.Pid
	st.Pid = pid
	rec, _ := json.Marshal(pidRecord{Supervisor: os.Getpid(), Pid: pid, StartedAt: st.StartedAt})
	_, _ = f.WriteAt(rec, 0)
	_ = f.Sync()
	say(fmt.Sprintf("ready %d", pid))

	waited := make(chan error, 1)
	go func() { waited <- cmd.Wait() }()
	var werr error
	terminated := false
loop:
	for {
		select {
		case werr = <-waited:
			break loop
		case <-reaped:
			// An orphan that came to this supervisor and ended.
			proc.ReapZombies(pid)
		case <-sigs:
			if !terminated {
				terminated = true
				_ = proc.TerminateGroup(pid)
				time.AfterFunc(grace, func() { proc.KillGroup(pid) })
			}
		}
	}
	// Whatever the program left running in its group goes with it, and
	// so does what left the group (KillOrphans).
	proc.KillGroup(pid)
	proc.KillOrphans(grace)
	st.EndedAt = time.Now().UTC()
	st.Tail, st.OutputBytes = tail.String(), tail.Total()
	var exitErr *exec.ExitError
	switch {
	case cmd.ProcessState == nil:
		st.Error = fmt.Sprintf("waiting for %s: %v", j.Argv[0], werr)
	default:
		// Ended on a SIGTERM the supervisor passed on, the program did not
		// finish, however it exited: one that answers it by exiting 0 is
		// not a success (answer).
		st.Terminated = terminated
		if sig, ok := proc.Signaled(cmd.ProcessState); ok {
			st.Signal = sig
		} else if werr == nil || errors.As(werr, &exitErr) || errors.Is(werr, exec.ErrWaitDelay) {
			code := cmd.ProcessState.ExitCode()
			st.ExitCode = &code
		}
	}
	if err := writeStatus(j.Dir, st); err != nil {
		return 1
	}
	return 0
}

// beforeStart, when set (by tests), is called by the second stage once
// its record is on disk, before it starts the program.
var beforeStart func()

// writeStatus writes st atomically: a temporary file in the same
// directory, fsync, rename, fsync of the directory.
func writeStatus(dir string, st Status) error {
	b, err := json.Marshal(st)
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(dir, "."+st.WatchID+".*.tmp")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(b); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), filepath.Join(dir, st.WatchID+".json")); err != nil {
		return err
	}
	if d, err := os.Open(dir); err == nil {
		_ = d.Sync()
		d.Close()
	}
	return nil
}
