// Package postgres is vigil's store for PostgreSQL: a vigil.Store over one
// database (one schema of it), through pgx v5 and its connection pool, for
// several daemons sharing one database or an operator who already runs
// PostgreSQL.
//
// Every write is one transaction, at READ COMMITTED, that is either
// committed whole or rolled back whole. What must hold across concurrent
// writers in any number of processes is held by the database itself, never
// by a lock in memory: a unique index keeps one pending watch per identity;
// the caps are counter rows, incremented under their row locks and
// checked before the commit; an idempotency key is a primary key that
// only an expired entry may take over; settling and cancelling are
// compare-and-set on state = 'pending' with the rows locked (SELECT … FOR
// UPDATE); and the mailbox's seq is handed out under an advisory
// transaction lock, so a reader's cursor never passes a message that
// commits later with a smaller seq. A transaction that loses a race (a
// deadlock, a serialization failure, a registration of the same identity or
// key committed first) is run again from the start, a bounded number of
// times.
//
// The schema is a numbered list of embedded SQL migrations applied with
// goose at Open, under a PostgreSQL session advisory lock, so replicas that
// start together migrate once. A database whose schema is newer than this
// build knows is refused (ErrSchemaNewer). The tables live in the schema
// the connection's search_path names first (search_path=... in the URL).
// Times are unix milliseconds UTC and JSON values TEXT, as in the SQLite
// store.
package postgres

import (
	"context"
	"crypto/rand"
	"embed"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/lock"
	"github.com/vigil-run/vigil"
)

//go:embed migrations/*.sql
var migrationFiles embed.FS

// ErrSchemaNewer is returned by Open for a database whose schema version is
// newer than this build knows: it was written by a newer vigil.
var ErrSchemaNewer = errors.New("postgres: database schema is newer than this build of vigil")

// Defaults of Options and of the store's internals, in one place.
const (
	// maxAttempts bounds how many times a write transaction that lost a
	// race is run again.
	maxAttempts = 20
	// pruneChunk bounds how many rows one prune step deletes.
	pruneChunk = 5000
	// listLimit and listLimitMax bound a page of WatchList and MessagesRead.
	listLimit    = 100
	listLimitMax = 1000
)

// Options configure Open. A nil *Options means the defaults.
type Options struct {
	// Logger receives the store's few log lines; nil discards them.
	Logger *slog.Logger
	// MaxConns is the size of the connection pool; zero keeps pgxpool's
	// default (pool_max_conns in the URL, else max(4, GOMAXPROCS)).
	MaxConns int32
	// Notify makes every registration, cancel, recipient close and
	// appended message send an Event (a PostgreSQL NOTIFY, heard only
	// once the change is committed: in the same transaction, or for a
	// registration just after its commit, see queueEvents), for the
	// stores that Listen on the same database and schema.
	Notify bool
	// Replica is this replica's id, written as settled_by on the watches
	// its settling writes settle (empty: NULL).
	Replica string
	// IdleTxTimeout, when positive, ends a session left idle inside a
	// transaction that long (PostgreSQL's
	// idle_in_transaction_session_timeout): a replica frozen or cut off
	// in the middle of a write holds its row locks (a share lock on its
	// lease rows in a fenced write, which keeps the takeover of its
	// shards waiting; the rows it writes, which keep the other replicas'
	// writes to them waiting, their connections with them). Set it to at
	// most the lease duration.
	IdleTxTimeout time.Duration
	// RenewedLeases makes the replicas' leases renewed rows, as before
	// schema 13, even on a server that could hold them as sessions
	// (SessionLeases): a replica then writes its row at every renewal and
	// acts as one of an older build. For tests of a mixed fleet.
	RenewedLeases bool
}

// leasePingIdle is how long a connection of the lease pool may sit idle
// before it is pinged on its next use.
const leasePingIdle = time.Minute

