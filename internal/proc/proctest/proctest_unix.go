//go:build unix

package proctest

import (
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// RequireGone fails t unless the process whose pid pidFile holds has
// ended (a process that outlived what should have ended it is killed
// before t fails, so a failing test leaves nothing behind).
func RequireGone(t testing.TB, pidFile string) {
	t.Helper()
	raw, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatal(err)
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(raw)))
	if pid <= 0 {
		t.Fatalf("no pid in %s", pidFile)
	}
	if syscall.Kill(pid, 0) == nil {
		_ = syscall.Kill(pid, syscall.SIGKILL)
		t.Fatalf("the process %d that left the group outlived the delivery", pid)
	}
}
