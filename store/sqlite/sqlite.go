// Package sqlite is the embedded store of vigil: a vigil.Store over one
// SQLite file, through the pure Go driver modernc.org/sqlite.
//
// The database runs in WAL mode with synchronous=FULL, so an acknowledged
// write survives power loss. Throughput comes from group commit, never from
// weaker durability: every write goes through one writer goroutine that
// takes all the operations waiting for it, runs them in ONE transaction,
// each inside its own savepoint (an operation that fails, say over a cap,
// is rolled back alone; single registrations are written together first,
// each refusal writing nothing of its own), commits once (one sync for the
// whole batch: fdatasync(2) where the system has it, as SQLite's own Linux
// builds do), and only then answers each caller. If the commit fails,
// every caller of the batch gets the error. Reads use a separate pool of
// read-only connections, which WAL lets run beside the writer. Once enough
// pages have piled up in the WAL, a second goroutine copies them back into
// the database file, so that work and its sync stay out of the callers'
// commits; every few such intervals the writer finishes the copy itself
// between two batches, so the WAL starts over instead of growing while
// writes never pause.
//
// The schema is a numbered list of embedded SQL migrations applied with
// goose at Open, each in a transaction. A database whose schema is newer
// than this build knows is refused (ErrSchemaNewer). Times are stored as
// unix milliseconds UTC and durations as milliseconds, so both round-trip
// at millisecond precision; JSON values are TEXT. Backup makes an online
// copy with VACUUM INTO; BackupFile makes one without opening a store
// (read-only, migrating nothing), beside a store in another process.
//
// The database, its WAL and its shared-memory file are private to their
// owner (0600): Open creates the database so, SQLite gives the other two the
// database's mode, and Open tightens any it finds looser, with a warning.
// Open refuses a damaged database (ErrCorrupt) after SQLite's quick_check,
// before it writes anything to it (or, with Options.CheckLater, the check
// runs on after Open and the first write waits for it). A write that finds
// the disk full fails whole with vigil's storage_full; the next one
// succeeds once there is room.
package sqlite

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"

	"github.com/pressly/goose/v3"
	"github.com/vigil-run/vigil"
	"modernc.org/sqlite" // also registers the "sqlite" database/sql driver
)

//go:embed migrations/*.sql
var migrationFiles embed.FS

// ErrSchemaNewer is returned by Open for a database whose schema version is
// newer than this build knows: it was written by a newer vigil.
var ErrSchemaNewer = errors.New("sqlite: database schema is newer than this build of vigil")

// ErrCorrupt is returned by Open for a database SQLite finds damaged (its
// quick_check fails, or the file is not a database at all).
var ErrCorrupt = errors.New("sqlite: the database is damaged")

// ErrClosed is returned by writes made after Close.
var ErrClosed = errors.New("sqlite: store is closed")

// Synchronous settings accepted by Options.Synchronous.
const (
	// SynchronousFull syncs the WAL on every commit: an acknowledged write
	// survives power loss. The default, and the only setting for production.
	SynchronousFull = "FULL"
	// SynchronousNormal may lose the last commits on power loss (never
	// corrupts). For benchmarks only.
	SynchronousNormal = "NORMAL"
)

// Defaults of Options and of the store's internals, in one place.
const (
	busyTimeoutMS = 10_000
	cacheSizeKiB  = 16 << 10 // per connection
	// maxBatch bounds how many operations share one transaction.
	maxBatch = 1024
	// checkpointPages is how many pages the writer commits to the WAL
	// between two background checkpoints (SQLite's own default threshold).
	checkpointPages = 1000
	// restartPages is how many pages the writer commits between two
	// checkpoints of its own, which let the WAL start over.
	restartPages = 4 * checkpointPages
	// restartRetryPages is how many pages later the writer tries its own
	// checkpoint again when one could not copy every frame.
	restartRetryPages = checkpointPages / 10
	// walPrealloc is the size the WAL file is extended to, with zeros, at
	// Open: a little more than the frames the WAL holds between two of the
	// writer's checkpoints, so that commits rewrite the file's blocks
	// rather than append to it (see preallocateWAL).
	walPrealloc = 24 << 20
	// walPreallocHeadroom is the free space the preallocation always
	// leaves on the disk: it takes only what is free beyond this.
	walPreallocHeadroom = 64 << 20
	// walSizeLimit is the size the WAL file is truncated to after a
	// checkpoint lets it start over.
	walSizeLimit = 64 << 20
	// pruneChunk bounds how many rows one prune step deletes, so a large
	// prune never holds the writer for long.
	pruneChunk = 5000
	// listLimit and listLimitMax bound a page of WatchList and MessagesRead.
	listLimit    = 100
	listLimitMax = 1000
)

