package cli

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vigil-run/vigil"
)

// TestCheckCommand: vigil check probes a pending watch at once and prints
// what it found; a settled watch is refused.
func TestCheckCommand(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	r := d.vigil(t, "add", "file", filepath.Join(d.root, "never"), "--for", "check-cli", "--every", "1h", "--deadline", "24h", "-q", "--observe")
	if r.code != 0 {
		t.Fatalf("add: exit %d: %s", r.code, r.stderr)
	}
	id := strings.TrimSpace(r.stdout)
	r = d.vigil(t, "check", id)
	if r.code != 0 || !strings.Contains(r.stdout, "still pending after 2 checks") {
		t.Errorf("check: exit %d, stdout %q, stderr %q; want pending after 2 checks", r.code, r.stdout, r.stderr)
	}
	r = d.vigil(t, "check", id, "--json")
	var w vigil.Watch
	if err := json.Unmarshal([]byte(r.stdout), &w); err != nil || w.ID != id || w.Polls != 3 {
		t.Errorf("check --json printed %q (%v); want the watch after 3 probes", r.stdout, err)
	}
	if r = d.vigil(t, "cancel", id); r.code != 0 {
		t.Fatalf("cancel: exit %d: %s", r.code, r.stderr)
	}
	r = d.vigil(t, "check", id)
	if r.code != ExitUsage || !strings.Contains(r.stderr, "already settled") {
		t.Errorf("check of a cancelled watch: exit %d, stderr %q; want %d and why", r.code, r.stderr, ExitUsage)
	}
}
