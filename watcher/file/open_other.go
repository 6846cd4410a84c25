//go:build !unix

package file

import "os"

// openFlags opens a file for reading.
const openFlags = os.O_RDONLY

// noFollowFlag is none where the system has no O_NOFOLLOW.
const noFollowFlag = 0