// Store is the PostgreSQL implementation of vigil.Store. It is safe for
// concurrent use, by any number of Stores in any number of processes on
// the same database and schema.
type Store struct {
	pool *pgxpool.Pool
	// leasePool is a second, small pool for the lease manager's
	// statements: renewals must never queue behind the main pool's
	// writes (a burst of settlements can hold every connection for
	// longer than a lease).
	leasePool *pgxpool.Pool
	// resets resets pool when the server ends its connections (reset.go).
	resets *resetter
	log    *slog.Logger
	schema string
	// channel is the NOTIFY channel of schema (Channel).
	channel string
	// lockKey is the key of the mailbox's advisory lock, per schema.
	lockKey int64
	// capKey is the key of the global cap's advisory lock, per schema,
	// and margin the server's max_connections times maxGroup (the most
	// watches the registrations in flight add): see createOne.
	capKey int64
	margin int64
	// creates shares registration transactions (WatchCreate).
	creates creates
	// nearCap is set when a registration found the total near the
	// global cap, so the next take the cap lock exclusive at once
	// (createOne).
	nearCap atomic.Bool
	// sendEvents is Options.Notify.
	sendEvents bool
	// replica is Options.Replica.
	replica string
	// origin is Origin.
	origin string
	// fence, once set (SetFence), conditions the settling writes and
	// receipts on this replica's leases.
	fence fenceRef
	// refused holds the watches a fenced write refused while this
	// replica's fence still held their shard (Refused drains it).
	refused refusedSet
	// raced counts the write transactions run again because they lost a
	// race (deadlock, serialization failure, errRetry): a test reads it.
	raced atomic.Int64
	// horizons holds each replica's last horizon reading (Heartbeat).
	horizons horizons
	// sessionLeases is SessionLeases; sessions holds the lease sessions.
	sessionLeases bool
	sessions      sessions
	// warm has the watches table analyzed early in its growth.
	warm statsWarmer
	// turns holds the resume turns taken here (Turn).
	turns turns

	closeOnce sync.Once
}

var _ vigil.Store = (*Store)(nil)

