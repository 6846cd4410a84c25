package run_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/vigil-run/vigil"
	"github.com/vigil-run/vigil/watcher"
	"github.com/vigil-run/vigil/watcher/run"
)

// runOnce starts the run of pred, as watch id, on a watcher configured by
// c, and waits for the status its supervisor records.
func runOnce(t *testing.T, c run.Config, id, pred string) run.Status {
	t.Helper()
	w := run.New(c)
	now := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	canon, err := w.Canonicalize(t.Context(), json.RawMessage(pred), now)
	if err != nil {
		t.Fatal(err)
	}
	obs, err := w.Probe(t.Context(), watcher.Probe{WatchID: id, Kind: vigil.KindRun, Predicate: canon.Predicate, Now: now})
	if err != nil || !strings.HasPrefix(obs.Summary, "running") {
		t.Fatalf("Probe(%s) = %+v, %v; want running", pred, obs, err)
	}
	return waitStatus(t, c.Dir, id)
}

// TestProgramSignalsAtTheirDefaults: the program starts with SIGHUP and
// SIGPIPE at their defaults, as from a shell, also when the daemon itself
// ignores them (started under nohup, or by a manager that ignores
// SIGPIPE): the writer of a pipeline whose reader has gone dies of SIGPIPE
// rather than failing on EPIPE, and SIGHUP ends the program. A signal
// ignored stays ignored across exec, so a supervisor that ignores one, or
// leaves an inherited ignore in place, hands it on to the program.
func TestProgramSignalsAtTheirDefaults(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name string
		wrap []string // what starts the supervisor, before its own argv
	}{
		{"daemon with default signals", nil},
		{"daemon ignoring SIGHUP and SIGPIPE", []string{"/bin/sh", "-c", `trap "" HUP PIPE; exec "$0" "$@"`}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c := testConfig(t, t.TempDir(), nil, nil)
			c.SupervisorArgv = append(tt.wrap, c.SupervisorArgv...)
			s := runOnce(t, c, "01SIGNALS", `{"shell":"(yes; echo writer $? >&2) | head -n 1 >/dev/null; kill -HUP $$; echo survived"}`)
			// 141 is 128 + SIGPIPE: the shell's status of a command a signal ended.
			if !strings.Contains(s.Tail, "writer 141\n") {
				t.Errorf("the pipeline's writer did not die of SIGPIPE; the output:\n%s", s.Tail)
			}
			if s.Signal != "SIGHUP" {
				t.Errorf("the program ended by %s, want SIGHUP; the output:\n%s", ending(s), s.Tail)
			}
		})
	}
}

// ending says how a run ended, from its status.
func ending(s run.Status) string {
	switch {
	case s.ExitCode != nil:
		return fmt.Sprintf("exit %d", *s.ExitCode)
	case s.Signal != "":
		return s.Signal
	}
	return "error " + s.Error
}
