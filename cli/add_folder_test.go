package cli

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/vigil-run/vigil"
)

// TestAddFolderRequests checks the registrations add folder sends: the
// path made absolute, patterns, settle, standing, the reviewer after --
// or as --on-change, and nothing the daemon defaults.
func TestAddFolderRequests(t *testing.T) {
	t.Parallel()
	var got vigil.RegisterRequest
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = vigil.RegisterRequest{}
		b, _ := io.ReadAll(r.Body)
		if err := json.Unmarshal(b, &got); err != nil {
			t.Errorf("request body %s: %v", b, err)
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(vigil.Watch{ID: "01ARZ3NDEKTSV4RRFFQ69G5FAV", Kind: got.Kind, Predicate: got.Predicate, Recipient: got.Recipient, State: vigil.StatePending})
	}))
	defer srv.Close()
	env := map[string]string{"VIGIL_ADDR": srv.URL, "VIGIL_TOKEN": "t", "USER": "tester", "VIGIL_RECIPIENT": "agent-7"}
	rel, err := filepath.Abs("docs")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		pred string
	}{
		{[]string{"add", "folder", "/srv/docs"}, `{"path":"/srv/docs"}`},
		{[]string{"add", "folder", "docs", "--pattern", "*.md", "--pattern", "*.go,*.mod", "--settle", "0"},
			`{"path":` + quoteJSON(rel) + `,"pattern":["*.md","*.go,*.mod"],"settle":"0"}`},
		{[]string{"add", "folder", "/src", "--standing", "--settle", "30s", "--max-files", "100", "--", "llm", "-s", "review this"},
			`{"max_files":100,"on_change":{"argv":["llm","-s","review this"]},"path":"/src","settle":"30s","standing":true}`},
		{[]string{"add", "folder", "/src", "--settle", "30s", "--max-wait", "5m"},
			`{"max_wait":"5m","path":"/src","settle":"30s"}`},
		{[]string{"add", "folder", "/src", "--standing", "--on-change", "wc -l", "--on-change-timeout", "1m"},
			`{"on_change":{"shell":"wc -l","timeout":"1m"},"path":"/src","standing":true}`},
	} {
		r := runCLI(t, env, tc.args...)
		if r.code != 0 {
			t.Errorf("vigil %v: exit %d: %s", tc.args, r.code, r.stderr)
			continue
		}
		want := vigil.RegisterRequest{Kind: vigil.KindFolder, Recipient: "agent-7", Predicate: json.RawMessage(tc.pred)}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("vigil %v sent (-want +got):\n%s", tc.args, diff)
		}
	}
	for _, args := range [][]string{
		{"add", "folder"},
		{"add", "folder", "/a", "/b"},
		{"add", "folder", "/a", "--on-change", "x", "--", "y"},
		{"add", "folder", "/a", "--on-change-timeout", "1m"},
	} {
		if r := runCLI(t, env, args...); r.code != ExitUsage {
			t.Errorf("vigil %v: exit %d, want %d (usage)", args, r.code, ExitUsage)
		}
	}
}

func quoteJSON(s string) string { b, _ := json.Marshal(s); return string(b) }

// TestAddFolderAgainstDaemon adds a folder watch on a running daemon: the
// first check is the baseline, shown at once with --observe.
func TestAddFolderAgainstDaemon(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	r := d.vigil(t, "add", "folder", d.root, "--standing", "--pattern", "*.md", "--observe", "--for", "fay")
	if r.code != 0 {
		t.Fatalf("add folder: exit %d: %s", r.code, r.stderr)
	}
	want := "First check: pending: 0 files watched"
	if !strings.Contains(r.stdout, "Watching the folder "+d.root) || !strings.Contains(r.stdout, want) {
		t.Errorf("add folder printed:\n%s\nwant the watch and %q", r.stdout, want)
	}
}
