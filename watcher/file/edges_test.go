package file_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/vigil-run/vigil"
	"github.com/vigil-run/vigil/watcher/file"
)

// TestSymlinkCountsAsPresent: a symbolic link is present as soon as the
// link exists, even when it points nowhere: exists:false is not satisfied
// by a dangling link. contains and matches read what the link points to,
// and a link to nothing has nothing to read.
func TestSymlinkCountsAsPresent(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	dangling := filepath.Join(dir, "dangling")
	if err := os.Symlink(filepath.Join(dir, "nowhere"), dangling); err != nil {
		t.Fatal(err)
	}
	real := filepath.Join(dir, "real.log")
	write(t, real, "listening on :8080\n")
	live := filepath.Join(dir, "live")
	if err := os.Symlink(real, live); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name        string
		pred        string
		wantVerdict vigil.Verdict
		wantSummary string
	}{
		{"a dangling link still exists", `{"path":` + q(dangling) + `,"exists":false}`, vigil.VerdictPending, dangling + " still exists"},
		{"a dangling link exists", `{"path":` + q(dangling) + `}`, vigil.VerdictSatisfied, dangling + " exists"},
		{"a dangling link holds nothing", `{"path":` + q(dangling) + `,"contains":"x"}`, vigil.VerdictPending,
			dangling + ` is a symbolic link to nothing, so it cannot contain "x"`},
		{"a live link is read through", `{"path":` + q(live) + `,"contains":"listening"}`, vigil.VerdictSatisfied, live + ` contains "listening"`},
		{"a live link exists", `{"path":` + q(live) + `,"exists":false}`, vigil.VerdictPending, live + " still exists"},
	}
	for _, roots := range [][]string{nil, {dir}} {
		w := file.New(file.Config{Roots: roots})
		for _, tt := range tests {
			got := probe(t, w, canon(t, w, tt.pred))
			if got.Verdict != tt.wantVerdict || got.Summary != tt.wantSummary {
				t.Errorf("roots %v: %s: Probe = %s %q, want %s %q", roots, tt.name, got.Verdict, got.Summary, tt.wantVerdict, tt.wantSummary)
			}
		}
	}
	// Once the link is gone, exists:false is satisfied.
	if err := os.Remove(dangling); err != nil {
		t.Fatal(err)
	}
	w := file.New(file.Config{})
	if got := probe(t, w, canon(t, w, `{"path":`+q(dangling)+`,"exists":false}`)); got.Verdict != vigil.VerdictSatisfied {
		t.Errorf("Probe(link removed, exists:false) = %+v, want satisfied", got)
	}
}