// Open connects to the database at url (postgres://…; search_path in it
// picks the schema), applies the migrations this build knows and returns
// the store. It refuses a database whose schema is newer (ErrSchemaNewer).
// Errors never repeat the URL's password.
func Open(ctx context.Context, url string, opts *Options) (*Store, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		// pgconn's parse error holds the URL, password included.
		return nil, errors.New("postgres: the store URL does not parse as a PostgreSQL connection string (postgres://user@host:port/database?sslmode=…)")
	}
	if o.MaxConns > 0 {
		cfg.MaxConns = o.MaxConns
	}
	if cfg.MinConns == 0 {
		// The pool stays open (pool_min_conns in the URL says
		// otherwise): a burst (a storm's settlements, a fleet
		// registering) found most of its connections closed and started
		// a backend for each, its process and caches, in the middle of
		// the burst (eight of three replicas' twelve in a storm). An
		// idle connection costs the server no CPU.
		cfg.MinConns = cfg.MaxConns
	}
	if o.IdleTxTimeout > 0 {
		cfg.ConnConfig.RuntimeParams["idle_in_transaction_session_timeout"] = strconv.FormatInt(max(1, o.IdleTxTimeout.Milliseconds()), 10)
	}
	lcfg := cfg.Copy()
	lcfg.MaxConns, lcfg.MinConns = 2, 0
	// pgxpool pings a connection idle for over a second before handing
	// it out: a lease step every few seconds would pay a round trip for
	// each of its statements. A step that finds its connection dead
	// fails and runs again at the next one, well inside a lease.
	lcfg.ShouldPing = func(_ context.Context, p pgxpool.ShouldPingParams) bool { return p.IdleDuration > leasePingIdle }
	// Each pool is reset when the server ends one of its connections
	// for a reason that ends them all (reset.go).
	resets := o.Logger.With("component", "store", "store", "postgres")
	r, lr := &resetter{name: "main", log: resets}, &resetter{name: "lease", log: resets}
	r.hook(cfg)
	lr.hook(lcfg)
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, wrap("connect", err)
	}
	r.set(pool)
	leasePool, err := pgxpool.NewWithConfig(ctx, lcfg)
	if err != nil {
		pool.Close()
		return nil, wrap("connect", err)
	}
	lr.set(leasePool)
	s := &Store{pool: pool, leasePool: leasePool, resets: r, sendEvents: o.Notify, replica: o.Replica, origin: rand.Text()[:10]}
	// One registration transaction at a time: the registrations made
	// meanwhile go together in the next (creates). Settlements,
	// deliveries and reads keep the rest of the pool during a burst.
	s.creates.init(1)

	// current_schema() is NULL when no schema of the search_path exists.
	var schema *string
	if err := pool.QueryRow(ctx, `SELECT current_schema()`).Scan(&schema); err != nil {
		s.Close()
		return nil, wrap("connect to "+cfg.ConnConfig.Host, err)
	}
	if schema != nil {
		s.schema = *schema
	}
	if s.schema == "" {
		s.Close()
		return nil, errors.New("postgres: the connection's search_path names no schema that exists: create it, or fix search_path in the store URL")
	}
	s.log = o.Logger.With("component", "store", "store", "postgres", "schema", s.schema)
	s.channel = channelOf(s.schema)
	s.turns.init(cfg.ConnConfig, s.log, s.schema)
	h := fnv.New64a()
	h.Write([]byte("vigil messages " + s.schema))
	s.lockKey = int64(h.Sum64())
	h.Reset()
	h.Write([]byte("vigil caps " + s.schema))
	s.capKey = int64(h.Sum64())
	var maxConns string
	if err := pool.QueryRow(ctx, `SHOW max_connections`).Scan(&maxConns); err != nil {
		s.Close()
		return nil, wrap("read max_connections", err)
	}
	if s.margin, err = strconv.ParseInt(maxConns, 10, 64); err != nil {
		s.Close()
		return nil, fmt.Errorf("postgres: max_connections %q is not a number", maxConns)
	}
	s.margin *= maxGroup
	var version int64
	if err := pool.QueryRow(ctx, `SELECT current_setting('server_version_num')::bigint`).Scan(&version); err != nil {
		s.Close()
		return nil, wrap("read the server's version", err)
	}
	s.sessionLeases = version >= sessionMinVersion && !o.RenewedLeases
	if err := s.migrate(ctx); err != nil {
		s.Close()
		return nil, err
	}
	if err := s.readShards(ctx); err != nil {
		s.Close()
		return nil, err
	}
	var tuples float64
	if err := pool.QueryRow(ctx, `SELECT reltuples FROM pg_class WHERE oid = to_regclass('watches')`).Scan(&tuples); err != nil {
		s.Close()
		return nil, wrap("read the watches table's statistics", err)
	}
	s.warm.arm(tuples)
	if err := s.trigramWarning(ctx); err != nil {
		pool.Close()
		return nil, err
	}
	return s, nil
}

// trigramWarning logs a warning when schema 5 was applied without the
// pg_trgm extension (its migration then skips the trigram indexes): the
// watch list's text filter still answers the same, but reads the text of
// every watch.
func (s *Store) trigramWarning(ctx context.Context) error {
	var missing bool
	if err := s.pool.QueryRow(ctx, `SELECT to_regclass('watch_text_note_trgm') IS NULL OR to_regclass('watch_text_predicate_trgm') IS NULL`).Scan(&missing); err != nil {
		return wrap("look for the text filter's indexes", err)
	}
	if missing {
		s.log.Warn("the watch list's text filter reads the text of every watch: PostgreSQL's pg_trgm extension was unavailable when schema 5 was applied; " +
			"have it installed (CREATE EXTENSION pg_trgm SCHEMA public) and create the two trigram indexes as store/postgres/migrations/00005_watch_text.sql does")
	}
	return nil
}

// Schema is the schema the store's tables live in.
func (s *Store) Schema() string { return s.schema }

// Pool is the store's connection pool, for what lives beside the store on
// the same database (the daemon's scheduling lock).
func (s *Store) Pool() *pgxpool.Pool { return s.pool }

