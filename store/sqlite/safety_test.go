package sqlite

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/vigil-run/vigil"
	"github.com/vigil-run/vigil/internal/sqlitetest"
)

// logTo returns a logger writing text lines to b.
func logTo(b *bytes.Buffer) *slog.Logger { return slog.New(slog.NewTextHandler(b, nil)) }

func countWatches(t *testing.T, s *Store) int {
	t.Helper()
	var n int
	if err := s.readDB.QueryRowContext(t.Context(), "SELECT count(*) FROM watches").Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestDiskFullIsStorageFull fills the database for real (SQLite's
// max_page_count answers SQLITE_FULL exactly as a full disk does): the
// write is refused whole with storage_full, reads carry on, and once there
// is room again the next write succeeds without a restart.
func TestDiskFullIsStorageFull(t *testing.T) {
	s := open(t, filepath.Join(t.TempDir(), "vigil.db"), nil)
	defer s.Close()
	if _, err := s.WatchCreate(t.Context(), vigil.WatchCreateParams{Watch: timerWatch("w1", "r")}); err != nil {
		t.Fatal(err)
	}
	setMaxPages := func(n string) {
		t.Helper()
		err := s.w.do(t.Context(), func(w *wtx) error {
			var got int64
			return w.conn.QueryRowContext(context.Background(), "PRAGMA max_page_count = "+n).Scan(&got)
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	var pages string
	if err := s.readDB.QueryRowContext(t.Context(), "PRAGMA page_count").Scan(&pages); err != nil {
		t.Fatal(err)
	}
	setMaxPages(pages) // no page more than the database has now

	big := timerWatch("w2", "r")
	big.Note = strings.Repeat("n", 64<<10) // needs new pages
	_, err := s.WatchCreate(t.Context(), vigil.WatchCreateParams{Watch: big})
	if vigil.ErrorCode(err) != vigil.CodeStorageFull || !errors.Is(err, vigil.ErrStorageFull) {
		t.Fatalf("WatchCreate on a full database error = %v (code %s), want storage_full", err, vigil.ErrorCode(err))
	}
	if msg := vigil.ErrorMessage(err); !strings.Contains(msg, "full") || !strings.Contains(msg, "nothing was written") {
		t.Errorf("storage_full message = %q, want a sentence saying the disk is full and nothing was written", msg)
	}
	// Reads carry on; nothing of the refused write is there.
	if _, err := s.WatchGet(t.Context(), "w1"); err != nil {
		t.Errorf("WatchGet on a full database: %v", err)
	}
	if n := countWatches(t, s); n != 1 {
		t.Errorf("%d watches after a refused write, want 1", n)
	}
	checkCounters(t, s)

	setMaxPages("1073741823") // room again
	if _, err := s.WatchCreate(t.Context(), vigil.WatchCreateParams{Watch: big}); err != nil {
		t.Fatalf("WatchCreate once there is room again: %v", err)
	}
	checkCounters(t, s)
}

// TestWriteFaultPlaysFullDisk: a write fault set on the store fails each
// commit as a full disk would (ENOSPC): every caller of the batch hears
// storage_full, nothing is written, and taking the fault away lets the
// next write through. The log says once that the disk is full and once
// that writes succeed again.
func TestWriteFaultPlaysFullDisk(t *testing.T) {
	var logs syncBuffer
	s := open(t, filepath.Join(t.TempDir(), "vigil.db"), &Options{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	defer s.Close()
	s.SetWriteFaultFunc(func() error { return syscall.ENOSPC })
	errs := batch(t, s,
		createOp(timerWatch("w1", "r"), 0),
		createOp(timerWatch("w2", "r"), 0),
	)
	for i, err := range errs {
		if vigil.ErrorCode(err) != vigil.CodeStorageFull {
			t.Errorf("op %d on a full disk error = %v, want storage_full", i, err)
		}
	}
	if _, err := s.WatchCreate(t.Context(), vigil.WatchCreateParams{Watch: timerWatch("w3", "r")}); vigil.ErrorCode(err) != vigil.CodeStorageFull {
		t.Errorf("WatchCreate on a full disk error = %v, want storage_full", err)
	}
	if n := countWatches(t, s); n != 0 {
		t.Errorf("%d watches written on a full disk, want 0", n)
	}
	checkCounters(t, s)

	if got := strings.Count(logs.String(), "level=WARN"); got != 1 || !strings.Contains(logs.String(), "full") {
		t.Errorf("logs after 3 writes on a full disk:\n%s\nwant one warning that the disk is full", logs.String())
	}
	s.SetWriteFaultFunc(nil)
	if _, err := s.WatchCreate(t.Context(), vigil.WatchCreateParams{Watch: timerWatch("w3", "r")}); err != nil {
		t.Fatalf("WatchCreate once the disk has room: %v", err)
	}
	if _, err := s.WatchCreate(t.Context(), vigil.WatchCreateParams{Watch: timerWatch("w4", "r")}); err != nil {
		t.Fatal(err)
	}
	if got := strings.Count(logs.String(), "writes succeed again"); got != 1 {
		t.Errorf("logs once the disk has room:\n%s\nwant one line saying writes succeed again", logs.String())
	}
	if n := countWatches(t, s); n != 2 {
		t.Errorf("%d watches, want 2", n)
	}
	checkCounters(t, s)
}

// syncBuffer is a log destination the store's goroutines share.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func perm(t *testing.T, path string) fs.FileMode {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Mode().Perm()
}

// TestFileModes: the database, its WAL and its shared-memory file are
// created 0600 whatever the umask lets through, and found looser they are
// tightened at Open with a warning. A backup copy is 0600 too.
func TestFileModes(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "vigil.db")
	s := open(t, path, nil)
	for _, p := range []string{path, path + "-wal", path + "-shm"} {
		if got := perm(t, p); got != 0o600 {
			t.Errorf("%s created with mode %v, want 0600", filepath.Base(p), got)
		}
	}
	dest := filepath.Join(dir, "copy.db")
	if err := s.Backup(t.Context(), dest); err != nil {
		t.Fatal(err)
	}
	if got := perm(t, dest); got != 0o600 {
		t.Errorf("backup written with mode %v, want 0600", got)
	}
	s.Close()

	// Loosened behind its back (a restore with cp, a umask of 0): the next
	// Open makes them private again and says so. The WAL and shared-memory
	// files are left behind as a crash leaves them.
	for _, p := range []string{path, path + "-wal", path + "-shm"} {
		if err := os.WriteFile(p, nil, 0o644); err != nil && !errors.Is(err, fs.ErrExist) {
			t.Fatal(err)
		}
		if err := os.Chmod(p, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var logs bytes.Buffer
	s = open(t, path, &Options{Logger: logTo(&logs)})
	defer s.Close()
	for _, p := range []string{path, path + "-wal", path + "-shm"} {
		if got := perm(t, p); got != 0o600 {
			t.Errorf("%s left with mode %v, want 0600", filepath.Base(p), got)
		}
	}
	if n := strings.Count(logs.String(), "level=WARN"); n != 3 || !strings.Contains(logs.String(), "0600") {
		t.Errorf("logs = %q, want one warning for each of the 3 files tightened", logs.String())
	}
}

// TestOpenRemovesWhatItCreatedOnFailure: an Open that creates the file and
// then fails leaves no empty database behind (which the next start would
// take for a lost one).
func TestOpenRemovesWhatItCreatedOnFailure(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "vigil.db")
	ctx, cancel := context.WithCancel(t.Context())
	cancel() // migrations cannot run
	if s, err := Open(ctx, path, nil); err == nil {
		s.Close()
		t.Fatal("Open with a cancelled context: no error")
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		t.Errorf("a failed Open left %s behind", e.Name())
	}
}

// corrupt overwrites the root page of the watches table with junk, as a
// torn write or a bad sector would.
func corrupt(t *testing.T, path string) {
	t.Helper()
	damage(t, path, "watches")
}

// damage makes a store at path holding 200 watches and overwrites the
// root page of its table with junk.
func damage(t *testing.T, path, table string) {
	t.Helper()
	s := open(t, path, nil)
	for i := range 200 {
		w := benchWatch(int64(i))
		if _, err := s.WatchCreate(t.Context(), vigil.WatchCreateParams{Watch: w}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Close(); err != nil { // checkpoints: every page is in the file
		t.Fatal(err)
	}
	sqlitetest.DamageRoot(t, path, table)
}

// TestOpenRefusesCorruptDatabase: a damaged database is refused at Open
// (ErrCorrupt, naming the file and what to do), not found out later by the
// first read that lands on the damaged page.
func TestOpenRefusesCorruptDatabase(t *testing.T) {
	t.Run("damaged page", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "vigil.db")
		corrupt(t, path)
		s, err := Open(t.Context(), path, nil)
		if err == nil {
			s.Close()
			t.Fatal("Open of a damaged database: no error")
		}
		if !errors.Is(err, ErrCorrupt) {
			t.Fatalf("Open of a damaged database error = %v, want ErrCorrupt", err)
		}
		for _, want := range []string{path, "backup"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("error %q does not say %q", err, want)
			}
		}
	})
	t.Run("not a database", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "vigil.db")
		if err := os.WriteFile(path, bytes.Repeat([]byte("this is not SQLite "), 1000), 0o600); err != nil {
			t.Fatal(err)
		}
		s, err := Open(t.Context(), path, nil)
		if err == nil {
			s.Close()
			t.Fatal("Open of a file that is not a database: no error")
		}
		if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), path) {
			t.Fatalf("Open of a file that is not a database error = %v, want ErrCorrupt naming the file", err)
		}
		if b, _ := os.ReadFile(path); !bytes.HasPrefix(b, []byte("this is not SQLite")) {
			t.Errorf("Open changed a file that is not a database")
		}
	})
}

// TestCheckLater: with Options.CheckLater the check of a damaged file runs
// on after Open, and nothing is written until it has passed: a write
// fails with its ErrCorrupt, the file is left as it was, and Checked says
// why. A sound file is written as ever once the check passes, and a file
// whose schema needs a migration is checked before Open returns.
func TestCheckLater(t *testing.T) {
	later := &Options{CheckLater: true}
	t.Run("damaged", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "vigil.db")
		// A page no registration writes: without the check, the
		// write below would succeed.
		damage(t, path, "receipts")
		unchanged := sqlitetest.Unchanged(t, path)
		s := open(t, path, later)
		_, err := s.WatchCreate(t.Context(), vigil.WatchCreateParams{Watch: timerWatch("w-late", "r")})
		if !errors.Is(err, ErrCorrupt) {
			t.Errorf("a write before the check of a damaged file: %v; want ErrCorrupt", err)
		}
		err = s.Checked(t.Context())
		if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "backup") {
			t.Errorf("Checked = %v; want ErrCorrupt naming the file and what to do", err)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		unchanged()
	})
	t.Run("sound", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "vigil.db")
		open(t, path, nil).Close()
		s := open(t, path, later)
		defer s.Close()
		if _, err := s.WatchCreate(t.Context(), vigil.WatchCreateParams{Watch: timerWatch("w-late", "r")}); err != nil {
			t.Fatal(err)
		}
		if err := s.Checked(t.Context()); err != nil {
			t.Fatalf("Checked = %v; want nil", err)
		}
	})
	t.Run("to migrate", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "vigil.db")
		damage(t, path, "receipts")
		db, err := sql.Open("sqlite", path)
		if err != nil {
			t.Fatal(err)
		}
		// As if written by the build before this one's last migration.
		if _, err := db.Exec("DELETE FROM goose_db_version WHERE version_id = (SELECT max(version_id) FROM goose_db_version)"); err != nil {
			t.Fatal(err)
		}
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
		s, err := Open(t.Context(), path, later)
		if err == nil {
			s.Close()
			t.Fatal("Open of a damaged file to migrate: no error")
		}
		if !errors.Is(err, ErrCorrupt) {
			t.Fatalf("Open of a damaged file to migrate: %v; want ErrCorrupt", err)
		}
	})
	t.Run("not vigil's", func(t *testing.T) {
		// A damaged SQLite file without vigil's schema (sqlite:PATH
		// naming the wrong file): refused, and left as it was.
		path := filepath.Join(t.TempDir(), "other.db")
		db, err := sql.Open("sqlite", path+"?_pragma=journal_mode(WAL)")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := db.Exec("CREATE TABLE t (v TEXT)"); err != nil {
			t.Fatal(err)
		}
		if _, err := db.Exec(`WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 100)
			INSERT INTO t SELECT printf('%0500d', i) FROM n`); err != nil {
			t.Fatal(err)
		}
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
		sqlitetest.DamageRoot(t, path, "t")
		unchanged := sqlitetest.Unchanged(t, path)
		if s, err := Open(t.Context(), path, later); !errors.Is(err, ErrCorrupt) {
			if err == nil {
				s.Close()
			}
			t.Fatalf("Open of a damaged file that is not vigil's: %v; want ErrCorrupt", err)
		}
		unchanged()
	})
	t.Run("closed", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "vigil.db")
		open(t, path, nil).Close()
		s := open(t, path, later)
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		if err := s.Checked(t.Context()); err != nil && !errors.Is(err, ErrClosed) {
			t.Fatalf("Checked after Close = %v; want nil or ErrClosed", err)
		}
	})
}

