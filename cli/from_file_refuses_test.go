package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestFromFileRefusesWhatTheAPIRefuses: each line of --from-file is
// "a registration object as POST /v1/watches takes it", and a bad line
// sends nothing. The API refuses a key given twice and anything after the
// object; the CLI decodes each line itself and sends it re-encoded, so
// the daemon never sees either: a duplicate silently keeps its last value
// (here the recipient), and a stray "}" or "]" after the object passes.
func TestFromFileRefusesWhatTheAPIRefuses(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	for i, line := range []string{
		`{"kind":"timer","predicate":{"in":"1h"},"recipient":"amy","recipient":"dupkey"}`,
		`{"kind":"timer","predicate":{"in":"1h"},"recipient":"amy","RECIPIENT":"dupfold"}`,
		`{"kind":"timer","predicate":{"in":"1h"},"recipient":"trailbrace"}}`,
		`{"kind":"timer","predicate":{"in":"1h"},"recipient":"trailbracket"}]`,
	} {
		p := filepath.Join(t.TempDir(), "w.jsonl")
		if err := os.WriteFile(p, []byte(line+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		r := d.vigil(t, "add", "--from-file", p, "--json")
		if r.code != ExitUsage || !strings.Contains(r.stderr, "line 1") || strings.Contains(r.stdout, `"status":"created"`) {
			t.Errorf("case %d: %s\nexit %d, stdout %q, stderr %q; want a usage error naming line 1 and nothing registered", i, line, r.code, r.stdout, r.stderr)
		}
	}
}

// TestFromFileNamesTheLineTooLong: a line longer than a line's bound
// sends nothing, and the refusal names it, as every other bad line's does
// (blank lines counted), so that it can be found in a file of thousands.
func TestFromFileNamesTheLineTooLong(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	ok := `{"kind":"timer","predicate":{"in":"1h"},"recipient":"amy"}`
	long := `{"kind":"timer","predicate":{"in":"1h"},"note":"` + strings.Repeat("x", maxLineBytes) + `"}`
	p := filepath.Join(t.TempDir(), "w.jsonl")
	if err := os.WriteFile(p, []byte(strings.Join([]string{ok, "", ok, long, ok}, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	r := d.vigil(t, "add", "--from-file", p, "--json")
	if r.code != ExitUsage || !strings.Contains(r.stderr, "line 4: the line is longer than") || r.stdout != "" {
		t.Errorf("exit %d, stdout %q, stderr %q; want a usage error naming line 4 and nothing registered", r.code, r.stdout, r.stderr)
	}
}
