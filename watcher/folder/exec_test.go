package folder_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/vigil-run/vigil/watcher/folder"
)

// TestReviewerMarksExec: a predicate with an on_change reviewer runs a
// program, so its canonical form says so (a scoped token then needs the
// exec scope); one without does not.
func TestReviewerMarksExec(t *testing.T) {
	t.Parallel()
	w := folder.New(folder.Config{Roots: []string{"/srv"}})
	for pred, want := range map[string]bool{
		`{"path":"/srv/app","on_change":["llm","review"]}`: true,
		`{"path":"/srv/app"}`:                              false,
	} {
		c, err := w.Canonicalize(context.Background(), json.RawMessage(pred), time.Now())
		if err != nil {
			t.Fatalf("Canonicalize(%s): %v", pred, err)
		}
		if c.Exec != want {
			t.Errorf("Canonicalize(%s).Exec = %v, want %v", pred, c.Exec, want)
		}
	}
}
