//go:build unix

package file

import (
	"os"
	"syscall"
)

// openFlags opens a file for reading without blocking on a named pipe.
const openFlags = os.O_RDONLY | syscall.O_NONBLOCK

// noFollowFlag keeps an open from following a symbolic link at the path.
const noFollowFlag = syscall.O_NOFOLLOW