// Options configure Open. A nil *Options means the defaults.
type Options struct {
	// Logger receives the store's few log lines (migrations applied); nil
	// discards them.
	Logger *slog.Logger
	// Synchronous is SQLite's synchronous setting: SynchronousFull (the
	// default when empty) or SynchronousNormal, for benchmarks only.
	Synchronous string
	// Readers is the size of the read connection pool; zero means
	// max(4, GOMAXPROCS).
	Readers int

	// CheckLater runs Open's check of the file (SQLite's quick_check, which
	// reads every page: about a second for a million watches) beside the
	// caller's first reads instead of before Open returns, when the
	// database needs no migration. Nothing is written until it has
	// passed: each write waits for it, and fails with its ErrCorrupt if it
	// finds the file damaged. Checked waits for it. The daemon sets it,
	// to read its pending watches while the check runs.
	CheckLater bool

	// openWAL, when set (by tests), opens the WAL file for preallocate.
	openWAL func(path string) (walFile, error)
}

// Store is the SQLite implementation of vigil.Store. It is safe for
// concurrent use.
type Store struct {
	path    string
	log     *slog.Logger
	writeDB *sql.DB // MaxOpenConns(1): the one writer connection
	readDB  *sql.DB // the read pool
	w       *writer
	r       readStmts
	checked *fileCheck // Options.CheckLater's check; nil when Open checked

	checkpointDone chan struct{} // closed when the checkpointer returns

	closeOnce sync.Once
	closeErr  error
}

var _ vigil.Store = (*Store)(nil)

// Open opens (creating if needed, mode 0600) the database file at path,
// checks it (ErrCorrupt), applies the migrations this build knows, and
// starts the writer. It refuses a database whose schema is newer than this
// build (ErrSchemaNewer). An Open that fails removes the file if it created
// it.
func Open(ctx context.Context, path string, opts *Options) (_ *Store, err error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	switch strings.ToUpper(o.Synchronous) {
	case "":
		o.Synchronous = SynchronousFull
	case SynchronousFull, SynchronousNormal:
		o.Synchronous = strings.ToUpper(o.Synchronous)
	default:
		return nil, fmt.Errorf("sqlite: synchronous %q: use %s (or %s for benchmarks)", o.Synchronous, SynchronousFull, SynchronousNormal)
	}
	if o.Readers <= 0 {
		o.Readers = max(4, runtime.GOMAXPROCS(0))
	}
	if path == "" || path == ":memory:" || strings.HasPrefix(path, "file:") {
		return nil, fmt.Errorf("sqlite: path %q: need the path of a database file", path)
	}
	if strings.ContainsAny(path, "?#") {
		return nil, fmt.Errorf("sqlite: path %q: a database path may not contain '?' or '#'", path)
	}

	s := &Store{path: path, log: o.Logger.With("component", "store", "store", "sqlite")}
	useFdatasync()
	created, err := privateFiles(path, s.log)
	if err != nil {
		return nil, err
	}
	if created {
		// Every failure below closes what it opened before returning.
		defer func() {
			if err != nil {
				removeDatabase(path)
			}
		}()
	}
	if s.writeDB, err = sql.Open("sqlite", dsn(path, o.Synchronous, false)); err != nil {
		return nil, fmt.Errorf("sqlite: open %s: %w", path, err)
	}
	s.writeDB.SetMaxOpenConns(1)
	s.writeDB.SetMaxIdleConns(1)
	s.writeDB.SetConnMaxLifetime(0)
	s.writeDB.SetConnMaxIdleTime(0)

	// The check before anything is written: before Open returns, unless
	// the caller takes it later and the schema is this build's (a
	// migration writes). A version that cannot be read is checked now,
	// which says why when the file is damaged.
	later := o.CheckLater && s.schemaCurrent(ctx)
	if !later {
		if err := s.check(ctx); err != nil {
			s.writeDB.Close()
			return nil, err
		}
	}

	if err := s.migrate(ctx); err != nil {
		s.writeDB.Close()
		return nil, err
	}

	if o.openWAL == nil {
		o.openWAL = openWALFile
	}
	if err := s.preallocate(ctx, o.openWAL); err != nil {
		s.writeDB.Close()
		return nil, err
	}

	if s.readDB, err = sql.Open("sqlite", dsn(path, o.Synchronous, true)); err != nil {
		s.writeDB.Close()
		return nil, fmt.Errorf("sqlite: open %s for reading: %w", path, err)
	}
	s.readDB.SetMaxOpenConns(o.Readers)
	s.readDB.SetMaxIdleConns(o.Readers)
	s.readDB.SetConnMaxLifetime(0)
	s.readDB.SetConnMaxIdleTime(0)
	if err := s.r.prepare(ctx, s.readDB); err != nil {
		s.readDB.Close()
		s.writeDB.Close()
		return nil, err
	}

	if later {
		s.checked = checkInBackground(s.path, o.Synchronous)
	}

	checkpointFailed := func(err error) { s.log.Warn("checkpoint failed", "err", err) }
	fullChanged := func(full bool) {
		if full {
			s.log.Warn("the disk holding the database is full: writes are refused (storage_full) until there is room", "path", path)
			return
		}
		s.log.Info("the disk holding the database has room again: writes succeed again", "path", path)
	}
	if s.w, err = newWriter(ctx, s.writeDB, checkpointFailed, fullChanged); err != nil {
		s.checked.stop()
		s.r.close()
		s.readDB.Close()
		s.writeDB.Close()
		return nil, err
	}
	s.w.checked = s.checked
	s.checkpointDone = make(chan struct{})
	go s.w.run()
	go s.checkpoints()
	return s, nil
}

