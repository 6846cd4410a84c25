package sqlite

import (
	"bytes"
	"cmp"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pressly/goose/v3"
	"github.com/vigil-run/vigil"
	"github.com/vigil-run/vigil/store/storetest"
	"go.uber.org/goleak"
	"modernc.org/sqlite"
)

func open(t testing.TB, path string, opts *Options) *Store {
	t.Helper()
	s, err := Open(context.Background(), path, opts)
	if err != nil {
		t.Fatalf("Open(%s) error = %v", path, err)
	}
	return s
}

// openRaw opens path without the store, as another program would.
// migrateTo brings db up to schema version v with this build's
// migrations, for tests of what a later one does to its rows.
func migrateTo(t *testing.T, db *sql.DB, v int64) {
	t.Helper()
	fsys, err := fs.Sub(migrationFiles, "migrations")
	if err != nil {
		t.Fatal(err)
	}
	p, err := goose.NewProvider(goose.DialectSQLite3, db, fsys, goose.WithDisableGlobalRegistry(true))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.UpTo(t.Context(), v); err != nil {
		t.Fatal(err)
	}
}

func openRaw(t *testing.T, path string) *sql.DB {
	t.Helper()
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	return db
}

func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) (vigil.Store, func() vigil.Store) {
		path := filepath.Join(t.TempDir(), "vigil.db")
		var mu sync.Mutex
		cur := open(t, path, nil)
		t.Cleanup(func() {
			mu.Lock()
			defer mu.Unlock()
			if err := cur.Close(); err != nil {
				t.Errorf("Close error = %v", err)
			}
		})
		reopen := func() vigil.Store {
			mu.Lock()
			defer mu.Unlock()
			if err := cur.Close(); err != nil {
				t.Fatalf("Close error = %v", err)
			}
			cur = open(t, path, nil)
			return cur
		}
		return cur, reopen
	})
}

func TestRefusesNewerSchema(t *testing.T) {
	path := filepath.Join(t.TempDir(), "vigil.db")
	s := open(t, path, nil)
	// A newer build applied a migration this one does not know.
	newer := SchemaVersion() + 1
	s.Close()

	db := openRaw(t, path)
	if _, err := db.ExecContext(t.Context(), "INSERT INTO goose_db_version (version_id, is_applied) VALUES (?, 1)", newer); err != nil {
		t.Fatal(err)
	}
	db.Close()

	_, err := Open(t.Context(), path, nil)
	if !errors.Is(err, ErrSchemaNewer) {
		t.Fatalf("Open of a newer schema error = %v, want ErrSchemaNewer", err)
	}
	for _, want := range []string{path, fmt.Sprint(newer), fmt.Sprint(SchemaVersion()), "newer"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
}

func TestPragmas(t *testing.T) {
	_, _ = sqlite.Fdatasync(false) // as before any Open: Open turns it on
	path := filepath.Join(t.TempDir(), "vigil.db")
	s := open(t, path, nil)
	defer s.Close()
	check := func(name, q, want string) {
		t.Helper()
		var got string
		err := s.w.do(t.Context(), func(w *wtx) error {
			return w.conn.QueryRowContext(context.Background(), q).Scan(&got)
		})
		if err != nil {
			t.Fatalf("%s on the writer: %v", q, err)
		}
		if !strings.EqualFold(got, want) {
			t.Errorf("writer %s = %q, want %q", name, got, want)
		}
		if name == "synchronous" || name == "foreign_keys" || name == "journal_mode" {
			if err := s.readDB.QueryRowContext(t.Context(), q).Scan(&got); err != nil {
				t.Fatal(err)
			}
			if !strings.EqualFold(got, want) {
				t.Errorf("reader %s = %q, want %q", name, got, want)
			}
		}
	}
	check("journal_mode", "PRAGMA journal_mode", "wal")
	check("synchronous", "PRAGMA synchronous", "2") // FULL
	check("foreign_keys", "PRAGMA foreign_keys", "1")
	check("busy_timeout", "PRAGMA busy_timeout", fmt.Sprint(busyTimeoutMS))
	// Commits sync with fdatasync where the library has it (useFdatasync).
	switch runtime.GOOS {
	case "linux", "freebsd", "netbsd", "illumos":
		if !sqlite.FdatasyncEnabled() {
			t.Errorf("after Open, SQLite syncs with fsync; want fdatasync on %s", runtime.GOOS)
		}
	}

	n := open(t, filepath.Join(t.TempDir(), "normal.db"), &Options{Synchronous: "normal"})
	defer n.Close()
	var got string
	if err := n.readDB.QueryRowContext(t.Context(), "PRAGMA synchronous").Scan(&got); err != nil || got != "1" {
		t.Errorf("synchronous with Options.Synchronous normal = %q, %v; want 1", got, err)
	}
	if _, err := Open(t.Context(), filepath.Join(t.TempDir(), "off.db"), &Options{Synchronous: "OFF"}); err == nil {
		t.Errorf("Open with synchronous OFF: no error")
	}
}

func TestReadersAreReadOnly(t *testing.T) {
	s := open(t, filepath.Join(t.TempDir(), "vigil.db"), nil)
	defer s.Close()
	if _, err := s.readDB.ExecContext(t.Context(), "DELETE FROM watches"); err == nil {
		t.Errorf("a write through the read pool succeeded")
	}
}

func TestBackup(t *testing.T) {
	dir := t.TempDir()
	s := open(t, filepath.Join(dir, "vigil.db"), nil)
	defer s.Close()
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	w := &vigil.Watch{ID: "w1", Kind: vigil.KindTimer, Recipient: "r", CreatedAt: at, Deadline: at.Add(time.Hour), Identity: "i1"}
	if _, err := s.WatchCreate(t.Context(), vigil.WatchCreateParams{Watch: w}); err != nil {
		t.Fatal(err)
	}
	dest := filepath.Join(dir, "backup.db")
	if err := s.Backup(t.Context(), dest); err != nil {
		t.Fatalf("Backup error = %v", err)
	}
	// The store keeps working, and its readers are still read-only.
	if _, err := s.WatchCreate(t.Context(), vigil.WatchCreateParams{Watch: &vigil.Watch{ID: "w2", Kind: vigil.KindTimer, Recipient: "r", CreatedAt: at, Identity: "i2"}}); err != nil {
		t.Fatal(err)
	}
	for range 8 {
		if _, err := s.readDB.ExecContext(t.Context(), "DELETE FROM watches"); err == nil {
			t.Fatal("a read connection is writable after Backup")
		}
	}
	if err := s.Backup(t.Context(), dest); err == nil {
		t.Errorf("Backup over an existing file: no error")
	}

	b := open(t, dest, nil)
	defer b.Close()
	got, err := b.WatchGet(t.Context(), "w1")
	if err != nil || got.ID != "w1" {
		t.Fatalf("WatchGet from the backup = %v, %v", got, err)
	}
	if _, err := b.WatchGet(t.Context(), "w2"); vigil.ErrorCode(err) != vigil.CodeNotFound {
		t.Errorf("the backup holds a watch made after it: %v", err)
	}
}

// schemaVersion is the schema version goose recorded in the database at
// path, read by a connection of its own.
func schemaVersion(t *testing.T, path string) int64 {
	t.Helper()
	db := openRaw(t, path)
	defer db.Close()
	var v int64
	if err := db.QueryRowContext(t.Context(), "SELECT max(version_id) FROM goose_db_version WHERE is_applied").Scan(&v); err != nil {
		t.Fatal(err)
	}
	return v
}

// TestBackupFileCopiesTheSchemaAsItIs: BackupFile, which vigil backup runs
// beside a daemon, migrates nothing and writes nothing to the database: a
// database at an older schema (a daemon of the previous release still
// running) stays at it, byte for byte, and so does its copy, which Open
// migrates once restored; a database at a newer schema is copied as it is
// too, and it is the restored copy that this build refuses to open.
func TestBackupFileCopiesTheSchemaAsItIs(t *testing.T) {
	t.Run("older", func(t *testing.T) {
		dir := t.TempDir()
		path := filepath.Join(dir, "vigil.db")
		db := openRaw(t, path)
		older := SchemaVersion() - 1
		migrateTo(t, db, older)
		db.Close()
		before, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		dest := filepath.Join(dir, "copy.db")
		if err := BackupFile(t.Context(), path, dest); err != nil {
			t.Fatalf("BackupFile error = %v", err)
		}
		if after, err := os.ReadFile(path); err != nil || !bytes.Equal(after, before) {
			t.Errorf("BackupFile changed the database (%v)", err)
		}
		if got := schemaVersion(t, path); got != older {
			t.Errorf("the database is at schema %d after BackupFile, want %d: it was migrated", got, older)
		}
		if got := schemaVersion(t, dest); got != older {
			t.Errorf("the copy is at schema %d, want the database's %d", got, older)
		}
		open(t, dest, nil).Close()
		if got := schemaVersion(t, dest); got != SchemaVersion() {
			t.Errorf("the copy, opened, is at schema %d, want %d", got, SchemaVersion())
		}
	})
	t.Run("newer", func(t *testing.T) {
		dir := t.TempDir()
		path := filepath.Join(dir, "vigil.db")
		open(t, path, nil).Close()
		newer := SchemaVersion() + 1
		db := openRaw(t, path)
		if _, err := db.ExecContext(t.Context(), "INSERT INTO goose_db_version (version_id, is_applied) VALUES (?, 1)", newer); err != nil {
			t.Fatal(err)
		}
		db.Close()
		dest := filepath.Join(dir, "copy.db")
		if err := BackupFile(t.Context(), path, dest); err != nil {
			t.Fatalf("BackupFile of a newer schema error = %v, want a copy", err)
		}
		if got := schemaVersion(t, dest); got != newer {
			t.Errorf("the copy is at schema %d, want the database's %d", got, newer)
		}
		if _, err := Open(t.Context(), dest, nil); !errors.Is(err, ErrSchemaNewer) {
			t.Errorf("Open of the copy error = %v, want ErrSchemaNewer", err)
		}
	})
}

// TestBackupFileAfterACrash: the database of a daemon that was killed,
// whose last commits are still only in its WAL (and with no shared-memory
// file), is copied with those commits. Its directory's name has the
// characters a URI escapes.
func TestBackupFileAfterACrash(t *testing.T) {
	dir := t.TempDir()
	s := open(t, filepath.Join(dir, "vigil.db"), nil)
	defer s.Close()
	if _, err := s.WatchCreate(t.Context(), vigil.WatchCreateParams{Watch: timerWatch("w1", "r")}); err != nil {
		t.Fatal(err)
	}
	// The files as a kill leaves them: the commit in the WAL, not yet
	// checkpointed.
	crashed := filepath.Join(t.TempDir(), "a dir%20with #odd?chars")
	if err := os.Mkdir(crashed, 0o700); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"vigil.db", "vigil.db-wal"} {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(crashed, name), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	dest := filepath.Join(t.TempDir(), "copy.db")
	if err := BackupFile(t.Context(), filepath.Join(crashed, "vigil.db"), dest); err != nil {
		t.Fatalf("BackupFile error = %v", err)
	}
	b := open(t, dest, nil)
	defer b.Close()
	if _, err := b.WatchGet(t.Context(), "w1"); err != nil {
		t.Errorf("the copy lacks the commit that was only in the WAL: %v", err)
	}
}

// TestBackupFileRefuses: no database, or a damaged one, is refused, with
// nothing created.
func TestBackupFileRefuses(t *testing.T) {
	dir := t.TempDir()
	missing := filepath.Join(dir, "missing.db")
	dest := filepath.Join(dir, "copy.db")
	if err := BackupFile(t.Context(), missing, dest); err == nil {
		t.Errorf("BackupFile of no database: no error")
	}
	if _, err := os.Stat(missing); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("BackupFile created a database where there was none (%v)", err)
	}
	notDB := filepath.Join(dir, "not.db")
	if err := os.WriteFile(notDB, bytes.Repeat([]byte("this is not SQLite "), 500), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := BackupFile(t.Context(), notDB, dest); !errors.Is(err, ErrCorrupt) {
		t.Errorf("BackupFile of a file that is not a database error = %v, want ErrCorrupt", err)
	}
	if _, err := os.Stat(dest); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a refused BackupFile left %s behind (%v)", dest, err)
	}
}

