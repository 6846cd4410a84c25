//go:build !unix

package folder

import "os"

// openFlags opens a file for reading.
const openFlags = os.O_RDONLY