// failingFile fails every WriteAt past limit bytes of the file with err.
type failingFile struct {
	*os.File
	limit int64
	err   error
}

func (f *failingFile) WriteAt(b []byte, off int64) (int, error) {
	if off+int64(len(b)) > f.limit {
		n := max(0, f.limit-off)
		if n > 0 {
			if _, err := f.File.WriteAt(b[:n], off); err != nil {
				return 0, err
			}
		}
		return int(n), f.err
	}
	return f.File.WriteAt(b, off)
}

func walFileOf(t *testing.T, size int64) (*os.File, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "vigil.db-wal")
	if err := os.WriteFile(path, make([]byte, size), 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f, path
}

func size(t *testing.T, path string) int64 {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size()
}

// TestPreallocateWALFitsFreeSpace: the WAL is extended only as far as the
// free space allows with room to spare (or not at all, with one log
// line); a write that fails part way leaves the file as it was.
func TestPreallocateWALFitsFreeSpace(t *testing.T) {
	const start = 4096
	const mib = 1 << 20
	tests := []struct {
		name     string
		free     int64 // -1: unknown
		failAt   int64 // 0: writes never fail
		failErr  error
		want     int64
		wantErr  bool
		wantLogs int
	}{
		{name: "plenty of room", free: 10 << 30, want: walPrealloc},
		{name: "free space unknown", free: -1, want: walPrealloc},
		{name: "less than the preallocation", free: 20 * mib, want: start, wantLogs: 1},
		{name: "room for the headroom only", free: walPreallocHeadroom, want: start, wantLogs: 1},
		{name: "room for part", free: walPreallocHeadroom + 8*mib, want: start + 8*mib, wantLogs: 1},
		{name: "disk fills while writing", free: 10 << 30, failAt: 5 * mib, failErr: syscall.ENOSPC, want: start, wantLogs: 1},
		{name: "quota reached while writing", free: 10 << 30, failAt: 5 * mib, failErr: syscall.EDQUOT, want: start, wantLogs: 1},
		{name: "I/O error while writing", free: 10 << 30, failAt: 5 * mib, failErr: syscall.EIO, want: start, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, path := walFileOf(t, start)
			var file walFile = f
			if tt.failErr != nil {
				file = &failingFile{File: f, limit: tt.failAt, err: tt.failErr}
			}
			var logs bytes.Buffer
			err := preallocateWAL(file, walPrealloc, tt.free, logTo(&logs))
			if (err != nil) != tt.wantErr {
				t.Fatalf("preallocateWAL error = %v, want error %v", err, tt.wantErr)
			}
			if got := size(t, path); got != tt.want {
				t.Errorf("WAL is %d bytes, want %d", got, tt.want)
			}
			if got := strings.Count(logs.String(), "\n"); got != tt.wantLogs {
				t.Errorf("%d log lines, want %d: %q", got, tt.wantLogs, logs.String())
			}
		})
	}
}