// TestBatchIsolation runs failing and succeeding writes in the same batches:
// a domain error rolls back only its own op.
func TestBatchIsolation(t *testing.T) {
	s := open(t, filepath.Join(t.TempDir(), "vigil.db"), nil)
	defer s.Close()
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	var wg sync.WaitGroup
	errs := make([]error, 200)
	for i := range errs {
		wg.Go(func() {
			r := fmt.Sprintf("r%d", i%2)
			w := &vigil.Watch{ID: fmt.Sprintf("w%03d", i), Kind: vigil.KindTimer, Recipient: r, CreatedAt: at, Identity: fmt.Sprintf("i%03d", i)}
			_, errs[i] = s.WatchCreate(t.Context(), vigil.WatchCreateParams{Watch: w, MaxActivePerRecipient: 30})
		})
	}
	wg.Wait()
	made := 0
	for _, err := range errs {
		switch vigil.ErrorCode(err) {
		case "":
			made++
		case vigil.CodeQuotaExceeded:
		default:
			t.Errorf("WatchCreate error = %v", err)
		}
	}
	pending, err := s.WatchListPending(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if made != 60 || len(pending) != 60 {
		t.Errorf("made %d, stored %d pending; want 60 and 60", made, len(pending))
	}
	var total int
	if err := s.readDB.QueryRowContext(t.Context(), "SELECT pending FROM counters WHERE recipient = ''").Scan(&total); err != nil || total != 60 {
		t.Errorf("pending counter = %d, %v; want 60", total, err)
	}
}

func TestCanceledContextSkipsWrite(t *testing.T) {
	s := open(t, filepath.Join(t.TempDir(), "vigil.db"), nil)
	defer s.Close()
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	w := &vigil.Watch{ID: "w1", Kind: vigil.KindTimer, Recipient: "r", CreatedAt: time.Unix(1, 0), Identity: "i"}
	if _, err := s.WatchCreate(ctx, vigil.WatchCreateParams{Watch: w}); !errors.Is(err, context.Canceled) {
		t.Fatalf("WatchCreate with a canceled context error = %v", err)
	}
	if _, err := s.WatchGet(t.Context(), "w1"); vigil.ErrorCode(err) != vigil.CodeNotFound {
		t.Errorf("a canceled write was stored: %v", err)
	}
}

func TestCloseWaitsForWrites(t *testing.T) {
	path := filepath.Join(t.TempDir(), "vigil.db")
	s := open(t, path, nil)
	var wg sync.WaitGroup
	results := make([]error, 50)
	for i := range results {
		wg.Go(func() {
			w := &vigil.Watch{ID: fmt.Sprintf("w%02d", i), Kind: vigil.KindTimer, Recipient: "r", CreatedAt: time.Unix(1, 0), Identity: fmt.Sprint(i)}
			_, results[i] = s.WatchCreate(context.Background(), vigil.WatchCreateParams{Watch: w})
		})
	}
	time.Sleep(time.Millisecond)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	if err := s.Close(); err != nil {
		t.Errorf("second Close error = %v", err)
	}
	s = open(t, path, nil)
	defer s.Close()
	for i, err := range results {
		_, gerr := s.WatchGet(t.Context(), fmt.Sprintf("w%02d", i))
		switch {
		case err == nil && gerr != nil:
			t.Errorf("w%02d was acknowledged but is not stored: %v", i, gerr)
		case errors.Is(err, ErrClosed) && gerr == nil:
			t.Errorf("w%02d was refused but is stored", i)
		case err != nil && !errors.Is(err, ErrClosed):
			t.Errorf("w%02d error = %v", i, err)
		}
	}
}

func TestOpenRefusesBadPaths(t *testing.T) {
	for _, p := range []string{"", ":memory:", "file:x.db", filepath.Join(t.TempDir(), "a?b.db")} {
		if s, err := Open(t.Context(), p, nil); err == nil {
			s.Close()
			t.Errorf("Open(%q): no error", p)
		}
	}
	if _, err := os.Stat(filepath.Join(t.TempDir(), "a")); err == nil {
		t.Errorf("a refused path left a file")
	}
}

// batch runs fns as ops of ONE writer transaction: it holds the writer busy
// until all of them are queued, then lets them through together.
func batch(t *testing.T, s *Store, fns ...func(*wtx) error) []error {
	t.Helper()
	release := make(chan struct{})
	held := make(chan struct{})
	go s.w.do(context.Background(), func(*wtx) error {
		close(held)
		<-release
		return nil
	})
	<-held
	errs := make([]error, len(fns))
	var wg sync.WaitGroup
	for i, fn := range fns {
		wg.Go(func() { errs[i] = s.w.do(context.Background(), fn) })
		// Queue them in order.
		for {
			s.w.mu.Lock()
			n := len(s.w.queue)
			s.w.mu.Unlock()
			if n == i+1 {
				break
			}
			time.Sleep(50 * time.Microsecond)
		}
	}
	close(release)
	wg.Wait()
	return errs
}

func createOp(w *vigil.Watch, maxPerRecipient int) func(*wtx) error {
	enc, err := encodeWatch(w)
	if err != nil {
		panic(err)
	}
	stored, err := enc.stored(w)
	if err != nil {
		panic(err)
	}
	return func(t *wtx) error {
		_, err := createWatch(t, vigil.WatchCreateParams{Watch: w, MaxActivePerRecipient: maxPerRecipient}, stored, enc.args(w))
		return err
	}
}

func timerWatch(id, recipient string) *vigil.Watch {
	return &vigil.Watch{ID: id, Kind: vigil.KindTimer, Recipient: recipient, State: vigil.StatePending,
		CreatedAt: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC), Identity: "identity-" + recipient + "-" + id}
}

