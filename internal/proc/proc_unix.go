//go:build unix

package proc

import (
	"errors"
	"os"
	"os/exec"
	"syscall"

	"golang.org/x/sys/unix"
)

// ownGroup makes cmd's process the leader of a new process group, so a
// signal to the group reaches every process it starts.
func ownGroup(cmd *exec.Cmd) error {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	return nil
}

// terminateGroup sends SIGTERM to the process group led by pid.
func terminateGroup(pid int) error {
	err := syscall.Kill(-pid, syscall.SIGTERM)
	if errors.Is(err, syscall.ESRCH) {
		return os.ErrProcessDone
	}
	return err
}

// killGroup sends SIGKILL to whatever is left in the process group led by
// pid. The leader has been waited for; the group lives on while any member
// does, so its id cannot have been reused by then unless the group is empty.
func killGroup(pid int) {
	_ = syscall.Kill(-pid, syscall.SIGKILL)
}

// signaled reports the signal that ended the process, if one did.
func signaled(ps *os.ProcessState) (string, bool) {
	ws, ok := ps.Sys().(syscall.WaitStatus)
	if !ok || !ws.Signaled() {
		return "", false
	}
	return signalName(ws.Signal()), true
}

// signalName names s as a shell does ("SIGKILL", "SIGFPE"), or by its
// description where the system has no name for it.
func signalName(s syscall.Signal) string {
	if name := unix.SignalName(s); name != "" {
		return name
	}
	return s.String()
}