// checkpoints copies the WAL back into the database file each time the
// writer asks, until the writer stops. PASSIVE checkpoints never block the
// writer or the readers.
func (s *Store) checkpoints() {
	defer close(s.checkpointDone)
	for {
		select {
		case <-s.w.checkpoint:
		case <-s.w.done:
			return
		}
		if err := s.checkpoint(context.Background()); err != nil {
			// No caller to return this to; the next checkpoint retries.
			s.log.Warn("checkpoint failed", "err", err)
		}
	}
}

// checkpoint runs one background checkpoint on a connection of the read
// pool. It takes the connection before checkpointMu: the writer takes
// that mutex for its own checkpoint, between two batches, so waiting for
// a reader to come free while holding it would stall every write behind
// the slowest reads.
func (s *Store) checkpoint(ctx context.Context) error {
	conn, err := s.readDB.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	var busy, frames, copied int
	s.w.checkpointMu.Lock()
	defer s.w.checkpointMu.Unlock()
	return conn.QueryRowContext(ctx, "PRAGMA wal_checkpoint(PASSIVE)").Scan(&busy, &frames, &copied)
}

// preallocate extends the WAL file (see preallocateWAL) as far as the
// free space of its disk allows, holding SQLite's write lock throughout.
//
// The daemon's locks keep a second vigil serve off the same data dir and
// database, but not every other writer of the database: the lock needs
// flock, which not every system has, and any other
// program (the sqlite3 shell, a vigil backup of an older release) may
// open it. So preallocate does not rely on being the only writer: it takes
// SQLite's write lock (BEGIN IMMEDIATE on the writer connection) before
// it reads the WAL's size, and keeps it until the zeros are written and
// synced, or the file is truncated back after a failure. While it is held
// no other connection, in this process or another, can append a frame, or
// restart, truncate or delete the WAL, so the zeros only ever land past
// the last frame, and the truncation never cuts one off. If another
// writer holds the lock for longer than the busy timeout, the
// preallocation is skipped, with one log line.
func (s *Store) preallocate(ctx context.Context, openWAL func(path string) (walFile, error)) error {
	conn, err := s.writeDB.Conn(ctx)
	if err != nil {
		return fmt.Errorf("sqlite: preallocate WAL: %w", err)
	}
	defer conn.Close()
	tx, err := conn.BeginTx(ctx, nil) // BEGIN IMMEDIATE: the writer's _txlock
	if busy(err) {
		s.log.Warn("another program held the database's write lock: the WAL is not preallocated, so commits may be slower", "err", err)
		return nil
	}
	if err != nil {
		return fmt.Errorf("sqlite: preallocate WAL: %w", err)
	}
	defer tx.Rollback() // it wrote nothing
	f, err := openWAL(s.path + "-wal")
	if errors.Is(err, fs.ErrNotExist) {
		return nil // SQLite made none: nothing to extend
	}
	if err != nil {
		return fmt.Errorf("sqlite: preallocate WAL: %w", err)
	}
	defer f.Close()
	free, err := freeBytes(filepath.Dir(s.path))
	if err != nil {
		free = -1 // unknown: a full disk is still caught while writing
	}
	return preallocateWAL(f, walPrealloc, free, s.log)
}