func TestBatchSavepoints(t *testing.T) {
	s := open(t, filepath.Join(t.TempDir(), "vigil.db"), nil)
	defer s.Close()
	errs := batch(t, s,
		createOp(timerWatch("w1", "r"), 2),
		createOp(timerWatch("w2", "r"), 2),
		createOp(timerWatch("w3", "r"), 2), // over the cap
		func(*wtx) error { panic("boom") },
		createOp(timerWatch("w1", "other"), 0), // id taken
		createOp(timerWatch("w4", "other"), 0),
	)
	wantCodes := []vigil.Code{"", "", vigil.CodeQuotaExceeded, vigil.CodeInternal, vigil.CodeConflict, ""}
	for i, err := range errs {
		if got := vigil.ErrorCode(err); got != wantCodes[i] {
			t.Errorf("op %d error = %v, want code %q", i, err, wantCodes[i])
		}
	}
	for id, want := range map[string]bool{"w1": true, "w2": true, "w3": false, "w4": true} {
		w, err := s.WatchGet(t.Context(), id)
		if got := err == nil; got != want {
			t.Errorf("WatchGet(%s) = %v, %v; stored %v, want %v", id, w, err, got, want)
		}
	}
	if w, err := s.WatchGet(t.Context(), "w1"); err != nil || w.Recipient != "r" {
		t.Errorf("w1 = %v, %v; want the first one, of r", w, err)
	}
	checkCounters(t, s)
}

func TestBatchCommitFailureFailsEveryone(t *testing.T) {
	s := open(t, filepath.Join(t.TempDir(), "vigil.db"), nil)
	defer s.Close()
	errs := batch(t, s,
		createOp(timerWatch("w1", "r"), 0),
		// A foreign key checked only at COMMIT: the commit fails.
		func(t *wtx) error {
			if _, err := t.conn.ExecContext(context.Background(), "PRAGMA defer_foreign_keys = ON"); err != nil {
				return err
			}
			_, err := t.conn.ExecContext(context.Background(),
				"INSERT INTO idempotency (recipient, key, request_hash, watch_id, created_at) VALUES ('r', 'k', 'h', 'no-such-watch', 0)")
			return err
		},
		createOp(timerWatch("w2", "r"), 0),
	)
	for i, err := range errs {
		if err == nil || !strings.Contains(err.Error(), "commit") {
			t.Errorf("op %d error = %v, want the commit's error", i, err)
		}
	}
	for _, id := range []string{"w1", "w2"} {
		if _, err := s.WatchGet(t.Context(), id); vigil.ErrorCode(err) != vigil.CodeNotFound {
			t.Errorf("WatchGet(%s) after a failed commit error = %v, want not_found", id, err)
		}
	}
	// The writer goes on.
	if _, err := s.WatchCreate(t.Context(), vigil.WatchCreateParams{Watch: timerWatch("w3", "r")}); err != nil {
		t.Fatalf("WatchCreate after a failed commit error = %v", err)
	}
	checkCounters(t, s)
}

// checkCounters compares the total of pending watches (the one counters
// row, schema 12) with the rows, and the panel's tables, whose
// watch_counts also holds each recipient's pending count.
func checkCounters(t *testing.T, s *Store) {
	t.Helper()
	var rows, total, actual int
	if err := s.readDB.QueryRowContext(t.Context(), `SELECT (SELECT count(*) FROM counters),
		(SELECT pending FROM counters WHERE recipient = ''),
		(SELECT count(*) FROM watches WHERE state = 'pending')`).Scan(&rows, &total, &actual); err != nil {
		t.Fatal(err)
	}
	if rows != 1 || total != actual {
		t.Errorf("counters has %d rows and a total of %d pending, want 1 row and %d", rows, total, actual)
	}
	checkPanelTables(t, s)
}