// otherWriterWAL is the WAL file as preallocate sees it, with another
// program committing to the database just before preallocate's first
// write: between its reading of the WAL's size and its zeros. With fail
// set, that write fails with it, so preallocate truncates the file back.
type otherWriterWAL struct {
	*os.File
	commit func()
	fail   error
}

func (f *otherWriterWAL) WriteAt(b []byte, off int64) (int, error) {
	if f.commit != nil {
		f.commit()
		f.commit = nil
		if f.fail != nil {
			return 0, f.fail
		}
	}
	return f.File.WriteAt(b, off)
}

// TestPreallocateHoldsTheWriteLock: Open extends the WAL (or truncates it
// back after a failed write) under SQLite's write lock, so another program
// committing to the same database meanwhile waits for it, and none of its
// frames is overwritten with zeros or cut off. (Open read the WAL's size
// and then wrote from there without any lock; a commit landing in between
// was lost and the database read as malformed.)
func TestPreallocateHoldsTheWriteLock(t *testing.T) {
	for _, tt := range []struct {
		name string
		fail error
	}{
		{name: "extended"},
		{name: "truncated back", fail: syscall.ENOSPC},
	} {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "vigil.db")
			open(t, path, nil).Close() // the schema; the WAL goes with the last connection
			// The other program: a writer whose WAL is not preallocated, and
			// which does not wait for the write lock.
			other, err := sql.Open("sqlite", path+"?_pragma=busy_timeout(0)&_pragma=journal_mode(WAL)")
			if err != nil {
				t.Fatal(err)
			}
			defer other.Close()
			other.SetMaxOpenConns(1)
			ctx := t.Context()
			if _, err := other.ExecContext(ctx, "CREATE TABLE other (n INTEGER)"); err != nil {
				t.Fatal(err)
			}
			if _, err := other.ExecContext(ctx, "INSERT INTO other VALUES (1)"); err != nil {
				t.Fatal(err)
			}
			var during error
			ran := false
			s, err := Open(ctx, path, &Options{openWAL: func(p string) (walFile, error) {
				f, err := os.OpenFile(p, os.O_WRONLY, 0)
				if err != nil {
					return nil, err
				}
				return &otherWriterWAL{File: f, fail: tt.fail, commit: func() {
					ran = true
					_, during = other.ExecContext(ctx, "INSERT INTO other VALUES (2)")
				}}, nil
			}})
			if err != nil {
				t.Fatalf("Open error = %v", err)
			}
			defer s.Close()
			if !ran {
				t.Skip("too little free space here for Open to preallocate the WAL")
			}
			switch {
			case during == nil:
				// Committed while the WAL was being extended: it must be there.
			case busy(during):
				// It waited for the lock: commit now.
				if _, err := other.ExecContext(ctx, "INSERT INTO other VALUES (2)"); err != nil {
					t.Fatalf("commit after Open: %v", err)
				}
			default:
				t.Fatalf("commit during preallocation: %v", during)
			}
			// A new connection, and the store's readers, see both rows and
			// a sound database.
			fresh := openRaw(t, path)
			defer fresh.Close()
			for name, db := range map[string]*sql.DB{"a new connection": fresh, "the store's readers": s.readDB} {
				var n int
				if err := db.QueryRowContext(ctx, "SELECT count(*) FROM other").Scan(&n); err != nil || n != 2 {
					t.Errorf("%s counts %d rows (%v), want 2: a commit made during the preallocation was lost", name, n, err)
				}
				var ic string
				if err := db.QueryRowContext(ctx, "PRAGMA integrity_check").Scan(&ic); err != nil || ic != "ok" {
					t.Errorf("%s: integrity_check = %q, %v", name, ic, err)
				}
			}
			if during == nil {
				t.Errorf("another program committed while Open preallocated the WAL: Open did not hold the write lock")
			}
		})
	}
}