// openWALFile opens the WAL file at path for preallocate.
func openWALFile(path string) (walFile, error) {
	return os.OpenFile(path, os.O_WRONLY, 0)
}

// walFile is what preallocate needs of the WAL file.
type walFile interface {
	Stat() (fs.FileInfo, error)
	WriteAt(b []byte, off int64) (int, error)
	Truncate(size int64) error
	Sync() error
	Close() error
}

// preallocateWAL extends the WAL file f with zeros up to size, and syncs
// it, if it is smaller — but only into the free space (free bytes on its
// disk; negative: unknown) beyond walPreallocHeadroom, so that it never
// fills the disk. Preallocating less than size, or nothing, is logged in
// one line. If a write fails, the file is truncated back to the size it
// had, so no partial preallocation is left behind; a disk that turns out to
// be full (or a quota reached) only skips the preallocation, with one log
// line, while any other error is returned.
//
// A commit's fsync of a WAL file that grew must also journal the file's new
// size, and measured about twice one that rewrote blocks in place on this
// project's reference disk (a one-row commit: 1 700 – 2 000 a second
// against 3 700 with the WAL preallocated; BenchmarkCommitFloor). SQLite
// writes its WAL from the start again after each checkpoint, so once the
// file is as large as the frames written between two restarts, every
// commit rewrites. Zeros past the last frame are safe: SQLite reads frames
// only while their salt and checksum match the header's, exactly as it
// ignores the stale frames a restarted WAL leaves behind. Only bytes past
// the file's current end are written, never a frame — provided no other
// connection can append one meanwhile: the caller holds SQLite's write
// lock (see preallocate). SQLite deletes the WAL when the last connection
// closes; Open extends the new one again.
func preallocateWAL(f walFile, size, free int64, log *slog.Logger) error {
	fi, err := f.Stat()
	if err != nil {
		return fmt.Errorf("sqlite: preallocate WAL: %w", err)
	}
	cur := fi.Size()
	if cur >= size {
		return nil
	}
	end := size
	if free >= 0 {
		end = min(size, cur+free-walPreallocHeadroom)
	}
	const mib = 1 << 20
	if end <= cur {
		log.Warn("little free space on the database's disk: the WAL is not preallocated, so commits may be slower",
			"free_mib", free/mib, "wanted_mib", (size-cur)/mib)
		return nil
	}
	if end < size {
		log.Warn("little free space on the database's disk: the WAL is preallocated only in part, so commits may be slower",
			"free_mib", free/mib, "preallocated_mib", (end-cur)/mib, "wanted_mib", (size-cur)/mib)
	}
	// Written zeros, not fallocate: blocks allocated but never written
	// are converted (a metadata change) on their first write.
	zero := make([]byte, mib)
	for off := cur; off < end; off += int64(len(zero)) {
		n := min(int64(len(zero)), end-off)
		if _, err = f.WriteAt(zero[:n], off); err != nil {
			break
		}
	}
	if err == nil {
		err = f.Sync()
	}
	if err == nil {
		return nil
	}
	if terr := f.Truncate(cur); terr != nil {
		return fmt.Errorf("sqlite: preallocate WAL: %w", errors.Join(err, terr))
	}
	if isFull(err) {
		log.Warn("the database's disk filled while preallocating the WAL: it is left as it was, so commits may be slower", "err", err)
		return nil
	}
	return fmt.Errorf("sqlite: preallocate WAL: %w", err)
}

