//go:build unix

package file

import (
	"errors"
	"path/filepath"
	"syscall"
	"testing"
)

// TestReadTailNeverBlocksOnAPipe: a file swapped for a named pipe between
// the probe's stat and its open is not read: the open does not wait for a
// writer, and the opened file is checked again. (Before, the open blocked
// until a writer came, holding a probe worker.)
func TestReadTailNeverBlocksOnAPipe(t *testing.T) {
	t.Parallel()
	fifo := filepath.Join(t.TempDir(), "swapped")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	_, _, err := readTail(fifo, 1<<20, false)
	if !errors.Is(err, errNotRegular) {
		t.Fatalf("readTail(fifo) = %v, want errNotRegular", err)
	}
}