// TestFailedBackupLeavesNoFile: a backup that fails removes the file it
// created, so no partial copy is mistaken for a good one.
func TestFailedBackupLeavesNoFile(t *testing.T) {
	dir := t.TempDir()
	s := open(t, filepath.Join(dir, "vigil.db"), nil)
	defer s.Close()
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	dest := filepath.Join(dir, "copy.db")
	if err := s.Backup(ctx, dest); err == nil {
		t.Fatal("Backup with a cancelled context: no error")
	}
	if _, err := os.Stat(dest); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a failed Backup left %s behind (%v)", dest, err)
	}
}

// TestBackupNamedOnlyWhenComplete: a backup's destination names nothing
// until the copy is complete and synced, so a vigil backup killed midway
// (SIGKILL, a crash of the system) leaves no partial file under the name
// asked for, to be restored later as if it were a backup; and no
// temporary file is left once the backup is done.
func TestBackupNamedOnlyWhenComplete(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "vigil.db")
	s := open(t, path, nil)
	defer s.Close()
	if _, err := s.WatchCreate(t.Context(), vigil.WatchCreateParams{Watch: timerWatch("w-1", "r")}); err != nil {
		t.Fatal(err)
	}
	orig := syncFile
	t.Cleanup(func() { syncFile = orig })
	backups := t.TempDir()
	for _, c := range []struct {
		name string
		run  func(dest string) error
	}{
		{"Backup", func(dest string) error { return s.Backup(t.Context(), dest) }},
		{"BackupFile", func(dest string) error { return BackupFile(t.Context(), path, dest) }},
	} {
		dest := filepath.Join(backups, c.name+".db")
		files := 0
		syncFile = func(f *os.File) error {
			if fi, err := f.Stat(); err != nil || fi.IsDir() {
				return err
			}
			files++
			// The copy is complete here, and about to be synced: were the
			// process killed now, what would dest hold?
			if _, err := os.Lstat(dest); !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("%s: %s exists before its copy is synced (%v): a backup killed now would leave it partial", c.name, dest, err)
			}
			return f.Sync()
		}
		if err := c.run(dest); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if files != 1 {
			t.Errorf("%s synced %d files, want 1 (the copy)", c.name, files)
		}
		entries, err := os.ReadDir(backups)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			if strings.HasSuffix(e.Name(), ".partial") {
				t.Errorf("%s left its temporary file %s", c.name, e.Name())
			}
		}
		b := open(t, dest, nil)
		if w, err := b.WatchGet(t.Context(), "w-1"); err != nil || w.State != vigil.StatePending {
			t.Errorf("%s: the copy's watch: %v, %v", c.name, w, err)
		}
		b.Close()
		// Asked again, the name is taken: refused, the copy untouched.
		if err := c.run(dest); !errors.Is(err, fs.ErrExist) {
			t.Errorf("%s over an existing file: %v, want fs.ErrExist", c.name, err)
		}
	}
}

