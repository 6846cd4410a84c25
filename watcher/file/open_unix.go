//go:build unix

package file

import (
	"os"
	"syscall"
)

// openFlags opens a file for reading without blocking on a named pipe.
const openFlags = os.O_RDONLY | syscall.O_NONBLOCK