// migrate applies the embedded migrations in order, each in a transaction,
// under a session advisory lock of this schema, and refuses a database
// whose schema is newer than the newest of them.
func (s *Store) migrate(ctx context.Context) error {
	fsys, err := fs.Sub(migrationFiles, "migrations")
	if err != nil {
		return fmt.Errorf("postgres: migrations: %w", err)
	}
	h := fnv.New64a()
	h.Write([]byte("vigil migrations " + s.schema))
	// Probe every second, for up to five minutes: a replica migrating a
	// large table holds the lock that long.
	locker, err := lock.NewPostgresSessionLocker(lock.WithLockID(int64(h.Sum64())), lock.WithLockTimeout(1, 300))
	if err != nil {
		return fmt.Errorf("postgres: migrations: %w", err)
	}
	db := stdlib.OpenDBFromPool(s.pool)
	defer db.Close()
	p, err := goose.NewProvider(goose.DialectPostgres, db, fsys,
		goose.WithDisableGlobalRegistry(true),
		goose.WithSlog(s.log),
		goose.WithSessionLocker(locker),
	)
	if err != nil {
		return fmt.Errorf("postgres: migrations: %w", err)
	}
	// versions reads the schema's version and refuses one newer than this
	// build knows.
	versions := func() (current, known int64, err error) {
		current, known, err = p.GetVersions(ctx)
		if err != nil {
			return 0, 0, fmt.Errorf("postgres: read schema version of %s: %w", s.schema, interpretError(err))
		}
		if current > known {
			return 0, 0, fmt.Errorf("%w: schema %s has version %d and this build knows up to %d; run the newer vigil that wrote it, or restore a backup made for this version",
				ErrSchemaNewer, s.schema, current, known)
		}
		return current, known, nil
	}
	current, known, err := versions()
	if err != nil {
		return err
	}
	if afterVersionCheck != nil {
		afterVersionCheck()
	}
	results, err := p.Up(ctx)
	if err != nil {
		return fmt.Errorf("postgres: migrate schema %s: %w", s.schema, interpretError(err))
	}
	// The version was read without the lock Up takes: a newer replica
	// starting at the same time may have migrated the schema past this
	// build's meanwhile, and Up then found nothing it knows to apply and
	// said nothing. Read it again, so that this build refuses to start on
	// a newer schema however the starts interleave.
	if _, _, err := versions(); err != nil {
		return err
	}
	if len(results) > 0 {
		s.log.Info("schema migrated", "from", current, "to", known)
	}
	return nil
}

// afterVersionCheck, when set, runs between migrate's first reading of
// the schema version and its migrations (a test plays a newer replica
// migrating there).
var afterVersionCheck func()

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

// Close closes the pool, after the calls in flight return, and the
// connection of the resume turns (Turn), giving up those it holds. Calls made after
// Close fail. Close is idempotent.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		s.creates.close()
		s.warm.stop()
		s.turns.close()
		s.sessions.endAll()
		s.pool.Close()
		s.leasePool.Close()
	})
	return nil
}

// errRetry is returned by a transaction's body when it lost a race that a
// fresh run resolves (a registration of the same identity or idempotency
// key committed first).
var errRetry = errors.New("postgres: lost a race; run again")

// write runs fn in one transaction, committed if it returns nil and rolled
// back otherwise, and runs it again from the start when it lost a race:
// errRetry, a serialization failure or a deadlock.
func (s *Store) write(ctx context.Context, fn func(tx pgx.Tx) error) error {
	var err error
	for range maxAttempts {
		err = pgx.BeginFunc(ctx, s.pool, fn)
		if err == nil || !retryable(err) || ctx.Err() != nil {
			return err
		}
		s.raced.Add(1)
	}
	return &vigil.Error{Code: vigil.CodeUnavailable, Err: err,
		Message: fmt.Sprintf("the database kept refusing this write as it raced others (%d attempts): try again", maxAttempts)}
}

