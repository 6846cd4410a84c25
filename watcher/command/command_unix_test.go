//go:build unix

package command_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/vigil-run/vigil"
	"github.com/vigil-run/vigil/watcher"
)

// gone reports whether pid no longer runs: it does not exist, or it is a
// zombie nobody has reaped yet (an orphan's reaper may be slow or absent
// in a container).
func gone(pid int) bool {
	if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
		return true
	}
	if runtime.GOOS != "linux" {
		return false
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true
	}
	i := bytes.LastIndexByte(b, ')')
	return i >= 0 && i+2 < len(b) && (b[i+2] == 'Z' || b[i+2] == 'X')
}

// waitGone waits, briefly, for the kernel to finish a process it was told
// to kill.
func waitGone(t *testing.T, pid int) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Second)
	for !gone(pid) {
		if time.Now().After(deadline) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
			t.Fatalf("process %d is still running after the probe returned", pid)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func pidFrom(t *testing.T, obs vigil.Observation) int {
	t.Helper()
	out, _ := obs.Facts["stdout"].(string)
	pid, err := strconv.Atoi(strings.TrimSpace(out))
	if err != nil {
		t.Fatalf("no pid in stdout %q (%+v)", out, obs)
	}
	return pid
}

// TestNothingIsLeftRunning runs children that hold stdout open, ignore
// SIGTERM or outlive their parent: every probe must return within
// timeout + grace (plus slack) and leave no process of its group behind.
func TestNothingIsLeftRunning(t *testing.T) {
	t.Parallel()
	w := newWatcher()
	const timeout = 300 * time.Millisecond
	tests := []struct {
		name, shell string
		verdict     vigil.Verdict
	}{
		{"timeout: a grandchild ignoring SIGTERM holds stdout",
			`(trap '' TERM; exec sleep 1000) & echo $!; wait`, vigil.VerdictUnavailable},
		{"timeout: the child ignores SIGTERM too",
			`trap '' TERM; (exec sleep 1000) & echo $!; wait; wait`, vigil.VerdictUnavailable},
		{"the child exits at once, a grandchild keeps stdout open",
			`sleep 1000 & echo $!`, vigil.VerdictSatisfied},
		{"the child exits at once, a grandchild lives on with stdout closed",
			`sleep 1000 >/dev/null 2>&1 & echo $!`, vigil.VerdictSatisfied},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			pred := canon(t, w, `{"shell":`+strconv.Quote(tt.shell)+`,"timeout":"`+timeout.String()+`"}`)
			start := time.Now()
			got := probe(t, w, pred)
			elapsed := time.Since(start)
			pid := pidFrom(t, got)
			waitGone(t, pid)
			if got.Verdict != tt.verdict {
				t.Errorf("Probe = %+v, want %s", got, tt.verdict)
			}
			if limit := timeout + grace + 500*time.Millisecond; elapsed > limit {
				t.Errorf("Probe took %v, want at most %v", elapsed, limit)
			}
		})
	}
}

func TestCancelTerminatesTheGroup(t *testing.T) {
	t.Parallel()
	w := newWatcher()
	pred := canon(t, w, `{"shell":"(trap '' TERM; exec sleep 1000) & echo $!; wait","timeout":"10m"}`)
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	got, err := watcher.Run(ctx, w, watcher.Probe{WatchID: "w", Kind: vigil.KindCommand, Predicate: pred})
	if err != nil {
		t.Fatal(err)
	}
	waitGone(t, pidFrom(t, got))
	if got.Verdict != vigil.VerdictUnavailable || !strings.Contains(got.Reason, "cancelled") {
		t.Errorf("Probe(cancelled) = %+v, want unavailable: cancelled", got)
	}
}
