package daemon_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/vigil-run/vigil"
	"github.com/vigil-run/vigil/daemon"
	"github.com/vigil-run/vigil/internal/sqlitetest"
)

// TestSecondDaemonRefused: a daemon holds its data dir for as long as it
// runs; a second one on the same dir is refused (ErrRefused) naming the
// first's pid and address, and starts once the first has stopped.
func TestSecondDaemonRefused(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t.TempDir(), t.TempDir())
	first := start(t, cfg)
	_, err := daemon.New(t.Context(), cfg, nil)
	if !errors.Is(err, daemon.ErrRefused) {
		t.Fatalf("New on a data dir another daemon serves: error = %v, want ErrRefused", err)
	}
	for _, want := range []string{"another vigil", fmt.Sprintf("pid %d", os.Getpid()), first.Addr(), cfg.DataDir} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	// The refused one took nothing from the first.
	c := newClient(t, first)
	if _, err := c.Register(t.Context(), vigil.RegisterRequest{Kind: vigil.KindTimer, Predicate: json.RawMessage(`{"in":"1h"}`), Recipient: "r"}); err != nil {
		t.Fatalf("Register on the first daemon after a second was refused: %v", err)
	}
	if err := first.stop(); err != nil {
		t.Fatal(err)
	}
	second := start(t, cfg)
	if got := listAll(t, newClient(t, second)); len(got) != 1 {
		t.Errorf("the second daemon, once the first stopped, lists %d watches, want 1", len(got))
	}
}

// TestFailedFirstStartStartsAgain: a first start that fails (on a port in
// use; before its database is made) leaves a data dir the next start takes
// as it is, not as one whose database was lost.
func TestFailedFirstStartStartsAgain(t *testing.T) {
	t.Parallel()
	t.Run("port in use", func(t *testing.T) {
		t.Parallel()
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		cfg := testConfig(filepath.Join(t.TempDir(), "vigil"), t.TempDir())
		cfg.Listen = ln.Addr().String()
		if _, err := daemon.New(t.Context(), cfg, nil); err == nil || errors.Is(err, daemon.ErrRefused) {
			t.Fatalf("New on a port in use: error = %v, want a listen error", err)
		}
		ln.Close()
		cfg.Listen = "127.0.0.1:0"
		start(t, cfg)
	})
	t.Run("store not opened", func(t *testing.T) {
		t.Parallel()
		cfg := testConfig(filepath.Join(t.TempDir(), "vigil"), t.TempDir())
		ctx, cancel := context.WithCancel(t.Context())
		cancel() // the store cannot open
		if _, err := daemon.New(ctx, cfg, nil); err == nil || errors.Is(err, daemon.ErrRefused) {
			t.Fatalf("New with a cancelled context: error = %v, want the store's error", err)
		}
		start(t, cfg)
	})
}

func modeOf(t *testing.T, path string) fs.FileMode {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Mode().Perm()
}