func retryable(err error) bool {
	if errors.Is(err, errRetry) {
		return true
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		switch pe.Code {
		case "40001", "40P01": // serialization_failure, deadlock_detected
			return true
		}
	}
	return false
}

// interpretError translates a driver error into vigil's error model, in one
// place: no rows is not_found; a unique violation is conflict; a full disk
// is storage_full; a database that cannot be reached, is shutting down or
// keeps failing a write on a race is unavailable. A *vigil.Error goes back
// as it is; anything else is returned as it is (an internal error).
func interpretError(err error) error {
	if err == nil {
		return nil
	}
	var ve *vigil.Error
	if errors.As(err, &ve) {
		return err
	}
	if errors.Is(err, pgx.ErrNoRows) {
		return &vigil.Error{Code: vigil.CodeNotFound, Message: "not found", Err: err}
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		switch {
		case pe.Code == "23505": // unique_violation
			return &vigil.Error{Code: vigil.CodeConflict, Message: "conflict: the row already exists", Err: err}
		case pe.Code == "53100": // disk_full
			return &vigil.Error{Code: vigil.CodeStorageFull, Err: err,
				Message: "the disk holding vigil's PostgreSQL database is full, so nothing was written: free some space and try again"}
		case pe.Code == "40001", pe.Code == "40P01":
			return &vigil.Error{Code: vigil.CodeUnavailable, Err: err, Message: "the database refused this write as it raced another: try again"}
		case strings.HasPrefix(pe.Code, "08"), // connection_exception
			pe.Code == "57P01", pe.Code == "57P02", pe.Code == "57P03", // admin_shutdown, crash_shutdown, cannot_connect_now
			pe.Code == "53300", // too_many_connections
			pe.Code == "25006": // read_only_sql_transaction: a standby
			return &vigil.Error{Code: vigil.CodeUnavailable, Err: err,
				Message: "vigil's PostgreSQL database is unavailable (" + pe.Message + "): try again"}
		}
		return err
	}
	var ce *pgconn.ConnectError
	var ne net.Error
	// A connection closed under a statement (the server gone without a
	// word, a proxy or the network cutting it) reads as an EOF.
	if errors.As(err, &ce) || errors.As(err, &ne) || pgconn.SafeToRetry(err) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return &vigil.Error{Code: vigil.CodeUnavailable, Err: err,
			Message: "vigil's PostgreSQL database cannot be reached: try again"}
	}
	return err
}

// constraint names the constraint a unique violation broke, "" for any
// other error.
func constraint(err error) string {
	var pe *pgconn.PgError
	if errors.As(err, &pe) && pe.Code == "23505" {
		return pe.ConstraintName
	}
	return ""
}

// wrap gives an internal error its context; a *vigil.Error (made by
// interpretError or by the store's own rules) goes back as it is, so its
// message stays the sentence a user reads.
func wrap(what string, err error) error {
	if err == nil {
		return nil
	}
	err = interpretError(err)
	var ve *vigil.Error
	if errors.As(err, &ve) {
		return err
	}
	return fmt.Errorf("postgres: %s: %w", what, err)
}

func notFound(id string) error {
	return vigil.Errorf(vigil.CodeNotFound, "watch %s not found", id)
}

// Ping answers nil when a pooled connection reads the schema's replicas
// table (no row: the plan alone needs the table), for a readiness check:
// an error when the server does not answer within ctx, the pool is closed
// or the schema is gone. When every connection of the main pool is busy
// (a replica under load, or taking over the shards of others) it asks on
// the lease pool's: a replica whose pool is saturated still reaches its
// database, and the only one left serving must not look unready for
// its load.
func (s *Store) Ping(ctx context.Context) error {
	db := s.pool
	if st := s.pool.Stat(); st.IdleConns() == 0 && st.TotalConns() >= st.MaxConns() {
		db = s.leasePool
	}
	if _, err := db.Exec(ctx, `SELECT 1 FROM replicas LIMIT 0`); err != nil {
		return wrap("ping", err)
	}
	return nil
}
