package command_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vigil-run/vigil"
	"github.com/vigil-run/vigil/deliver/command"
	runner "github.com/vigil-run/vigil/internal/proc"
	"github.com/vigil-run/vigil/internal/proc/proctest"
)

// TestMain lets this test binary be `vigil reap`: a Runner's Reaper.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == "reap" {
		os.Exit(runner.Reap(os.Args[2:]))
	}
	os.Exit(m.Run())
}

// TestTimeoutKillsWhatLeftTheGroup: a command that starts a process in a
// session of its own (setsid, as a daemon does) and outlives its timeout
// has that process killed too when it is ended; so does one that exits 0
// leaving it behind. Before, a signal to the process group never reached
// it, and it ran on after the delivery.
func TestTimeoutKillsWhatLeftTheGroup(t *testing.T) {
	t.Parallel()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	ch := command.New(command.Config{Runner: runner.Runner{KillGrace: 200 * time.Millisecond, Reaper: []string{exe, "reap"}}})
	for _, tc := range []struct{ name, tail, timeout, want string }{
		{"timeout", "; sleep 60", "1s", "timed out"},
		{"exit 0", "", "10s", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bg := filepath.Join(t.TempDir(), "bg.pid")
			shell := `setsid -f sh -c 'echo $$ > ` + bg + `.tmp; mv ` + bg + `.tmp ` + bg + `; exec sleep 60' </dev/null >/dev/null 2>&1; ` +
				`while [ ! -s ` + bg + ` ]; do sleep 0.01; done` + tc.tail
			opts, _ := json.Marshal(map[string]any{"command": map[string]any{"shell": shell, "timeout": tc.timeout}})
			retry, err := ch.Send(t.Context(), delivery(t, string(opts), vigil.StateFired))
			if retry || (tc.want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tc.want)) {
				t.Fatalf("Send = %v, %v; want %q", retry, err, tc.want)
			}
			proctest.RequireGone(t, bg)
		})
	}
}