// TestDataDirModes: the data dir is 0700 and every file in it that holds
// data or secrets 0600, when the daemon makes them and when it finds them
// looser at a later start (then with a warning for each).
func TestDataDirModes(t *testing.T) {
	t.Parallel()
	dataDir := filepath.Join(t.TempDir(), "vigil")
	cfg := testConfig(dataDir, t.TempDir())
	files := []string{daemon.DatabaseFile, daemon.DatabaseFile + "-wal", daemon.DatabaseFile + "-shm",
		daemon.TokenFile, daemon.WebhookSecretFile, daemon.LockFile}
	check := func(when string) {
		t.Helper()
		if got := modeOf(t, dataDir); got != 0o700 {
			t.Errorf("%s: data dir mode %v, want 0700", when, got)
		}
		for _, f := range files {
			if got := modeOf(t, filepath.Join(dataDir, f)); got != 0o600 {
				t.Errorf("%s: %s mode %v, want 0600", when, f, got)
			}
		}
	}
	d := start(t, cfg)
	check("first start")
	if err := d.stop(); err != nil {
		t.Fatal(err)
	}

	// Loosened while it was stopped (a restore with cp, a chmod -R).
	if err := os.Chmod(dataDir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{daemon.DatabaseFile, daemon.TokenFile, daemon.WebhookSecretFile, daemon.LockFile} {
		if err := os.Chmod(filepath.Join(dataDir, f), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var logs syncBuffer
	startLogged(t, cfg, &logs)
	check("restart")
	for _, want := range []string{"path=" + dataDir + " ", filepath.Join(dataDir, daemon.DatabaseFile), daemon.TokenFile, daemon.WebhookSecretFile} {
		found := false
		for _, l := range strings.Split(logs.String(), "\n") {
			if strings.Contains(l, "level=WARN") && strings.Contains(l, want) {
				found = true
			}
		}
		if !found {
			t.Errorf("no warning names %s; logs:\n%s", want, logs.String())
		}
	}
}

// TestStorageFull plays a full disk under a running daemon (a write fault
// on its store, as ENOSPC): a registration is answered 507 storage_full
// with a sentence and writes nothing; reads, long-polls and health keep
// answering; once there is room again registrations succeed, with no
// restart.
func TestStorageFull(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t.TempDir(), t.TempDir())
	d := start(t, cfg)
	c := newClient(t, d)
	timer := func(in string) vigil.RegisterRequest {
		return vigil.RegisterRequest{Kind: vigil.KindTimer, Predicate: json.RawMessage(`{"in":"` + in + `"}`), Recipient: "r"}
	}
	w1, err := c.Register(t.Context(), timer("1h"))
	if err != nil {
		t.Fatal(err)
	}

	d.SQLiteStore().SetWriteFaultFunc(func() error { return syscall.ENOSPC })
	code, body := call(t, d, d.Token(), "POST", "/v1/watches", `{"kind":"timer","predicate":{"in":"2h"},"recipient":"r"}`)
	var e struct {
		Error struct{ Code, Message string }
	}
	if err := json.Unmarshal([]byte(body), &e); err != nil {
		t.Fatalf("POST /v1/watches on a full disk: %d %s", code, body)
	}
	if code != http.StatusInsufficientStorage || e.Error.Code != string(vigil.CodeStorageFull) || !strings.Contains(e.Error.Message, "full") {
		t.Errorf("POST /v1/watches on a full disk = %d %s, want 507 storage_full with a sentence", code, body)
	}
	if _, err := c.Register(t.Context(), timer("3h")); !errors.Is(err, vigil.ErrStorageFull) {
		t.Errorf("client Register on a full disk error = %v, want storage_full", err)
	}
	for _, path := range []string{"/healthz", "/readyz"} {
		if code, body := call(t, d, "", "GET", path, ""); code != http.StatusOK {
			t.Errorf("GET %s on a full disk = %d %s, want 200", path, code, body)
		}
	}
	if w, err := c.Watch(t.Context(), w1.ID); err != nil || w.State != vigil.StatePending {
		t.Errorf("GET watch on a full disk = %v, %v", w, err)
	}
	if w, err := c.Wait(t.Context(), w1.ID, 50*time.Millisecond); err != nil || w.State != vigil.StatePending {
		t.Errorf("long-poll on a full disk = %v, %v", w, err)
	}
	zero := int64(0)
	if _, err := c.Messages(t.Context(), vigil.MessagesRequest{Recipient: "r", After: &zero}); err != nil {
		t.Errorf("reading the mailbox on a full disk: %v", err)
	}
	if got := listAll(t, c); len(got) != 1 {
		t.Errorf("%d watches after refused registrations, want 1: %+v", len(got), got)
	}

	d.SQLiteStore().SetWriteFaultFunc(nil) // room again
	w2, err := c.Register(t.Context(), timer("2h"))
	if err != nil {
		t.Fatalf("Register once there is room again: %v", err)
	}
	got := listAll(t, c)
	if len(got) != 2 || (got[0].ID != w1.ID && got[1].ID != w1.ID) || (got[0].ID != w2.ID && got[1].ID != w2.ID) {
		t.Errorf("watches = %+v, want %s and %s", got, w1.ID, w2.ID)
	}
}

// TestBackupRefusesEmptyDatabase: vigil backup of an empty database says
// so and leaves it empty (opening it through the store would write a fresh
// schema into it, and the next start would take it for a new one).
func TestBackupRefusesEmptyDatabase(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t.TempDir(), t.TempDir())
	if err := os.WriteFile(cfg.DatabasePath(), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	dest := filepath.Join(t.TempDir(), "copy.db")
	err := daemon.Backup(t.Context(), cfg, dest)
	if err == nil || !strings.Contains(err.Error(), "empty") || !strings.Contains(err.Error(), cfg.DatabasePath()) {
		t.Errorf("Backup of an empty database: error = %v, want one saying it is empty", err)
	}
	if fi, err := os.Stat(cfg.DatabasePath()); err != nil || fi.Size() != 0 {
		t.Errorf("Backup changed the empty database: %v, %v", fi, err)
	}
	if _, err := os.Stat(dest); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Backup of an empty database wrote %s", dest)
	}
}

// TestRunRefusesDamagedDatabase: the check of the SQLite file runs on
// after New, beside the reading of the pending watches; a damaged page
// stops Run with a refusal (exit 2 from serve) naming the file and what to
// do, before the daemon is ready and without a write to the file.
func TestRunRefusesDamagedDatabase(t *testing.T) {
	t.Parallel()
	cfg := testConfig(filepath.Join(t.TempDir(), "vigil"), t.TempDir())
	d := start(t, cfg)
	if _, err := newClient(t, d).Register(t.Context(), vigil.RegisterRequest{Kind: vigil.KindTimer, Predicate: json.RawMessage(`{"in":"1h"}`), Recipient: "r"}); err != nil {
		t.Fatal(err)
	}
	if err := d.stop(); err != nil {
		t.Fatal(err)
	}
	// Junk over the root page of the receipts, which the start reads
	// only to resume deliveries, a write: the check is what finds it.
	path := cfg.DatabasePath()
	sqlitetest.DamageRoot(t, path, "receipts")
	unchanged := sqlitetest.Unchanged(t, path)

	again, err := daemon.New(t.Context(), cfg, nil)
	if err != nil {
		t.Fatalf("New: %v; want the check left to Run", err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	err = again.Run(ctx)
	if !errors.Is(err, daemon.ErrRefused) {
		t.Fatalf("Run on a damaged file: %v; want a refusal", err)
	}
	for _, want := range []string{path, "damaged", "backup"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("refusal %q does not say %q", err, want)
		}
	}
	select {
	case <-again.Primed():
		t.Error("the daemon on a damaged file became ready")
	default:
	}
	unchanged()
}

// TestSecondDaemonOnOneDatabaseRefused: two daemons with two data dirs
// whose store names one SQLite file (sqlite:PATH) would each run every
// schedule, command and delivery of it; the second is refused, naming
// the first and the database, whether the first names the file as its
// store or holds it as its data dir's own, and starts once the first has
// stopped.
func TestSecondDaemonOnOneDatabaseRefused(t *testing.T) {
	t.Parallel()
	shared := t.TempDir()
	for _, c := range []struct {
		name string
		db   string
		own  bool // the first daemon's data dir is the database's
	}{
		{"elsewhere", filepath.Join(shared, "watches.db"), false},
		{"a data dir's own", filepath.Join(shared, daemon.DatabaseFile), true},
	} {
		t.Run(c.name, func(t *testing.T) {
			root := t.TempDir()
			firstCfg := testConfig(t.TempDir(), root)
			if c.own {
				firstCfg.DataDir = filepath.Dir(c.db)
			} else {
				firstCfg.Store = "sqlite:" + c.db
			}
			secondCfg := testConfig(t.TempDir(), root)
			secondCfg.Store = "sqlite:" + c.db
			first := start(t, firstCfg)
			_, err := daemon.New(t.Context(), secondCfg, nil)
			if !errors.Is(err, daemon.ErrRefused) {
				t.Fatalf("New on a database another daemon serves: error = %v, want ErrRefused", err)
			}
			for _, want := range []string{"another vigil", fmt.Sprintf("pid %d", os.Getpid()), first.Addr(), c.db} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not say %q", err, want)
				}
			}
			if err := first.stop(); err != nil {
				t.Fatal(err)
			}
			start(t, secondCfg)
		})
	}
}

// TestCloseReleasesLockLast: a daemon holds its data dir's lock until it
// has closed everything else, its watchers included: a second daemon
// tried meanwhile is refused, rather than starting beside what the first
// still runs.
func TestCloseReleasesLockLast(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t.TempDir(), t.TempDir())
	d, err := daemon.New(t.Context(), cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	var second error
	closed := false
	d.OnCloseWatchers(func() {
		closed = true
		other, err := daemon.New(context.Background(), cfg, nil)
		if err == nil {
			other.Close()
		}
		second = err
	})
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	select {
	case <-d.Primed():
	case err := <-done:
		t.Fatalf("Run stopped before it was primed: %v", err)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run: %v", err)
	}
	if !closed {
		t.Fatal("Close closed no watcher")
	}
	if !errors.Is(second, daemon.ErrRefused) {
		t.Errorf("a second daemon started while the first closed its watchers: error = %v, want ErrRefused", second)
	}
}
