package cli

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/vigil-run/vigil"
	"github.com/vigil-run/vigil/daemon"
	"github.com/vigil-run/vigil/store/sqlite"
)

// serve runs "vigil serve" on dataDir as a user would, on a port of the
// system's choosing. Every case here must refuse to start; one that starts
// after all is stopped as soon as it says it is serving (and exits 0).
func serve(t *testing.T, dataDir string) result {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var out bytes.Buffer
	errw := &stopOnServing{cancel: cancel}
	vars := map[string]string{"HOME": t.TempDir()}
	root := newRoot(&env{stdout: &out, stderr: errw, getenv: func(k string) string { return vars[k] }, terminal: func(io.Writer) bool { return false }})
	root.SetArgs([]string{"serve", "--data-dir", dataDir, "--listen", "127.0.0.1:0"})
	err := root.ExecuteContext(ctx)
	return result{stdout: out.String(), stderr: errw.String(), code: ExitCode(err)}
}

// stopOnServing collects what serve writes to stderr and cancels it once
// it says it is serving.
type stopOnServing struct {
	mu     sync.Mutex
	b      bytes.Buffer
	cancel func()
}

func (w *stopOnServing) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if bytes.Contains(p, []byte("vigil is serving")) {
		w.cancel()
	}
	return w.b.Write(p)
}

func (w *stopOnServing) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.String()
}

// TestServeRefusesLostDatabase: a database that is empty, or missing, in
// a data dir that was used before is not taken for a new one: serve exits
// 2, before listening, with one sentence naming the file and the two ways
// out, and touches nothing.
func TestServeRefusesLostDatabase(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		files map[string]string // in the data dir; "" is an empty file
		say   []string
	}{
		{"empty database beside the token", map[string]string{daemon.DatabaseFile: "", daemon.TokenFile: strings.Repeat("ab", 32)}, []string{"empty", daemon.TokenFile}},
		{"empty database beside the webhook secret", map[string]string{daemon.DatabaseFile: "", daemon.WebhookSecretFile: "whsec_x"}, []string{"empty", daemon.WebhookSecretFile}},
		{"database missing beside the token", map[string]string{daemon.TokenFile: strings.Repeat("ab", 32)}, []string{"missing", daemon.TokenFile}},
		{"database missing beside the webhook secret", map[string]string{daemon.WebhookSecretFile: "whsec_x"}, []string{"missing", daemon.WebhookSecretFile}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			dataDir := filepath.Join(t.TempDir(), "vigil")
			if err := os.Mkdir(dataDir, 0o700); err != nil {
				t.Fatal(err)
			}
			for name, body := range tt.files {
				if err := os.WriteFile(filepath.Join(dataDir, name), []byte(body), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			r := serve(t, dataDir)
			if r.code != ExitUsage {
				t.Fatalf("serve: exit %d, want %d; stderr:\n%s", r.code, ExitUsage, r.stderr)
			}
			db := filepath.Join(dataDir, daemon.DatabaseFile)
			msg := strings.TrimSpace(r.stderr)
			for _, want := range append([]string{db, "restore", "backup", "remove", "afresh"}, tt.say...) {
				if !strings.Contains(msg, want) {
					t.Errorf("serve said %q; want it to say %q", msg, want)
				}
			}
			if strings.Count(msg, "\n") != 0 || strings.Contains(msg, "serving") {
				t.Errorf("serve said %q; want one line and no start", msg)
			}
			fi, err := os.Stat(db)
			_, had := tt.files[daemon.DatabaseFile]
			switch {
			case had && (err != nil || fi.Size() != 0):
				t.Errorf("the empty database was changed: %v, %v", fi, err)
			case !had && err == nil:
				t.Errorf("serve created %s in a used data dir", db)
			}
		})
	}
}

// TestServeRefusesSecondDaemon: a second vigil serve on a data dir another
// serves exits 2 naming the other's pid and address, while vigil backup
// still works against the running one.
func TestServeRefusesSecondDaemon(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	if r := d.vigil(t, "add", "timer", "1h", "--for", "gus"); r.code != 0 {
		t.Fatalf("add: %+v", r)
	}
	r := serve(t, d.dataDir)
	if r.code != ExitUsage {
		t.Fatalf("second serve: exit %d, want %d; stderr:\n%s", r.code, ExitUsage, r.stderr)
	}
	msg := strings.TrimSpace(r.stderr)
	for _, want := range []string{"another vigil", fmt.Sprint(os.Getpid()), d.Addr(), d.dataDir} {
		if !strings.Contains(msg, want) {
			t.Errorf("second serve said %q; want it to say %q", msg, want)
		}
	}
	if strings.Count(msg, "\n") != 0 {
		t.Errorf("second serve said %q; want one line", msg)
	}
	// The first carries on, and can be backed up.
	if r := d.vigil(t, "ls"); r.code != 0 || !strings.Contains(r.stdout, "gus") {
		t.Errorf("ls on the first daemon after a second tried: %+v", r)
	}
	dest := filepath.Join(t.TempDir(), "copy.db")
	if r := runCLI(t, map[string]string{"HOME": t.TempDir()}, "backup", "--data-dir", d.dataDir, dest); r.code != 0 {
		t.Fatalf("backup of a running daemon: %+v", r)
	}
	st, err := sqlite.Open(t.Context(), dest, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	page, err := st.WatchList(t.Context(), vigil.WatchListParams{})
	if err != nil || len(page.Watches) != 1 || page.Watches[0].Recipient != "gus" {
		t.Errorf("the backup holds %+v, %v; want gus's watch", page, err)
	}
}

// TestServeRefusesDamagedDatabase: a damaged database stops serve with
// exit 2 before it listens, naming the file and what to do.
func TestServeRefusesDamagedDatabase(t *testing.T) {
	t.Parallel()
	dataDir := filepath.Join(t.TempDir(), "vigil")
	if err := os.Mkdir(dataDir, 0o700); err != nil {
		t.Fatal(err)
	}
	db := filepath.Join(dataDir, daemon.DatabaseFile)
	st, err := sqlite.Open(t.Context(), db, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	// Junk over every page after the first: the header still reads, the
	// schema does not.
	b, err := os.ReadFile(db)
	if err != nil {
		t.Fatal(err)
	}
	if len(b) < 8192 {
		t.Fatalf("database of %d bytes: too small to damage a page", len(b))
	}
	copy(b[4096:], bytes.Repeat([]byte{0xA5}, len(b)-4096))
	if err := os.WriteFile(db, b, 0o600); err != nil {
		t.Fatal(err)
	}
	r := serve(t, dataDir)
	if r.code != ExitUsage {
		t.Fatalf("serve on a damaged database: exit %d, want %d; stderr:\n%s", r.code, ExitUsage, r.stderr)
	}
	msg := strings.TrimSpace(r.stderr)
	for _, want := range []string{db, "damaged", "backup"} {
		if !strings.Contains(msg, want) {
			t.Errorf("serve said %q; want it to say %q", msg, want)
		}
	}
	if strings.Contains(msg, "serving") {
		t.Errorf("serve said it was serving a damaged database: %q", msg)
	}
}
