//go:build unix

package run_test

import (
	"context"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/vigil-run/vigil"
	"github.com/vigil-run/vigil/engine"
	"github.com/vigil-run/vigil/store/memstore"
	"github.com/vigil-run/vigil/watcher/run"
)

// The engine settles a run watch by its recorded exit at a start past
// its deadline.
var _ engine.Recorder = (*run.Watcher)(nil)

// TestRunEndedBeforeDeadlineWhileDown: a run that exits, by itself and
// before its deadline, while no daemon runs is settled by that exit at the
// next start, even when the start comes after the deadline: its status
// file says how and when it ended. It was expired (down_past_deadline),
// and the exit the supervisor recorded was lost.
func TestRunEndedBeforeDeadlineWhileDown(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		code string
		want vigil.State
	}{{"0", vigil.StateFired}, {"3", vigil.StateFailed}} {
		t.Run("exit "+tt.code, func(t *testing.T) {
			t.Parallel()
			st, dir := memstore.New(), t.TempDir()
			fifo := filepath.Join(t.TempDir(), "go")
			if err := syscall.Mkfifo(fifo, 0o600); err != nil {
				t.Fatal(err)
			}
			d := startDaemon(t, st, dir)
			// The program waits for the test's word, then exits.
			w := register(t, d, `{"shell":"read x < `+fifo+`; echo finished; exit `+tt.code+`"}`, "1h", 0)
			d.stop()

			f, err := os.OpenFile(fifo, os.O_WRONLY, 0)
			if err != nil {
				t.Fatal(err)
			}
			_, _ = f.WriteString("go\n")
			f.Close()
			s := waitStatus(t, dir, w.ID)
			if s.ExitCode == nil || !s.EndedAt.Before(w.Deadline) {
				t.Fatalf("status = %+v, want an exit before the deadline %s", s, w.Deadline)
			}

			// The next start is past the deadline.
			d2 := startDaemonAt(t, st, dir, func() time.Time { return time.Now().Add(2 * time.Hour) })
			got, err := d2.eng.Watch(context.Background(), w.ID)
			if err != nil {
				t.Fatal(err)
			}
			if got.State != tt.want || got.Outcome == nil || got.Outcome.Observation == nil {
				t.Fatalf("after the start: %s %+v, want %s by its recorded exit", got.State, got.Outcome, tt.want)
			}
			if code := got.Outcome.Observation.Facts["exit_code"]; code == nil {
				t.Errorf("outcome facts %v hold no exit_code", got.Outcome.Observation.Facts)
			}
			if ms := messages(t, d2); len(ms) != 1 || ms[0].Type != vigil.MessageTypeFor(tt.want) {
				t.Errorf("messages = %+v, want one %s", ms, tt.want)
			}
		})
	}
}
