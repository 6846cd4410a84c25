package daemon_test

import (
	"context"
	"database/sql"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/vigil-run/vigil/daemon"
	"github.com/vigil-run/vigil/store/sqlite"
)

// backupSource is a config whose data dir holds a new database, closed,
// and that database's path.
func backupSource(t *testing.T) (daemon.Config, string) {
	t.Helper()
	cfg := testConfig(t.TempDir(), t.TempDir())
	path := cfg.DatabasePath()
	st, err := sqlite.Open(t.Context(), path, nil)
	if err != nil {
		t.Fatal(err)
	}
	st.Close()
	return cfg, path
}

// TestBackupBesideALiveWriter: vigil backup copies a database another
// process keeps committing to without writing to it. That writer is a
// daemon whose WAL was not preallocated (too little free space at its
// start): vigil backup opened the database as a store, which extended the
// WAL with zeros from the size it read, over the frames the daemon
// committed meanwhile, and the live database read as malformed.
func TestBackupBesideALiveWriter(t *testing.T) {
	t.Parallel()
	cfg, path := backupSource(t)
	live, err := sql.Open("sqlite", path+"?_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)&_pragma=synchronous(FULL)")
	if err != nil {
		t.Fatal(err)
	}
	defer live.Close()
	live.SetMaxOpenConns(1)
	ctx := t.Context()
	if _, err := live.ExecContext(ctx, "CREATE TABLE live (n INTEGER)"); err != nil {
		t.Fatal(err)
	}
	// The live writer commits one row after another until the backup is
	// done; it has committed one before the backup starts.
	stop := make(chan struct{})
	first := make(chan struct{})
	committed := make(chan int, 1)
	go func() {
		n := 0
		defer func() { committed <- n }()
		for {
			if _, err := live.ExecContext(context.Background(), "INSERT INTO live VALUES (?)", n+1); err != nil {
				t.Errorf("live commit %d: %v", n+1, err)
				return
			}
			if n++; n == 1 {
				close(first)
			}
			select {
			case <-stop:
				return
			default:
			}
		}
	}()
	<-first
	dest := filepath.Join(t.TempDir(), "copy.db")
	berr := daemon.Backup(ctx, cfg, dest)
	close(stop)
	n := <-committed
	if berr != nil {
		t.Fatalf("Backup: %v", berr)
	}
	// The writer's WAL stays its own size (SQLite's autocheckpoint keeps it
	// to a few MiB); a store's Open extends it to 24 MiB.
	if fi, err := os.Stat(path + "-wal"); err != nil || fi.Size() >= 24<<20 {
		t.Errorf("the live database's WAL after the backup: %v, %v; Backup extended it", fi.Size(), err)
	}
	check := func(name string, db *sql.DB, lo, hi int) {
		t.Helper()
		var ic string
		if err := db.QueryRowContext(ctx, "PRAGMA integrity_check").Scan(&ic); err != nil || ic != "ok" {
			t.Errorf("%s: integrity_check = %q, %v", name, ic, err)
		}
		var got int
		if err := db.QueryRowContext(ctx, "SELECT count(*) FROM live").Scan(&got); err != nil || got < lo || got > hi {
			t.Errorf("%s holds %d rows (%v), want %d to %d", name, got, err, lo, hi)
		}
	}
	check("the live database", live, n, n)
	fresh, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer fresh.Close()
	check("the live database, read by a new connection", fresh, n, n)
	cp, err := sql.Open("sqlite", dest)
	if err != nil {
		t.Fatal(err)
	}
	defer cp.Close()
	check("the copy", cp, 1, n)
}

// TestBackupOfANewerSchema: vigil backup copies a database a newer vigil
// wrote as it is (it used to open it as a store, and refuse it), and
// migrates nothing.
func TestBackupOfANewerSchema(t *testing.T) {
	t.Parallel()
	cfg, path := backupSource(t)
	newer := sqlite.SchemaVersion() + 1
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.ExecContext(t.Context(), "INSERT INTO goose_db_version (version_id, is_applied) VALUES (?, 1)", newer); err != nil {
		t.Fatal(err)
	}
	dest := filepath.Join(t.TempDir(), "copy.db")
	if err := daemon.Backup(t.Context(), cfg, dest); err != nil {
		t.Fatalf("Backup of a newer schema: %v", err)
	}
	cp, err := sql.Open("sqlite", dest)
	if err != nil {
		t.Fatal(err)
	}
	defer cp.Close()
	var got int64
	if err := cp.QueryRowContext(t.Context(), "SELECT max(version_id) FROM goose_db_version WHERE is_applied").Scan(&got); err != nil || got != newer {
		t.Errorf("the copy is at schema %d (%v), want %d", got, err, newer)
	}
	if _, err := sqlite.Open(t.Context(), dest, nil); !errors.Is(err, sqlite.ErrSchemaNewer) {
		t.Errorf("Open of the copy: %v, want ErrSchemaNewer", err)
	}
}