// privateFiles makes the database at path private to its owner: it creates
// the file (empty, mode 0600) if there is none, reporting created, and
// removes the group and other permission bits from the database, its WAL
// and its shared-memory file where it finds them set, with a warning for
// each. SQLite creates the WAL and shared-memory files with the database's
// mode, so they too are born private.
func privateFiles(path string, log *slog.Logger) (created bool, err error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	switch {
	case err == nil:
		if err := f.Close(); err != nil {
			os.Remove(path)
			return false, fmt.Errorf("sqlite: create %s: %w", path, err)
		}
		created = true
	case !errors.Is(err, fs.ErrExist):
		return false, fmt.Errorf("sqlite: create %s: %w", path, err)
	}
	for _, p := range []string{path, path + "-wal", path + "-shm"} {
		fi, err := os.Stat(p)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return created, fmt.Errorf("sqlite: %w", err)
		}
		mode := fi.Mode().Perm()
		if mode&0o077 == 0 {
			continue
		}
		if err := os.Chmod(p, mode&^0o077); err != nil {
			return created, fmt.Errorf("sqlite: %s is open to other users and could not be made private: %w", p, err)
		}
		log.Warn("a database file was open to other users; made it private (0600)", "path", p, "was", fmt.Sprintf("%04o", mode))
	}
	return created, nil
}

// removeDatabase removes the database at path and the files SQLite keeps
// beside it, after an Open that created it failed.
func removeDatabase(path string) {
	for _, p := range []string{path, path + "-wal", path + "-shm", path + "-journal"} {
		_ = os.Remove(p)
	}
}

// check runs SQLite's quick_check on the database before anything reads or
// writes it: a damaged page is found at Open, not by the first request
// that lands on it. It reads every page once: on a database of 1 000 000
// pending watches (383 MiB) it took about 40 % as long as listing them for
// the scheduler does.
func (s *Store) check(ctx context.Context) error {
	return quickCheck(ctx, s.writeDB, s.path)
}