// checkPanelTables compares the panel's counts (watch_counts) and its
// text rows (watch_text), which triggers keep (schema 9), with the
// watches.
func checkPanelTables(t *testing.T, s *Store) {
	t.Helper()
	for what, q := range map[string]string{
		"a count that differs from the watches": countsByState + `
			SELECT c.recipient || '/' || c.state || '/' || c.kind || ': ' || c.n || ' counted, ' || count(w.id) || ' watches'
			FROM c LEFT JOIN watches AS w ON w.recipient = c.recipient AND w.state = c.state AND w.kind = c.kind
			GROUP BY c.recipient, c.state, c.kind HAVING c.n <> count(w.id)
			UNION ALL
			SELECT recipient || '/' || state || '/' || kind || ': not counted'
			FROM watches AS w WHERE NOT EXISTS (SELECT 1 FROM c
				WHERE c.recipient = w.recipient AND c.state = w.state AND c.kind = w.kind AND c.n > 0)`,
		"a watch without its text row, or with another text": `
			SELECT w.id FROM watches AS w LEFT JOIN watch_text AS x ON x.created_at = w.created_at AND x.watch_id = w.id
			WHERE x.watch_id IS NULL
				OR (x.note IS NULL) <> (coalesce(octet_length(w.note), 0) + coalesce(octet_length(w.predicate), 0) > 900)
				OR (x.note IS NOT NULL AND (x.note <> lower(coalesce(w.note, '')) OR x.predicate <> lower(CAST(w.predicate AS TEXT))))`,
		"a text row without its watch": `
			SELECT x.watch_id FROM watch_text AS x WHERE NOT EXISTS (SELECT 1 FROM watches AS w WHERE w.id = x.watch_id AND w.created_at = x.created_at)`,
	} {
		rows, err := s.readDB.QueryContext(t.Context(), q)
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			var line string
			if err := rows.Scan(&line); err != nil {
				t.Fatal(err)
			}
			t.Errorf("%s: %s", what, line)
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		rows.Close()
	}
}

// countsByState is a WITH clause naming c the rows of watch_counts one
// per recipient, state and kind, as they were before schema 15.
const countsByState = `WITH c (recipient, state, kind, n) AS (
	SELECT recipient, 'pending', kind, pending FROM watch_counts
	UNION ALL SELECT recipient, 'fired', kind, fired FROM watch_counts
	UNION ALL SELECT recipient, 'failed', kind, failed FROM watch_counts
	UNION ALL SELECT recipient, 'expired', kind, expired FROM watch_counts
	UNION ALL SELECT recipient, 'cancelled', kind, cancelled FROM watch_counts
	UNION ALL SELECT recipient, 'errored', kind, errored FROM watch_counts
	UNION ALL SELECT recipient, 'unwatchable', kind, unwatchable FROM watch_counts)`