// TestCheckLaterCallerGivesUp: a batch waiting for the check of
// Options.CheckLater ends, writing nothing, once every caller in it has
// given up, while the check runs on; one whose callers still wait is run
// once the check passes.
func TestCheckLaterCallerGivesUp(t *testing.T) {
	path := filepath.Join(t.TempDir(), "vigil.db")
	open(t, path, nil).Close()
	s := open(t, path, &Options{CheckLater: true})
	defer s.Close()
	if err := s.Checked(t.Context()); err != nil {
		t.Fatal(err)
	}
	// A check that runs until the test ends it.
	held := &fileCheck{done: make(chan struct{}), cancel: func() {}}
	s.w.checked = held

	ctx, cancel := context.WithCancel(t.Context())
	gaveUp, waits := &op{ctx: ctx}, &op{ctx: t.Context()}
	type result struct {
		run []*op
		err error
	}
	res := make(chan result, 1)
	go func() {
		run, err := s.w.awaitCheck([]*op{gaveUp})
		res <- result{run, err}
	}()
	cancel()
	select {
	case r := <-res:
		if len(r.run) != 0 || r.err != nil || !errors.Is(gaveUp.err, context.Canceled) {
			t.Errorf("a batch whose caller gave up: ops %d, %v, its op %v; want none to run and context.Canceled", len(r.run), r.err, gaveUp.err)
		}
	case <-time.After(10 * time.Second): // a failure guard only: it returns at once
		close(held.done)
		t.Fatal("a batch whose caller gave up still waits for the check")
	}

	go func() {
		run, err := s.w.awaitCheck([]*op{waits})
		res <- result{run, err}
	}()
	close(held.done)
	if r := <-res; len(r.run) != 1 || r.err != nil {
		t.Errorf("a batch once the check passed: ops %d, %v; want it to run", len(r.run), r.err)
	}
	if _, err := s.WatchCreate(t.Context(), vigil.WatchCreateParams{Watch: timerWatch("w-after", "r")}); err != nil {
		t.Fatalf("a write once the check passed: %v", err)
	}
}