// Checked waits for the check of the file that Options.CheckLater left
// running after Open, and returns its result: ErrCorrupt when it found the
// file damaged (every write fails with it then), ErrClosed when Close cut
// it short, ctx's error if ctx ends first. Without CheckLater, Open checked
// before returning, and Checked returns nil at once.
func (s *Store) Checked(ctx context.Context) error {
	if s.checked == nil {
		return nil
	}
	select {
	case <-s.checked.done:
		return s.checked.err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// fileCheck is a quick_check running beside the store's first reads
// (Options.CheckLater). The writer waits for it before its first write.
type fileCheck struct {
	done   chan struct{} // closed when the check has ended
	err    error         // its result, once done is closed
	cancel context.CancelFunc
}

// checkInBackground starts quickCheck of the database at path on a read
// connection of its own, closed once the check ends: the pages it read
// leave memory with it (on a pool's connection they stayed, its whole
// cache_size).
func checkInBackground(path, synchronous string) *fileCheck {
	ctx, cancel := context.WithCancel(context.Background())
	c := &fileCheck{done: make(chan struct{}), cancel: cancel}
	go func() {
		defer close(c.done)
		db, err := sql.Open("sqlite", dsn(path, synchronous, true))
		if err == nil {
			err = errors.Join(quickCheck(ctx, db, path), db.Close())
		}
		if ctx.Err() != nil {
			err = ErrClosed // cut short by Close
		}
		c.err = err
	}()
	return c
}

// stop cuts the check short and waits for it to end.
func (c *fileCheck) stop() {
	if c == nil {
		return
	}
	c.cancel()
	<-c.done
}

// quickCheck runs SQLite's quick_check on db, the database at path, and
// answers ErrCorrupt if it finds it damaged or not a database at all.
func quickCheck(ctx context.Context, db interface {
	QueryRowContext(context.Context, string, ...any) *sql.Row
}, path string) error {
	var res string
	err := db.QueryRowContext(ctx, "PRAGMA quick_check(1)").Scan(&res)
	if err != nil {
		if corrupted(err) {
			return fmt.Errorf("%w: %s cannot be read as a database (%v): restore it from a backup, or remove it to start afresh", ErrCorrupt, path, err)
		}
		return fmt.Errorf("sqlite: check %s: %w", path, err)
	}
	if res != "ok" {
		return fmt.Errorf("%w: %s fails SQLite's integrity check (%s): restore it from a backup, or remove it to start afresh", ErrCorrupt, path, res)
	}
	return nil
}

// useFdatasync has SQLite commit with fdatasync(2) instead of fsync(2),
// process-wide, as every Linux distribution's build of SQLite does (its
// configure script finds fdatasync; the transpiled library keeps the source
// default, fsync). fdatasync writes the data and the metadata needed to
// read it back, the file's size included, so a commit is as durable; it
// skips the timestamps, which on ext4 cost a journal commit of their own at
// every fsync even though the WAL is written in place (preallocate). Where
// the library has no fdatasync (macOS, Windows) SQLite keeps its own sync.
func useFdatasync() {
	_, _ = sqlite.Fdatasync(true)
}

// dsn returns the driver's data source name for path: WAL, the synchronous
// setting, a busy timeout, foreign keys, and BEGIN IMMEDIATE for the writer.
func dsn(path, synchronous string, readOnly bool) string {
	q := url.Values{}
	for _, p := range []string{
		"busy_timeout(" + strconv.Itoa(busyTimeoutMS) + ")",
		"journal_mode(WAL)",
		"synchronous(" + synchronous + ")",
		"foreign_keys(1)",
		"cache_size(-" + strconv.Itoa(cacheSizeKiB) + ")",
		"temp_store(MEMORY)",
	} {
		q.Add("_pragma", p)
	}
	if readOnly {
		q.Add("_pragma", "query_only(1)")
	} else {
		q.Add("_pragma", "wal_autocheckpoint(0)") // see (*writer).committed
		q.Add("_pragma", "journal_size_limit("+strconv.Itoa(walSizeLimit)+")")
		q.Set("_txlock", "immediate")
	}
	return path + "?" + q.Encode()
}

// migrations returns the goose provider of the embedded migrations on the
// writer's database.
func (s *Store) migrations() (*goose.Provider, error) {
	fsys, err := fs.Sub(migrationFiles, "migrations")
	if err != nil {
		return nil, fmt.Errorf("sqlite: migrations: %w", err)
	}
	p, err := goose.NewProvider(goose.DialectSQLite3, s.writeDB, fsys,
		goose.WithDisableGlobalRegistry(true),
		goose.WithSlog(s.log),
	)
	if err != nil {
		return nil, fmt.Errorf("sqlite: migrations: %w", err)
	}
	return p, nil
}

// schemaCurrent reports whether the database's schema version is the
// newest this build knows: false too when it cannot be read. It only
// reads (goose's own reading makes its version table when there is none).
func (s *Store) schemaCurrent(ctx context.Context) bool {
	var v sql.NullInt64
	err := s.writeDB.QueryRowContext(ctx, `SELECT max(version_id) FROM goose_db_version`).Scan(&v)
	return err == nil && v.Valid && v.Int64 == SchemaVersion()
}

// migrate applies the embedded migrations in order, each in a transaction,
// and refuses a database whose schema is newer than the newest of them.
func (s *Store) migrate(ctx context.Context) error {
	p, err := s.migrations()
	if err != nil {
		return err
	}
	current, known, err := p.GetVersions(ctx)
	if err != nil {
		return fmt.Errorf("sqlite: read schema version of %s: %w", s.path, err)
	}
	if current > known {
		return fmt.Errorf("%w: %s has schema version %d and this build knows up to %d; run the newer vigil that wrote it, or restore a backup made for this version",
			ErrSchemaNewer, s.path, current, known)
	}
	results, err := p.Up(ctx)
	if err != nil {
		return fmt.Errorf("sqlite: migrate %s: %w", s.path, err)
	}
	if len(results) > 0 {
		s.log.Info("schema migrated", "path", s.path, "from", current, "to", known)
	}
	return nil
}

// SchemaVersion is the newest schema version this build knows.
func SchemaVersion() int64 {
	entries, err := fs.ReadDir(migrationFiles, "migrations")
	if err != nil {
		return 0
	}
	var v int64
	for _, e := range entries {
		name, _, _ := strings.Cut(e.Name(), "_")
		if n, err := strconv.ParseInt(name, 10, 64); err == nil && n > v {
			v = n
		}
	}
	return v
}

// Close stops the writer after it has committed every write already
// accepted, and closes the database. Writes made after Close fail with
// ErrClosed. Close is idempotent.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		s.checked.stop() // before the writer, whose last writes wait for it
		s.w.stop()
		<-s.checkpointDone
		s.r.close()
		s.closeErr = errors.Join(s.readDB.Close(), s.writeDB.Close())
		if s.closeErr != nil {
			s.closeErr = fmt.Errorf("sqlite: close %s: %w", s.path, s.closeErr)
		}
	})
	return s.closeErr
}

