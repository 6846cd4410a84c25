package cli

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vigil-run/vigil"
)

// TestAddFromFile registers a JSON Lines file against a real daemon: each
// line answered in its place, 1 000 per call, and a file with a bad line
// sends nothing.
func TestAddFromFile(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	due := time.Now().Add(time.Hour)
	line := func(i int, extra string) string {
		at := vigil.FormatTime(due.Add(time.Duration(i) * time.Second))
		return fmt.Sprintf(`{"kind":"timer","predicate":{"at":%q},"note":"n%d"%s}`, at, i, extra)
	}
	dir := t.TempDir()
	write := func(name string, lines ...string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}

	small := write("small.jsonl", line(1, ""), "", line(1, `,"recipient":"zed"`), `{"kind":"nope","recipient":"zed"}`)
	r := d.vigil(t, "add", "--from-file", small, "--for", "amy")
	if r.code != ExitUsage {
		t.Errorf("exit = %d, want %d (one line was refused)", r.code, ExitUsage)
	}
	for _, want := range []string{"line 1: Watching", "for amy", "line 3: Watching", "for zed", "line 4: refused (unknown_kind)"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("stdout lacks %q:\n%s", want, r.stdout)
		}
	}
	if !strings.Contains(r.stderr, "1 of 3 registrations were refused") {
		t.Errorf("stderr = %q, want the count of refusals", r.stderr)
	}
	// Twice the same file: the same watches, existing.
	r = d.vigil(t, "add", "--from-file", small, "--for", "amy", "--json")
	if n := strings.Count(r.stdout, `"status":"existing"`); n != 2 {
		t.Errorf("again: %d existing, want 2:\n%s", n, r.stdout)
	}

	// 2 500 lines: three calls.
	var lines []string
	for i := range 2500 {
		lines = append(lines, line(i, fmt.Sprintf(`,"recipient":"bulk%d"`, i%3)))
	}
	r = d.vigil(t, "add", "--from-file", write("bulk.jsonl", lines...), "-q")
	if r.code != 0 {
		t.Fatalf("bulk: exit %d: %s", r.code, r.stderr)
	}
	if n := len(strings.Fields(r.stdout)); n != 2500 {
		t.Errorf("bulk printed %d ids, want 2500", n)
	}
	r = d.vigil(t, "list", "--for", "bulk0", "--limit", "1000", "--json")
	if n := strings.Count(r.stdout, `"recipient": "bulk0"`) + strings.Count(r.stdout, `"recipient":"bulk0"`); n != 834 {
		t.Errorf("list --for bulk0 listed %d watches, want 834 (exit %d %s)", n, r.code, r.stderr)
	}

	// A bad line anywhere sends nothing.
	bad := write("bad.jsonl", line(9, `,"recipient":"bad"`), `[1]`)
	r = d.vigil(t, "add", "--from-file", bad)
	if r.code != ExitUsage || !strings.Contains(r.stderr, "line 2") {
		t.Errorf("bad file: exit %d, stderr %q; want a usage error naming line 2", r.code, r.stderr)
	}
	r = d.vigil(t, "list", "--for", "bad", "--json")
	if strings.Contains(r.stdout, `"bad"`) {
		t.Errorf("bad file registered %q, want nothing", r.stdout)
	}
	if r := d.vigil(t, "add", "timer", "--from-file", small); r.code != ExitUsage {
		t.Errorf("--from-file with a kind: exit %d, want %d", r.code, ExitUsage)
	}
}
