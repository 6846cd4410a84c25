//go:build !(linux || darwin || freebsd)

package sqlite

import "errors"

// freeBytes is unknown here: the preallocation relies on a failed write
// alone to find a full disk.
func freeBytes(string) (int64, error) { return 0, errors.ErrUnsupported }
