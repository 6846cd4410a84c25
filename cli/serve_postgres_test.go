package cli

import (
	"bytes"
	"context"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vigil-run/vigil/internal/pgtest"
)

// TestServePostgresFromEnv: VIGIL_STORE=postgres://… makes vigil serve run
// on PostgreSQL: it says so (without the password), and writes no SQLite
// file into the data dir.
func TestServePostgresFromEnv(t *testing.T) {
	u, err := url.Parse(pgtest.Schema(t, "vigil_cli"))
	if err != nil {
		t.Fatal(err)
	}
	u.User = url.UserPassword(u.User.Username(), "pw-not-shown") // trust auth ignores it

	dataDir := t.TempDir()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var out bytes.Buffer
	errw := &stopOnServing{cancel: cancel}
	vars := map[string]string{"HOME": t.TempDir(), "VIGIL_STORE": u.String()}
	root := newRoot(&env{stdout: &out, stderr: errw, getenv: func(k string) string { return vars[k] }, terminal: func(io.Writer) bool { return false }})
	root.SetArgs([]string{"serve", "--data-dir", dataDir, "--listen", "127.0.0.1:0"})
	if err := root.ExecuteContext(ctx); ExitCode(err) != 0 {
		t.Fatalf("serve: %v\n%s", err, errw.String())
	}
	logs := errw.String()
	if !strings.Contains(logs, "vigil is serving") || !strings.Contains(logs, `store="postgres://…@`) {
		t.Errorf("serve's log does not say it serves on PostgreSQL:\n%s", logs)
	}
	if strings.Contains(logs, "pw-not-shown") {
		t.Errorf("serve's log shows the store's password:\n%s", logs)
	}
	if _, err := os.Stat(filepath.Join(dataDir, "vigil.db")); err == nil {
		t.Errorf("serve on PostgreSQL made a SQLite file in the data dir")
	}
}
