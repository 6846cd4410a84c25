//go:build unix

package daemon

import (
	"errors"
	"os"
	"syscall"
)

// errLocked is lockFile's answer when another process holds the lock.
var errLocked = errors.New("locked by another process")

// lockFile takes an exclusive flock on f without waiting. The lock goes
// with the file's descriptor: closed, or the process ended however it
// ended, it is free again. Go opens files close-on-exec, so the commands
// vigil starts never inherit it.
func lockFile(f *os.File) error {
	err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
	if errors.Is(err, syscall.EWOULDBLOCK) {
		return errLocked
	}
	return err
}
