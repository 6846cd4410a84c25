//go:build unix

package engine_test

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/vigil-run/vigil"
)

// TestScheduleSkipsOverlappingFire: while one run still goes, the fires
// that come due are skipped, not queued behind it.
func TestScheduleSkipsOverlappingFire(t *testing.T) {
	t.Parallel()
	v := newScheduleEnv(t)
	dir := t.TempDir()
	fifo, started := filepath.Join(dir, "release"), filepath.Join(dir, "started")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Skipf("no fifo: %v", err)
	}
	w := v.register(vigil.RegisterRequest{Kind: vigil.KindSchedule,
		Predicate: obj(`{"every":"1m","timeout":"30s","shell":"touch ` + started + `; read line < ` + fifo + `; echo done"}`)})
	done := make(chan int)
	go func() { done <- v.tick(t0.Add(time.Minute)) }()
	// The run has started: move the clock past two more fires, then let it end.
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, err := os.Stat(started); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the scheduled command never started")
		}
		time.Sleep(5 * time.Millisecond)
	}
	v.clock.Set(t0.Add(3*time.Minute + 30*time.Second))
	if err := os.WriteFile(fifo, []byte("go\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	<-done
	if next, _, _ := v.sched.Info(w.ID); !next.Equal(t0.Add(4 * time.Minute)) {
		t.Fatalf("after a run that ended at 3m30s the next fire is %v, want 4m (2m and 3m skipped)", next.Sub(t0))
	}
	if got := len(v.messages("agent-1")); got != 1 {
		t.Fatalf("%d notes, want 1", got)
	}
}
