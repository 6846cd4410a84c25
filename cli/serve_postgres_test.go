package cli

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
)

// TestServePostgresFromEnv: VIGIL_STORE=postgres://… makes vigil serve run
// on PostgreSQL: it says so (without the password), and writes no SQLite
// file into the data dir.
func TestServePostgresFromEnv(t *testing.T) {
	base := os.Getenv("VIGIL_TEST_POSTGRES")
	if base == "" {
		if os.Getenv("CI") != "" {
			t.Fatal("VIGIL_TEST_POSTGRES is empty under CI")
		}
		t.Skip("VIGIL_TEST_POSTGRES is not set: this test needs a PostgreSQL database")
	}
	var b [6]byte
	rand.Read(b[:])
	schema := "vigil_cli_" + hex.EncodeToString(b[:])
	exec := func(stmt string) {
		ctx := context.Background()
		c, err := pgx.Connect(ctx, base)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close(ctx)
		if _, err := c.Exec(ctx, stmt); err != nil {
			t.Fatal(err)
		}
	}
	exec("CREATE SCHEMA " + schema)
	t.Cleanup(func() { exec("DROP SCHEMA " + schema + " CASCADE") })
	u, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	u.User = url.UserPassword(u.User.Username(), "pw-not-shown") // trust auth ignores it
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()

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
