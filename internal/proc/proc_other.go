//go:build !unix

package proc

import (
	"errors"
	"os"
	"os/exec"
)

// ownGroup refuses: command watches need Unix process groups.
func ownGroup(*exec.Cmd) error {
	return errors.New("command watches need a Unix system: process groups are not available")
}

func terminateGroup(int) error { return nil }

func killGroup(int) {}

func signaled(*os.ProcessState) (string, bool) { return "", false }

// CloseOnExecFrom has nothing to mark where no program is started: command
// watches, run watches and every other program vigil runs need Unix.
func CloseOnExecFrom(int) {}