// SetWriteFaultFunc makes every commit call f first and, when f returns an
// error, fail with it as a failed disk write would: the batch is rolled
// back and each of its callers gets the error (syscall.ENOSPC reads as
// storage_full). nil takes the fault away. It lets tests play a full disk
// without filling one.
func (s *Store) SetWriteFaultFunc(f func() error) {
	if f == nil {
		s.w.fault.Store(nil)
		return
	}
	s.w.fault.Store(&f)
}

// Backup writes a consistent copy of the live database to destPath with
// VACUUM INTO, without stopping readers or writers. destPath must not exist
// yet; the copy is made private (0600), like the database, under a
// temporary name and given destPath only once complete and synced, so
// neither a failed backup nor a killed one leaves a partial file under that
// name (see backupInto). The copy is compact and can be opened with Open.
func (s *Store) Backup(ctx context.Context, destPath string) (err error) {
	conn, err := s.readDB.Conn(ctx)
	if err != nil {
		return fmt.Errorf("sqlite: backup: %w", err)
	}
	defer conn.Close()
	// VACUUM INTO writes only the new file; the pool's connections are
	// query_only, so lift that for this one statement.
	if _, err := conn.ExecContext(ctx, "PRAGMA query_only = 0"); err != nil {
		return fmt.Errorf("sqlite: backup: %w", err)
	}
	err = backupInto(ctx, conn, destPath)
	if _, rerr := conn.ExecContext(context.WithoutCancel(ctx), "PRAGMA query_only = 1"); rerr != nil {
		// Do not return this connection to the pool writable.
		_ = conn.Raw(func(any) error { return driver.ErrBadConn })
		err = errors.Join(err, rerr)
	}
	return err
}