func TestCountersMatchRows(t *testing.T) {
	s := open(t, filepath.Join(t.TempDir(), "vigil.db"), nil)
	defer s.Close()
	ctx := t.Context()
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	var wg sync.WaitGroup
	for i := range 120 {
		wg.Go(func() {
			r := fmt.Sprintf("r%d", i%4)
			w := timerWatch(fmt.Sprintf("w%03d", i), r)
			w.Identity = fmt.Sprintf("same-%d", i%90) // some are Existing
			if _, err := s.WatchCreate(ctx, vigil.WatchCreateParams{Watch: w}); err != nil {
				t.Error(err)
				return
			}
			switch i % 5 {
			case 0:
				_, err := s.WatchSettle(ctx, []vigil.WatchSettleParams{{ID: w.ID, State: vigil.StateFired, SettledAt: at}, {ID: w.ID, State: vigil.StateFailed, SettledAt: at}})
				if err != nil {
					t.Error(err)
				}
			case 1:
				if _, _, err := s.WatchCancel(ctx, vigil.WatchCancelParams{ID: w.ID, SettledAt: at}); err != nil && vigil.ErrorCode(err) != vigil.CodeNotFound {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
	checkCounters(t, s)
	if _, err := s.RecipientClose(ctx, vigil.RecipientCloseParams{Recipient: "r1", SettledAt: at}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Prune(ctx, vigil.PruneParams{WatchesBefore: at.Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	checkCounters(t, s)
	// Prune leaves no count of watches that are gone.
	var zero int
	if err := s.readDB.QueryRowContext(ctx, `SELECT count(*) FROM watch_counts
		WHERE pending = 0 AND fired = 0 AND failed = 0 AND expired = 0 AND cancelled = 0 AND errored = 0 AND unwatchable = 0`).Scan(&zero); err != nil || zero != 0 {
		t.Errorf("after Prune, %d counts are 0 (%v), want none kept", zero, err)
	}
}

func TestIdentityEncoding(t *testing.T) {
	for _, id := range []string{
		vigil.Identity("r", vigil.KindHTTP, vigil.ModeUntil, []byte(`{}`)),
		"F00DFEEDF00DFEEDF00DFEEDF00DFEED", // not lowercase: stays text
		"f00dfeedf00dfeedf00dfeedf00dfeez",
		"short",
		"",
	} {
		if got := identityString(identityArg(id)); got != id {
			t.Errorf("identityString(identityArg(%q)) = %q", id, got)
		}
	}
	if _, ok := identityArg(vigil.Identity("r", vigil.KindHTTP, vigil.ModeUntil, []byte(`{}`))).([]byte); !ok {
		t.Errorf("a vigil.Identity is not stored as bytes")
	}
}

// TestMain fails the package when a goroutine outlives the tests: Close
// must stop the writer and the checkpointer.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// TestWALStartsOverUnderSteadyWrites checks that the WAL stays bounded while
// writes arrive back to back: the checkpoint must let the WAL start over from
// its beginning even though the writer never goes idle. (A checkpoint run
// beside the writer never caught up with such a stream, and the WAL, and
// the cost of every commit's fsync, grew without end.)
func TestWALStartsOverUnderSteadyWrites(t *testing.T) {
	steadyWrites(t, nil)
}

// TestWALStartsOverBesideOtherCheckpoints: the writer's own checkpoint
// meets the background checkpointer, asked for back to back. SQLite runs
// one checkpoint at a time and answers another with SQLITE_BUSY; when the
// writer's met a background one, it copied nothing, the WAL started over a
// whole interval later, and on a loaded machine it outgrew its
// preallocation (CI: 33 MB after these writes).
func TestWALStartsOverBesideOtherCheckpoints(t *testing.T) {
	steadyWrites(t, func(ctx context.Context, s *Store) {
		for ctx.Err() == nil {
			select {
			case s.w.checkpoint <- struct{}{}:
			case <-ctx.Done():
			}
		}
	})
}

// TestCheckpointWaitingForReaderLeavesWritesAlone: a background checkpoint
// that must wait for a connection of the read pool (every reader busy)
// does not hold up the writer's own checkpoint, nor so the writes queued
// behind it. It used to take checkpointMu first and wait for the
// connection while holding it.
func TestCheckpointWaitingForReaderLeavesWritesAlone(t *testing.T) {
	const readers = 2
	s := open(t, filepath.Join(t.TempDir(), "vigil.db"), &Options{Readers: readers})
	defer s.Close()
	// A failure guard only: on success the write is done long before.
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	// Every read connection busy.
	var conns []*sql.Conn
	release := func() {
		for _, c := range conns {
			c.Close()
		}
		conns = nil
	}
	defer release()
	for range readers {
		c, err := s.readDB.Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
	}
	// A background checkpoint, which now waits for a read connection.
	waits := s.readDB.Stats().WaitCount
	s.w.checkpoint <- struct{}{}
	for s.readDB.Stats().WaitCount == waits {
		if ctx.Err() != nil {
			t.Fatal("the background checkpointer never asked for a read connection")
		}
		runtime.Gosched()
	}
	// The writer checkpoints itself after its next batch, before it takes
	// the one after: the write below is answered only once that checkpoint
	// is done.
	if err := s.w.do(ctx, func(*wtx) error { s.w.sinceOwn = restartPages; return nil }); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := s.WatchCreate(context.Background(), vigil.WatchCreateParams{Watch: timerWatch("w1", "r")})
		done <- err
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("write: %v", err)
		}
	case <-ctx.Done():
		release()
		t.Fatalf("a write waited for a read connection (%v after readers freed): the background checkpointer held checkpointMu while waiting for one", <-done)
	}
}

// steadyWrites registers 9 600 watches of about one WAL page each from 16
// writers, with beside (when not nil) running until they finish, and fails
// t if the WAL file then exceeds what it holds between two of the writer's
// checkpoints.
func steadyWrites(t *testing.T, beside func(context.Context, *Store)) {
	dir := t.TempDir()
	s := open(t, filepath.Join(dir, "vigil.db"), nil)
	defer s.Close()
	ctx, stop := context.WithCancel(t.Context())
	var side sync.WaitGroup
	if beside != nil {
		side.Go(func() { beside(ctx, s) })
	}
	note := strings.Repeat("n", 3000) // about one page of WAL per watch
	const writers, each = 16, 600     // 9 600 pages: more than twice restartPages
	var wg sync.WaitGroup
	var next atomic.Int64
	errs := make(chan error, writers)
	for range writers {
		wg.Go(func() {
			for range each {
				w := benchWatch(next.Add(1))
				w.Note = note
				_, err := s.WatchCreate(t.Context(), vigil.WatchCreateParams{Watch: w, MaxActive: 1 << 30, MaxActivePerRecipient: 1 << 30})
				if err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	stop()
	side.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	fi, err := os.Stat(filepath.Join(dir, "vigil.db-wal"))
	if err != nil {
		t.Fatal(err)
	}
	// The writer's own checkpoint interval of frames, plus the batch that
	// crossed it.
	// The file is preallocated to walPrealloc; it must not grow past that.
	limit := max(int64((restartPages+checkpointPages)*(4096+24)), walPrealloc)
	if fi.Size() > limit {
		t.Errorf("WAL is %d bytes after %d writes, want at most %d: it never started over", fi.Size(), writers*each, limit)
	}
}

// queryPlan returns the steps of SQLite's plan for q with args.
func queryPlan(t *testing.T, s *Store, q string, args ...any) []string {
	t.Helper()
	rows, err := s.readDB.QueryContext(t.Context(), "EXPLAIN QUERY PLAN "+q, args...)
	if err != nil {
		t.Fatalf("EXPLAIN %s: %v", q, err)
	}
	defer rows.Close()
	var plan []string
	for rows.Next() {
		var id, parent, unused int
		var detail string
		if err := rows.Scan(&id, &parent, &unused, &detail); err != nil {
			t.Fatal(err)
		}
		plan = append(plan, detail)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return plan
}

// TestListFiltersUseIndexes: a list with one filter reads its rows through
// an index that holds them in the list's order (a state's, a kind's, a
// label's, every watch's in watch_text), whatever else is in the table,
// with no sort.
func TestListFiltersUseIndexes(t *testing.T) {
	s := open(t, filepath.Join(t.TempDir(), "vigil.db"), nil)
	defer s.Close()
	for _, tc := range []struct {
		p    vigil.WatchListParams
		want string
	}{
		{p: vigil.WatchListParams{State: vigil.StatePending}, want: "watches_state_created"},
		{p: vigil.WatchListParams{State: vigil.StatePending, Kind: vigil.KindTimer, Limit: 10}, want: "_created"},
		{p: vigil.WatchListParams{State: vigil.StatePending, After: encodeCursor(benchAt, "01J")}, want: "watches_state_created"},
		{p: vigil.WatchListParams{State: vigil.StateFired}, want: "watches_state_created"},
		{p: vigil.WatchListParams{Kind: vigil.KindHTTP}, want: "watches_kind_created"},
		{p: vigil.WatchListParams{Labels: map[string]string{"a": "b", "c": "d"}}, want: "SEARCH lb USING PRIMARY KEY"},
		// No filter, or a text, walks the narrow rows of watch_text, in
		// the list's order (schema 13).
		{p: vigil.WatchListParams{}, want: "SCAN tx"},
		{p: vigil.WatchListParams{After: encodeCursor(benchAt, "01J")}, want: "SEARCH tx USING PRIMARY KEY"},
		{p: vigil.WatchListParams{Text: "deploy"}, want: "SCAN tx"},
		{p: vigil.WatchListParams{Text: "deploy", After: encodeCursor(benchAt, "01J")}, want: "SEARCH tx USING PRIMARY KEY"},
		{p: vigil.WatchListParams{Text: "deploy", State: vigil.StateFired}, want: "_created"},
		{p: vigil.WatchListParams{Text: "deploy", Kind: vigil.KindHTTP, After: encodeCursor(benchAt, "01J")}, want: "_created"},
	} {
		p := tc.p
		q, args, _, err := listQuery(p)
		if err != nil {
			t.Fatal(err)
		}
		plan := queryPlan(t, s, q, args...)
		joined := strings.Join(plan, "; ")
		if !strings.Contains(joined, tc.want) || strings.Contains(joined, "SCAN watches") || strings.Contains(joined, "TEMP B-TREE") {
			t.Errorf("list %+v: plan %q, want %s, no scan of watches, no sort", p, joined, tc.want)
		}
	}
}

// TestStatementsReadWhatTheyName: every prepared statement of the store,
// and the multi-row settlement and count moves, reads the rows it names
// through a key, never a whole table or a whole state's part of an index,
// whatever the planner guesses of an empty, unanalysed database. The
// search of a settling batch's pending watches walked every pending watch
// in watches_state_created (each batch of a storm read all that was still
// pending), and the counts of a registration's new watches, grouped by
// recipient and kind (schema 15), walk watches_recipient, every watch,
// unless told not to. Only the scheduler's priming reads walk, by design,
// every pending watch.
func TestStatementsReadWhatTheyName(t *testing.T) {
	s := open(t, filepath.Join(t.TempDir(), "vigil.db"), nil)
	defer s.Close()
	var w writeStmts
	var r readStmts
	var queries []string
	for _, d := range append(w.defs(), r.defs()...) {
		if d.dst != &r.pendingScan && d.dst != &r.pendingByIndex {
			queries = append(queries, d.query)
		}
	}
	row := "(" + placeholders(settleColumns) + ")"
	queries = append(queries, settleHead+row+", "+row+settleTail)
	head, tail, width := countsUpsert(1<<countColumn(vigil.StatePending) | 1<<countColumn(vigil.StateFired))
	row = "(" + placeholders(width) + ")"
	queries = append(queries, head+row+", "+row+tail)
	walks := regexp.MustCompile(`^SCAN (\w+)$|^SCAN \w+ USING (COVERING )?INDEX|USING (COVERING )?INDEX \w+ \(state=\?\)|BLOOM FILTER`)
	for _, q := range queries {
		if !strings.Contains(q, "?") {
			continue // BEGIN, COMMIT and the like
		}
		args := make([]any, strings.Count(q, "?"))
		for i := range args {
			args[i] = `["a"]`
		}
		plan := queryPlan(t, s, q, args...)
		for _, step := range plan {
			if walks.MatchString(step) {
				t.Errorf("%s\nwalks a table or a state: plan %q", strings.Join(strings.Fields(q), " "), strings.Join(plan, "; "))
				break
			}
		}
	}
}

// TestMessagesOfWatchPlan: a watch's messages are read through the two
// partial indexes, its outcome through messages_outcome and the others
// through messages_watch_other (schema 18), never by walking messages.
func TestMessagesOfWatchPlan(t *testing.T) {
	s := open(t, filepath.Join(t.TempDir(), "vigil.db"), nil)
	defer s.Close()
	var r readStmts
	for _, d := range r.defs() {
		if d.dst != &r.messagesOfWatch {
			continue
		}
		plan := strings.Join(queryPlan(t, s, d.query, "w", "w", 100, 100), "; ")
		for _, want := range []string{"USING INDEX messages_outcome (watch_id=?)", "USING INDEX messages_watch_other (watch_id=?)"} {
			if !strings.Contains(plan, want) {
				t.Errorf("plan %q has no %q", plan, want)
			}
		}
		if strings.Contains(plan, "SCAN messages") {
			t.Errorf("plan %q walks messages", plan)
		}
	}
}

// TestSchema9FillsPanelTables: a database at schema 7 with watches in it
// (pending, settled, a long note) gets its counts and text rows when this
// build opens it, and its counts and text filter then answer as before.
func TestSchema9FillsPanelTables(t *testing.T) {
	path := filepath.Join(t.TempDir(), "vigil.db")
	db := openRaw(t, path)
	migrateTo(t, db, 7)
	long := strings.Repeat("x", 1000) + " Needle"
	for i, note := range []string{"short Needle", long, "nothing", ""} {
		w := benchWatch(int64(i))
		w.Note = note
		if i == 2 {
			w.State = vigil.StateFired
		}
		enc, err := encodeWatch(w)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := db.ExecContext(t.Context(), `INSERT INTO watches (`+watchColumns+`) VALUES (`+placeholders(watchColumnCount)+`)`, enc.args(w)...); err != nil {
			t.Fatal(err)
		}
	}
	db.Close()
	s := open(t, path, nil)
	defer s.Close()
	checkPanelTables(t, s)
	page, err := s.WatchList(t.Context(), vigil.WatchListParams{Text: "NEEDLE"})
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, w := range page.Watches {
		ids = append(ids, w.ID)
	}
	if want := []string{benchWatch(1).ID, benchWatch(0).ID}; !slices.Equal(ids, want) {
		t.Errorf("text NEEDLE lists %v, want %v (the long note's and the short one's)", ids, want)
	}
	cs, err := s.WatchCounts(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	got := map[vigil.State]int{}
	for _, c := range cs {
		got[c.State] += c.N
	}
	if got[vigil.StatePending] != 3 || got[vigil.StateFired] != 1 || len(got) != 2 {
		t.Errorf("counts after the migration = %v, want 3 pending and 1 fired", got)
	}
}

// TestInsertWritesNoTemporaryTable: the multi-row insert of a batch's
// watches writes its rows straight into watches, running no trigger program
// per row. A row trigger on watches (schema 9 had three for inserts) makes
// SQLite copy every row of such an insert into a temporary table first and
// run each trigger once per row, about a third of a batched watch's store
// CPU; schema 10 writes what they wrote in one statement per table
// (indexNew), and TestCountersMatchRows checks what it writes.
func TestInsertWritesNoTemporaryTable(t *testing.T) {
	path := filepath.Join(t.TempDir(), "vigil.db")
	s := open(t, path, nil)
	s.Close()
	db := openRaw(t, path)
	defer db.Close()
	row := "(" + placeholders(watchColumnCount) + ")"
	q := "EXPLAIN INSERT OR FAIL INTO watches (" + watchColumns + ") VALUES " + row + ", " + row
	rows, err := db.QueryContext(t.Context(), q, make([]any, 2*watchColumnCount)...)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		vals := make([]any, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			t.Fatal(err)
		}
		switch op := fmt.Sprint(vals[1]); op {
		case "OpenEphemeral", "Program":
			t.Errorf("the multi-row insert of watches runs %s (a temporary table or a trigger per row)", op)
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
}

// TestCountsFollowEveryPath drives every write that changes a watch's
// state or deletes a watch (a settlement of each outcome, in one batch and
// alone, a lost one, a cancel, a deletion, a recipient's close, a prune)
// and after each compares watch_counts with the watches: since schema 11
// the store moves the counts itself, with no trigger behind it, so a path
// that forgot to would leave a count wrong here.
func TestCountsFollowEveryPath(t *testing.T) {
	s := open(t, filepath.Join(t.TempDir(), "vigil.db"), nil)
	defer s.Close()
	ctx := t.Context()
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	kinds := []vigil.Kind{vigil.KindTimer, vigil.KindHTTP, vigil.KindCI}
	var ps []vigil.WatchCreateParams
	for i := range 24 {
		w := timerWatch(fmt.Sprintf("w%02d", i), fmt.Sprintf("r%d", i%3))
		w.Kind = kinds[i%len(kinds)]
		ps = append(ps, vigil.WatchCreateParams{Watch: w})
	}
	if _, err := s.WatchCreateMany(ctx, ps); err != nil {
		t.Fatal(err)
	}
	checkCounters(t, s)
	step := func(what string, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		checkCounters(t, s)
		if t.Failed() {
			t.Fatalf("the counts are wrong after %s", what)
		}
	}

	var batch []vigil.WatchSettleParams
	for i, st := range []vigil.State{vigil.StateFired, vigil.StateFailed, vigil.StateExpired, vigil.StateErrored, vigil.StateCancelled, vigil.StateFired, vigil.StateFailed} {
		batch = append(batch, vigil.WatchSettleParams{ID: fmt.Sprintf("w%02d", i), State: st, SettledAt: at})
	}
	// Lost: settled earlier in the batch, and no such watch.
	batch = append(batch, vigil.WatchSettleParams{ID: "w00", State: vigil.StateExpired, SettledAt: at},
		vigil.WatchSettleParams{ID: "nope", State: vigil.StateFired, SettledAt: at})
	_, err := s.WatchSettle(ctx, batch)
	step("a batch of settlements", err)
	_, err = s.WatchSettle(ctx, []vigil.WatchSettleParams{{ID: "w07", State: vigil.StateExpired, SettledAt: at}})
	step("one settlement", err)
	_, err = s.WatchSettle(ctx, []vigil.WatchSettleParams{{ID: "w07", State: vigil.StateFired, SettledAt: at}})
	step("a lost settlement", err)
	_, _, err = s.WatchCancel(ctx, vigil.WatchCancelParams{ID: "w08", SettledAt: at})
	step("a cancel", err)
	_, _, err = s.WatchCancel(ctx, vigil.WatchCancelParams{ID: "w08", SettledAt: at})
	step("a cancel of a settled watch", err)
	step("a deletion", s.WatchDelete(ctx, "w01"))
	_, err = s.RecipientClose(ctx, vigil.RecipientCloseParams{Recipient: "r2", SettledAt: at})
	step("a recipient's close", err)
	_, err = s.Prune(ctx, vigil.PruneParams{WatchesBefore: at.Add(time.Hour)})
	step("a prune", err)

	cs, err := s.WatchCounts(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, c := range cs {
		if c.State != vigil.StatePending {
			t.Errorf("after the prune, %d %s %s watches are counted, want only pending ones", c.N, c.State, c.Kind)
		}
		n += c.N
	}
	// 24 less 8 settled, 1 cancelled, and r2's 8 less the 3 of them already
	// settled or cancelled (w02, w05, w08).
	if want := 24 - 8 - 1 - 5; n != want {
		t.Errorf("after the prune, %d pending watches are counted, want %d", n, want)
	}
}

// TestSchema11KeepsCounts: a database at schema 10 with watches in it
// (pending and settled, counted by schema 9's triggers, and one count
// gone wrong) opens with its counts taken again from the watches and
// without the counts' triggers, and the store's settlements and cancels
// then keep them right.
func TestSchema11KeepsCounts(t *testing.T) {
	path := filepath.Join(t.TempDir(), "vigil.db")
	db := openRaw(t, path)
	// Schema 9's insert triggers count the rows inserted here; schema 10
	// has none.
	migrateTo(t, db, 9)
	ctx := t.Context()
	for i := range 6 {
		w := benchWatch(int64(i))
		enc, err := encodeWatch(w)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := db.ExecContext(ctx, `INSERT INTO watches (`+watchColumns+`) VALUES (`+placeholders(watchColumnCount)+`)`, enc.args(w)...); err != nil {
			t.Fatal(err)
		}
		if _, err := db.ExecContext(ctx, `INSERT INTO counters (recipient, pending, created_at) VALUES (?1, 1, 0), ('', 1, 0)
			ON CONFLICT (recipient) DO UPDATE SET pending = pending + 1`, w.Recipient); err != nil {
			t.Fatal(err)
		}
	}
	migrateTo(t, db, 10)
	// Settled at schema 10: its trigger moves the count.
	if _, err := db.ExecContext(ctx, `UPDATE watches SET state = 'fired', settled_at = 1 WHERE id = ?`, benchWatch(0).ID); err != nil {
		t.Fatal(err)
	}
	if _, err := db.ExecContext(ctx, `UPDATE counters SET pending = pending - 1 WHERE recipient IN (?, '')`, benchWatch(0).Recipient); err != nil {
		t.Fatal(err)
	}
	// And a count that went wrong.
	if _, err := db.ExecContext(ctx, `UPDATE watch_counts SET n = n + 5 WHERE recipient = ?`, benchWatch(1).Recipient); err != nil {
		t.Fatal(err)
	}
	db.Close()

	s := open(t, path, nil)
	defer s.Close()
	checkCounters(t, s)
	var triggers int
	if err := s.readDB.QueryRowContext(ctx, `SELECT count(*) FROM sqlite_schema WHERE type = 'trigger' AND tbl_name = 'watches'
		AND name LIKE 'watch_counts%'`).Scan(&triggers); err != nil || triggers != 0 {
		t.Errorf("after the migration, %d triggers keep watch_counts (%v), want none", triggers, err)
	}
	at := benchAt.Add(time.Hour)
	if _, err := s.WatchSettle(ctx, []vigil.WatchSettleParams{{ID: benchWatch(1).ID, State: vigil.StateFailed, SettledAt: at}}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.WatchCancel(ctx, vigil.WatchCancelParams{ID: benchWatch(2).ID, SettledAt: at}); err != nil {
		t.Fatal(err)
	}
	checkCounters(t, s)
	cs, err := s.WatchCounts(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	got := map[vigil.State]int{}
	for _, c := range cs {
		got[c.State] += c.N
	}
	if want := map[vigil.State]int{vigil.StatePending: 3, vigil.StateFired: 1, vigil.StateFailed: 1, vigil.StateCancelled: 1}; !maps.Equal(got, want) {
		t.Errorf("counts = %v, want %v", got, want)
	}
}

// TestSchema15CountsByKind: a database at schema 14 gets watch_counts as
// one row for each recipient and kind, taken from its watches (a count
// that had gone wrong is right again), and the counts then follow
// settlements, cancellations and deletions as before.
func TestSchema15CountsByKind(t *testing.T) {
	path := filepath.Join(t.TempDir(), "vigil.db")
	db := openRaw(t, path)
	migrateTo(t, db, 14)
	ctx := t.Context()
	states := []vigil.State{vigil.StatePending, vigil.StateFired, vigil.StatePending, vigil.StateCancelled,
		vigil.StateExpired, vigil.StateErrored, vigil.StateUnwatchable, vigil.StatePending}
	for i, state := range states {
		w := benchWatch(int64(i))
		w.Recipient = fmt.Sprintf("r%d", i%2)
		if i%3 == 0 {
			w.Kind = vigil.KindTimer
		}
		w.State = state
		if state != vigil.StatePending {
			w.SettledAt = benchAt
		}
		enc, err := encodeWatch(w)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := db.ExecContext(ctx, `INSERT INTO watches (`+watchColumns+`) VALUES (`+placeholders(watchColumnCount)+`)`, enc.args(w)...); err != nil {
			t.Fatal(err)
		}
	}
	var ws writeStmts
	for _, d := range ws.defs() {
		if d.dst == &ws.newText { // what the store writes beside each new watch
			if _, err := db.ExecContext(ctx, d.query, 0); err != nil {
				t.Fatal(err)
			}
		}
	}
	if _, err := db.ExecContext(ctx, `UPDATE counters SET pending = 3 WHERE recipient = ''`); err != nil {
		t.Fatal(err)
	}
	// Schema 14's rows: two right, one wrong, one of a state no watch is in.
	if _, err := db.ExecContext(ctx, `INSERT INTO watch_counts (recipient, state, kind, n) VALUES
		('r0', 'pending', 'timer', 1), ('r1', 'fired', 'ci', 1), ('r0', 'pending', 'ci', 7), ('r1', 'failed', 'ci', 2)`); err != nil {
		t.Fatal(err)
	}
	db.Close()

	s := open(t, path, nil)
	defer s.Close()
	if v := schemaVersion(t, path); v < 15 {
		t.Fatalf("schema %d after open, want at least 15", v)
	}
	checkCounters(t, s)
	want := func() map[vigil.WatchCount]bool {
		rows, err := s.readDB.QueryContext(ctx, `SELECT state, kind, count(*) FROM watches GROUP BY state, kind`)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		out := map[vigil.WatchCount]bool{}
		for rows.Next() {
			var c vigil.WatchCount
			if err := rows.Scan(&c.State, &c.Kind, &c.N); err != nil {
				t.Fatal(err)
			}
			out[c] = true
		}
		return out
	}
	check := func(when string) {
		t.Helper()
		cs, err := s.WatchCounts(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		got := map[vigil.WatchCount]bool{}
		for _, c := range cs {
			got[c] = true
		}
		if w := want(); !maps.Equal(got, w) {
			t.Errorf("%s: WatchCounts = %v, want %v", when, cs, w)
		}
		if !slices.IsSortedFunc(cs, func(a, b vigil.WatchCount) int {
			return cmp.Or(cmp.Compare(a.State, b.State), cmp.Compare(a.Kind, b.Kind))
		}) {
			t.Errorf("%s: WatchCounts = %v, not in the order of state, then kind", when, cs)
		}
	}
	check("after the migration")
	at := benchAt.Add(time.Hour)
	if _, err := s.WatchSettle(ctx, []vigil.WatchSettleParams{{ID: benchWatch(0).ID, State: vigil.StateFailed, SettledAt: at}}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.WatchCancel(ctx, vigil.WatchCancelParams{ID: benchWatch(2).ID, SettledAt: at}); err != nil {
		t.Fatal(err)
	}
	if err := s.WatchDelete(ctx, benchWatch(1).ID); err != nil {
		t.Fatal(err)
	}
	checkCounters(t, s)
	check("after a settlement, a cancellation and a deletion")
}

// TestSettledRowHoldsObservationOnce: a settlement whose outcome has an
// observation stores it once, in the outcome, and its last_observation
// says so; the watch reads back with that observation as its last. One
// settled without an observation keeps the one its probes stored, and a
// row that names an outcome's observation it does not have reads as
// unreadable, not as no observation.
func TestSettledRowHoldsObservationOnce(t *testing.T) {
	path := filepath.Join(t.TempDir(), "vigil.db")
	s := open(t, path, nil)
	defer s.Close()
	ctx := t.Context()
	at := time.Date(2026, 1, 2, 4, 0, 0, 0, time.UTC)
	for _, id := range []string{"w1", "w2", "w3"} {
		if _, err := s.WatchCreate(ctx, vigil.WatchCreateParams{Watch: timerWatch(id, "r")}); err != nil {
			t.Fatal(err)
		}
	}
	probed := &vigil.Observation{Verdict: vigil.VerdictPending, At: at.Add(-time.Minute), Summary: "not yet", Facts: map[string]any{"n": json.Number("1")}}
	if _, err := s.WatchObserve(ctx, vigil.WatchObserveParams{ID: "w2", Observation: probed, Polls: 1}); err != nil {
		t.Fatal(err)
	}
	fired := &vigil.Observation{Verdict: vigil.VerdictSatisfied, At: at, Summary: "04:00 passed", Facts: map[string]any{"at": "2026-01-02T04:00:00Z", "n": json.Number("12345678901234567890")}}
	if _, err := s.WatchSettle(ctx, []vigil.WatchSettleParams{
		{ID: "w1", State: vigil.StateFired, SettledAt: at, Polls: 2, Outcome: &vigil.Outcome{State: vigil.StateFired, Sentence: "went off", Observation: fired}},
		{ID: "w2", State: vigil.StateExpired, SettledAt: at, Polls: 1, Outcome: &vigil.Outcome{State: vigil.StateExpired, Sentence: "ran out of time"}},
		{ID: "w3", State: vigil.StateFired, SettledAt: at, Polls: 1, Outcome: &vigil.Outcome{State: vigil.StateFired, Sentence: "went off", Observation: fired}},
	}); err != nil {
		t.Fatal(err)
	}
	var stored sql.NullString
	if err := s.readDB.QueryRowContext(ctx, `SELECT last_observation FROM watches WHERE id = 'w1'`).Scan(&stored); err != nil || stored.String != observationInOutcome {
		t.Errorf("w1's last_observation = %q (%v), want %q", stored.String, err, observationInOutcome)
	}
	for id, want := range map[string]*vigil.Observation{"w1": fired, "w2": probed} {
		w, err := s.WatchGet(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if w.Unreadable != "" || !reflect.DeepEqual(w.LastObservation, want) {
			t.Errorf("%s: LastObservation = %+v (unreadable %q), want %+v", id, w.LastObservation, w.Unreadable, want)
		}
	}
	db := openRaw(t, path)
	if _, err := db.ExecContext(ctx, `UPDATE watches SET outcome = NULL WHERE id = 'w3'`); err != nil {
		t.Fatal(err)
	}
	db.Close()
	w, err := s.WatchGet(ctx, "w3")
	if err != nil {
		t.Fatal(err)
	}
	if w.LastObservation != nil || !strings.Contains(w.Unreadable, "last_observation") {
		t.Errorf("w3 without its outcome: LastObservation = %+v, Unreadable = %q; want none, and last_observation named", w.LastObservation, w.Unreadable)
	}
}

// TestSettleRunsNoTrigger: the statements that settle, cancel and close
// watches run no trigger program. A row trigger on watches made each
// settling UPDATE open a statement journal, copy every page it changed
// into it and free it at the statement's end (with modernc's allocator, a
// madvise system call each time): about half the store's CPU in a storm
// at schema 9 and 10. Schema 11 moves the counts in the store
// (countMoves), and TestCountsFollowEveryPath checks what it writes.
func TestSettleRunsNoTrigger(t *testing.T) {
	path := filepath.Join(t.TempDir(), "vigil.db")
	s := open(t, path, nil)
	var ws writeStmts
	var queries []string
	for _, d := range ws.defs() {
		switch d.dst {
		case &ws.watchCancel, &ws.recipientClose, &ws.watchObserve:
			queries = append(queries, d.query)
		}
	}
	s.Close()
	if len(queries) != 3 {
		t.Fatalf("found %d of the 3 statements", len(queries))
	}
	// WatchSettle's, of two watches (multiStmt builds it so).
	row := "(" + placeholders(settleColumns) + ")"
	queries = append(queries, settleHead+row+", "+row+settleTail)
	db := openRaw(t, path)
	defer db.Close()
	for _, q := range queries {
		rows, err := db.QueryContext(t.Context(), "EXPLAIN "+q, make([]any, numParams(q))...)
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			var (
				addr                     int
				op                       string
				p1, p2, p3, p4, p5, note any
			)
			if err := rows.Scan(&addr, &op, &p1, &p2, &p3, &p4, &p5, &note); err != nil {
				t.Fatal(err)
			}
			if op == "Program" {
				t.Errorf("%s runs a trigger program", strings.Join(strings.Fields(q), " "))
			}
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		rows.Close()
	}
}

// numParams is how many values q binds: its largest ?N, or else how many
// ? it has.
func numParams(q string) int {
	n := 0
	for _, m := range regexp.MustCompile(`\?(\d+)`).FindAllStringSubmatch(q, -1) {
		k, _ := strconv.Atoi(m[1])
		n = max(n, k)
	}
	if n == 0 {
		n = strings.Count(q, "?")
	}
	return n
}
