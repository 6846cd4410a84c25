//go:build !unix

package file

import "os"

// openFlags opens a file for reading.
const openFlags = os.O_RDONLY