// BackupFile writes a consistent copy of the database file at path to
// destPath, as Store.Backup does, without opening a Store: it is what
// vigil backup runs, beside a daemon that may be writing to the database
// (in another process). It reads the database through one read-only
// connection (SQLite's mode=ro), so it never writes to the database or its
// WAL (no preallocation, no truncation, no checkpoint when it closes), and
// it applies no migration: the copy is the database as it is, with the
// schema version it has, older or newer than this build's, which a
// restored copy keeps until a vigil that knows it opens it (migrating an
// older one, refusing one newer than it knows with ErrSchemaNewer).
//
// It refuses a path with no database (it creates none) and a damaged
// database (ErrCorrupt, after SQLite's quick_check, as Open does).
// destPath must not exist yet; it is made as Store.Backup makes it.
func BackupFile(ctx context.Context, path, destPath string) (err error) {
	if path == "" || path == ":memory:" || strings.HasPrefix(path, "file:") {
		return fmt.Errorf("sqlite: path %q: need the path of a database file", path)
	}
	if _, err := os.Stat(path); err != nil {
		return fmt.Errorf("sqlite: backup: %w", err)
	}
	db, err := sql.Open("sqlite", readOnlyDSN(path))
	if err != nil {
		return fmt.Errorf("sqlite: open %s: %w", path, err)
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	conn, err := db.Conn(ctx)
	if err != nil {
		if corrupted(err) {
			return fmt.Errorf("%w: %s cannot be read as a database (%v)", ErrCorrupt, path, err)
		}
		return fmt.Errorf("sqlite: open %s: %w", path, err)
	}
	defer conn.Close()
	if err := quickCheck(ctx, conn, path); err != nil {
		return err
	}
	return backupInto(ctx, conn, destPath)
}

// readOnlyDSN is the data source name of a read-only connection to the
// database file at path: SQLite's mode=ro (a URI, so the path is escaped)
// and the store's busy timeout, and nothing that would write (no
// journal_mode, which may convert the file).
func readOnlyDSN(path string) string {
	if abs, err := filepath.Abs(path); err == nil {
		path = abs
	}
	u := url.URL{Scheme: "file", Path: filepath.ToSlash(path), OmitHost: true}
	q := url.Values{}
	q.Set("mode", "ro")
	q.Add("_pragma", "busy_timeout("+strconv.Itoa(busyTimeoutMS)+")")
	return u.String() + "?" + q.Encode()
}

// backupInto copies the database conn reads to destPath, which must not
// exist, so that destPath never names a partial copy, even if the process
// is killed or the system fails midway: the copy is written with VACUUM
// INTO (one read transaction, so one consistent snapshot, taken while
// writers carry on) to a private (0600) temporary file beside destPath,
// synced (SQLite never syncs what VACUUM INTO writes), and only then given
// its name, by a link that fails if destPath has appeared meanwhile, and
// the directory synced. A copy that fails leaves neither name behind; a
// process killed midway leaves at most the hidden temporary file
// (.NAME-*.partial), never a file under the name asked for.
func backupInto(ctx context.Context, conn *sql.Conn, destPath string) (err error) {
	if _, err := os.Lstat(destPath); err == nil {
		return fmt.Errorf("sqlite: backup: %s: %w", destPath, fs.ErrExist)
	} else if !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("sqlite: backup: %w", err)
	}
	f, err := os.CreateTemp(filepath.Dir(destPath), "."+filepath.Base(destPath)+"-*.partial")
	if err != nil {
		// Name the directory, not the temporary file the user never asked for.
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		return fmt.Errorf("sqlite: backup: create %s: %w", destPath, err)
	}
	tmp := f.Name()
	defer os.Remove(tmp)
	if err := f.Close(); err != nil {
		return fmt.Errorf("sqlite: backup: %w", err)
	}
	if _, err := conn.ExecContext(ctx, "VACUUM INTO ?", tmp); err != nil {
		return fmt.Errorf("sqlite: backup to %s: %w", destPath, err)
	}
	if err := syncPath(tmp, false); err != nil {
		return fmt.Errorf("sqlite: backup to %s: sync: %w", destPath, err)
	}
	if err := publishBackup(tmp, destPath); err != nil {
		return fmt.Errorf("sqlite: backup: %w", err)
	}
	os.Remove(tmp) // before the directory's sync, which then holds one name
	if runtime.GOOS == "windows" {
		return nil // Windows cannot open, or sync, a directory
	}
	if err := syncPath(filepath.Dir(destPath), true); err != nil {
		os.Remove(destPath)
		return fmt.Errorf("sqlite: backup to %s: sync: %w", destPath, err)
	}
	return nil
}

// publishBackup gives the complete copy at tmp the name destPath, which
// must not exist: a hard link, which refuses an existing name atomically;
// on a file system without hard links, a rename after a check.
func publishBackup(tmp, destPath string) error {
	err := os.Link(tmp, destPath)
	if err == nil || errors.Is(err, fs.ErrExist) {
		return err
	}
	if _, serr := os.Lstat(destPath); serr == nil {
		return fmt.Errorf("%s: %w", destPath, fs.ErrExist)
	}
	return os.Rename(tmp, destPath)
}

// syncFile syncs f to stable storage; tests replace it to see, or fail,
// the syncs of a backup.
var syncFile = (*os.File).Sync

// syncPath syncs the file at path, or the directory (dir), to stable
// storage.
func syncPath(path string, dir bool) error {
	flag := os.O_RDWR // a file: some systems sync only a file open for writing
	if dir {
		flag = os.O_RDONLY
	}
	f, err := os.OpenFile(path, flag, 0)
	if err != nil {
		return err
	}
	err = syncFile(f)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// Ping answers nil while the store is open and its database answers a
// query, for a readiness check; ErrClosed after Close.
func (s *Store) Ping(ctx context.Context) error {
	if err := s.readDB.PingContext(ctx); err != nil {
		if errors.Is(err, sql.ErrConnDone) || strings.Contains(err.Error(), "database is closed") {
			return ErrClosed
		}
		return fmt.Errorf("sqlite: ping %s: %w", s.path, err)
	}
	return nil
}
