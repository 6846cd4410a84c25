//go:build unix

package daemon_test

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/vigil-run/vigil/daemon"
)

// TestFirstStartKilled: a first start killed (SIGKILL, in a child process)
// at any step of making its database, or while it writes its webhook
// secret or link key, leaves either no such file or a complete one, and
// the next start starts, with no refusal; so does the empty database a
// first start killed before it wrote its first page left behind (as an
// older vigil did).
func TestFirstStartKilled(t *testing.T) {
	if step := os.Getenv("VIGIL_TEST_KILL_AT"); step != "" {
		killedFirstStart(t, step, os.Getenv("VIGIL_TEST_DATA_DIR"))
		return
	}
	t.Parallel()
	for _, step := range []string{"cleared", "migrated", "closed", "renamed", daemon.WebhookSecretFile, daemon.LinkKeyFile, "an older vigil's empty file"} {
		t.Run(step, func(t *testing.T) {
			t.Parallel()
			dataDir := filepath.Join(t.TempDir(), "vigil")
			db := filepath.Join(dataDir, daemon.DatabaseFile)
			if step == "an older vigil's empty file" {
				if err := os.Mkdir(dataDir, 0o700); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(db, nil, 0o600); err != nil {
					t.Fatal(err)
				}
			} else {
				child := exec.Command(os.Args[0], "-test.run=^TestFirstStartKilled$")
				child.Env = append(os.Environ(), "VIGIL_TEST_KILL_AT="+step, "VIGIL_TEST_DATA_DIR="+dataDir)
				out, err := child.CombinedOutput()
				var exit *exec.ExitError
				if !errors.As(err, &exit) || exit.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
					t.Fatalf("the first start was not killed at %s: %v\n%s", step, err, out)
				}
				fi, err := os.Stat(db)
				made := step != "cleared" && step != "migrated" && step != "closed"
				switch {
				case made && (err != nil || fi.Size() == 0):
					t.Errorf("killed at %s, once the database was renamed into place: %v, %v; want a complete database", step, fi, err)
				case !made && !errors.Is(err, os.ErrNotExist):
					t.Errorf("killed while the database was made: %s is there (%v, %v); want none yet", db, fi, err)
				}
				for _, f := range []string{daemon.WebhookSecretFile, daemon.LinkKeyFile} {
					if fi, err := os.Stat(filepath.Join(dataDir, f)); err == nil && fi.Size() == 0 {
						t.Errorf("killed at %s: %s is left empty", step, f)
					}
				}
			}
			d := start(t, testConfig(dataDir, t.TempDir()))
			if got := listAll(t, newClient(t, d)); len(got) != 0 {
				t.Errorf("the next start lists %d watches, want none", len(got))
			}
			if err := d.stop(); err != nil {
				t.Fatal(err)
			}
			for _, f := range []string{daemon.DatabaseFile + ".new", daemon.DatabaseFile + ".new-wal"} {
				if _, err := os.Stat(filepath.Join(dataDir, f)); !errors.Is(err, os.ErrNotExist) {
					t.Errorf("%s is left in the data dir: %v", f, err)
				}
			}
		})
	}
}

// killedFirstStart is the child of TestFirstStartKilled: a first start in
// dataDir that kills its own process at step.
func killedFirstStart(t *testing.T, step, dataDir string) {
	daemon.SetCreateHook(func(s string) {
		if s == step {
			_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
			select {} // the signal is on its way
		}
	})
	// Its roots are the parent's: a directory of its own would outlive it.
	d, err := daemon.New(t.Context(), testConfig(dataDir, filepath.Dir(dataDir)), nil)
	if err == nil {
		d.Close()
	}
	t.Fatalf("the first start was not killed at %s: %v", step, err)
}
