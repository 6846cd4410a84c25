package cli

import (
	"database/sql"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vigil-run/vigil/daemon"
)

// TestUnreadableRowEndToEnd: against a real daemon and its SQLite file, a
// watch whose labels column is corrupted does not break ls, status or
// /metrics for anyone: ls lists it as unreadable with its id and the
// reason, beside the healthy watch; its probe settles it errored, with
// the reason, in one message.
func TestUnreadableRowEndToEnd(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	add := func(args ...string) string {
		t.Helper()
		r := d.vigil(t, append([]string{"add"}, args...)...)
		if r.code != 0 {
			t.Fatalf("add %v: exit %d: %s", args, r.code, r.stderr)
		}
		return strings.TrimSpace(r.stdout)
	}
	healthy := add("timer", "1h", "--for", "rows", "-q")
	bad := add("file", filepath.Join(d.root, "never"), "--every", "1s", "--label", "team=a", "--for", "rows", "-q")

	raw, err := sql.Open("sqlite", filepath.Join(d.dataDir, daemon.DatabaseFile)+"?_pragma=busy_timeout(10000)")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := raw.Exec(`UPDATE watches SET labels = '{"team": a' WHERE id = ?`, bad); err != nil {
		t.Fatal(err)
	}
	raw.Close()

	r := d.vigil(t, "ls", "--for", "rows")
	if r.code != 0 {
		t.Fatalf("ls with an unreadable row: exit %d: %s", r.code, r.stderr)
	}
	var badLine string
	for _, l := range strings.Split(r.stdout, "\n") {
		if strings.HasPrefix(l, bad) {
			badLine = l
		}
	}
	if !strings.Contains(badLine, "unreadable") || !strings.Contains(badLine, "labels: invalid character") || !strings.Contains(r.stdout, healthy) {
		t.Errorf("ls =\n%s\nwant the bad row (%s) as unreadable with the reason, and the healthy one (%s)", r.stdout, bad, healthy)
	}
	if r := d.vigil(t, "status"); r.code != 0 || !strings.Contains(r.stdout, "unreadable: 1") {
		t.Errorf("status with an unreadable row: exit %d, stdout %q, stderr %q; want it to count it", r.code, r.stdout, r.stderr)
	}
	resp, err := http.Get(d.URL() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("/metrics = %d, want 200", resp.StatusCode)
	}

	if r := d.vigil(t, "wait", bad, "--timeout", "30s"); r.code != ExitStopped || !strings.Contains(r.stdout, "errored") || !strings.Contains(r.stdout, "labels") {
		t.Fatalf("wait on the unreadable watch: exit %d, %q; want errored (exit %d) saying why", r.code, r.stdout, ExitStopped)
	}
	r = d.vigil(t, "inbox", "--for", "rows", "--reader", "t")
	if n := strings.Count(r.stdout, "errored"); n != 1 || !strings.Contains(r.stdout, bad) {
		t.Errorf("inbox =\n%s\nwant one errored message for %s", r.stdout, bad)
	}
	if r := d.vigil(t, "show", bad); r.code != 0 || !strings.Contains(r.stdout, "Unreadable:") {
		t.Errorf("show of the unreadable watch: exit %d:\n%s%s", r.code, r.stdout, r.stderr)
	}
}
