package proc

import (
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"syscall"
	"time"
)

// Reap is the body of the hidden command `vigil reap GRACE_MS PATH ARGV…`,
// which a Runner with a Reaper starts to run one program: it becomes a
// child subreaper (BecomeSubreaper), starts PATH with ARGV in its own
// process group with this process's stdin, stdout, stderr, environment and
// directory, passes a SIGTERM on to the group (SIGKILL after GRACE_MS),
// and once the program has exited kills what is left of the group and
// every process the program started that left it (KillOrphans). It writes
// how the program ended on fd 3 ("exit N", "signal NAME" or "error …")
// and returns the process's exit code.
func Reap(args []string) int {
	CloseOnExecFrom(3)
	status := os.NewFile(3, "status")
	if len(args) < 3 || status == nil {
		fmt.Fprintln(os.Stderr, "vigil reap: this command is started by the vigil daemon")
		return 2
	}
	defer status.Close()
	ms, err := strconv.Atoi(args[0])
	if err != nil || ms <= 0 {
		fmt.Fprintln(status, "error the reaper's grace is not a number of milliseconds")
		return 2
	}
	grace := time.Duration(ms) * time.Millisecond
	if err := BecomeSubreaper(); err != nil {
		fmt.Fprintln(status, "error becoming a child subreaper:", err)
		return 1
	}
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
	reaped := make(chan os.Signal, 1)
	signal.Notify(reaped, childEnded...)
	cmd := exec.Command(args[1])
	cmd.Args = args[2:]
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	_ = ownGroup(cmd)
	if err := cmd.Start(); err != nil {
		fmt.Fprintln(status, "error", unwrapPath(err))
		return 0
	}
	pid := cmd.Process.Pid
	waited := make(chan error, 1)
	go func() { waited <- cmd.Wait() }()
	terminated := false
loop:
	for {
		select {
		case <-waited:
			break loop
		case <-reaped:
			ReapZombies(pid)
		case <-sigs:
			if !terminated {
				terminated = true
				_ = terminateGroup(pid)
				time.AfterFunc(grace, func() { killGroup(pid) })
			}
		}
	}
	killGroup(pid)
	KillOrphans(grace)
	if sig, ok := signaled(cmd.ProcessState); ok {
		fmt.Fprintln(status, "signal", sig)
	} else {
		fmt.Fprintln(status, "exit", cmd.ProcessState.ExitCode())
	}
	return 0
}