// TestBackupIsSynced: a backup is on stable storage, its directory entry
// too, before Backup or BackupFile says it is done. SQLite never syncs the
// file VACUUM INTO writes, so a backup reported done could be torn or gone
// after a power cut. And a sync that fails fails the backup, leaving no
// file, as any failed copy does.
func TestBackupIsSynced(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "vigil.db")
	s, err := Open(t.Context(), path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var mu sync.Mutex
	var synced []string
	var fault error
	orig := syncFile
	t.Cleanup(func() { syncFile = orig })
	syncFile = func(f *os.File) error {
		mu.Lock()
		defer mu.Unlock()
		synced = append(synced, f.Name())
		return fault
	}
	backups := t.TempDir()
	for _, c := range []struct {
		name string
		run  func(dest string) error
	}{
		{"Backup", func(dest string) error { return s.Backup(t.Context(), dest) }},
		{"BackupFile", func(dest string) error { return BackupFile(t.Context(), path, dest) }},
	} {
		dest := filepath.Join(backups, c.name+".db")
		synced, fault = nil, nil
		if err := c.run(dest); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		want := []string{backups}
		if runtime.GOOS == "windows" {
			want = nil // no directory to sync there
		}
		if len(synced) == 0 || filepath.Dir(synced[0]) != backups || strings.Join(synced[1:], "|") != strings.Join(want, "|") {
			t.Errorf("%s synced %q, want the copy (under its temporary name) then its directory %q", c.name, synced, want)
		}
		failed := filepath.Join(backups, c.name+"-failed.db")
		fault = syscall.EIO
		if err := c.run(failed); !errors.Is(err, syscall.EIO) {
			t.Errorf("%s with a sync failing: error %v, want EIO", c.name, err)
		}
		if _, err := os.Stat(failed); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s whose sync failed left %s behind (%v)", c.name, failed, err)
		}
	}
}
