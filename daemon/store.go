package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/vigil-run/vigil"
	"github.com/vigil-run/vigil/store/postgres"
	"github.com/vigil-run/vigil/store/sqlite"
)

// rowLeases holds the store URLs whose replicas renew their leases as
// rows rather than hold them as sessions (postgres.Options.RenewedLeases):
// set by tests only (export_test.go), as on a server before PostgreSQL 14.
var rowLeases sync.Map

func renewedLeases(store string) bool {
	_, ok := rowLeases.Load(store)
	return ok
}

// idleTxTimeout is how long the server lets one of a replica's sessions
// sit idle inside a transaction (idle_in_transaction_session_timeout):
// the renewal interval, at least a second, at most the lease. vigil never
// leaves a transaction open while it waits on anything but the database,
// so only a replica frozen or cut off mid-transaction reaches it; until
// then the row locks of its transaction hold back the other replicas'
// writes to those rows (a settlement of a watch it had locked, the
// takeover of its shards), and their connections wait with them.
func idleTxTimeout(lease, renew time.Duration) time.Duration {
	return min(lease, max(renew, time.Second))
}

// openStore opens the store cfg names: the SQLite file (checked first: see
// checkDatabase) or the PostgreSQL database.
func openStore(ctx context.Context, cfg Config, replica string, logger *slog.Logger) (vigil.Store, error) {
	if cfg.Postgres() {
		// Every write is heard by the other daemons on the database (see
		// pgEvents and shards, each with its Listen).
		st, err := postgres.Open(ctx, cfg.Store, &postgres.Options{Logger: logger, Notify: true, Replica: replica, IdleTxTimeout: idleTxTimeout(cfg.leases()),
			RenewedLeases: renewedLeases(cfg.Store)})
		if err != nil {
			return nil, fmt.Errorf("store: %w", err)
		}
		return st, nil
	}
	fresh, err := checkDatabase(cfg)
	if err != nil {
		return nil, err
	}
	dbPath := cfg.DatabasePath()
	if err := os.MkdirAll(filepath.Dir(dbPath), 0o700); err != nil {
		return nil, fmt.Errorf("store: %w", err)
	}
	if fresh {
		if err := createDatabase(ctx, dbPath, logger); err != nil {
			return nil, err
		}
	}
	// The file's check runs on while Run reads the pending watches
	// (checkedStore): at a million watches it is a second of the start.
	st, err := sqlite.Open(ctx, dbPath, &sqlite.Options{Logger: logger, CheckLater: true})
	if err != nil {
		return nil, storeErr(err)
	}
	return st, nil
}

// createdSuffix names, beside the database, the file createDatabase makes
// it in before it renames it into place.
const createdSuffix = ".new"

// createHook, when set (by tests), is called at each step of
// createDatabase, named, and as writeNewFile writes a key file (with its
// name); a test kills the process there.
var createHook func(step string)

// createDatabase makes the SQLite database at path, which a first start
// found missing or empty (checkDatabase): it makes and migrates it as
// path+createdSuffix, closes it (which copies its WAL into it and removes
// the WAL), syncs it, renames it into place and syncs the directory. So a
// start killed at any instant leaves either no database at path, and the
// next start makes it again, or a complete one: never an empty or half-made
// file that a later start would take for a lost database. What such a
// start left (the empty file, a WAL, the half-made copy) is removed first.
func createDatabase(ctx context.Context, path string, logger *slog.Logger) error {
	step := func(name string) {
		if createHook != nil {
			createHook(name)
		}
	}
	tmp := path + createdSuffix
	for _, p := range []string{path, tmp} {
		for _, f := range []string{p, p + "-wal", p + "-shm", p + "-journal"} {
			if err := os.Remove(f); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return fmt.Errorf("store: %w", err)
			}
		}
	}
	step("cleared")
	// Its own log lines (the WAL's preallocation) are of a file that is
	// renamed: the start says once that it made the database.
	st, err := sqlite.Open(ctx, tmp, nil)
	if err != nil {
		return storeErr(err)
	}
	step("migrated")
	if err := st.Close(); err != nil {
		return fmt.Errorf("store: create %s: %w", path, err)
	}
	if _, err := os.Stat(tmp + "-wal"); !errors.Is(err, fs.ErrNotExist) {
		// SQLite left its WAL: the file alone may not hold it all.
		return fmt.Errorf("store: create %s: the WAL of %s was not folded into it (%v)", path, tmp, err)
	}
	step("closed")
	if err := syncPath(tmp); err != nil {
		return fmt.Errorf("store: create %s: %w", path, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("store: create %s: %w", path, err)
	}
	step("renamed")
	if runtime.GOOS != "windows" { // Windows cannot open, or sync, a directory
		if err := syncPath(filepath.Dir(path)); err != nil {
			return fmt.Errorf("store: create %s: %w", path, err)
		}
	}
	logger.Info("made the database", "path", path, "schema", sqlite.SchemaVersion())
	return nil
}

// syncPath syncs the file or directory at path to stable storage.
func syncPath(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	return errors.Join(f.Sync(), f.Close())
}

// storeErr is the daemon's error for a failed Open or check of the SQLite
// store. The store's own message names the file; ErrSchemaNewer also says
// which versions and what to do, ErrCorrupt what to do.
func storeErr(err error) error {
	if errors.Is(err, sqlite.ErrCorrupt) {
		return refuse(err, "store: %v", err)
	}
	return fmt.Errorf("store: %w", err)
}

// checkedStore returns what waits for st's check of its file: the SQLite
// store's Checked, with a damaged file's error the start's refusal; nil
// at once for a store checked at Open (or PostgreSQL's).
func checkedStore(st vigil.Store) func(context.Context) error {
	sq, ok := st.(*sqlite.Store)
	if !ok {
		return func(context.Context) error { return nil }
	}
	return func(ctx context.Context) error {
		if err := sq.Checked(ctx); err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return storeErr(err)
		}
		return nil
	}
}

// ReplicaID names this daemon among those on one database: host and pid.
func ReplicaID() string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "unknown-host"
	}
	return host + ":" + strconv.Itoa(os.Getpid())
}

// Info is what GET /v1/daemon says about the daemon: the kind of its store,
// on PostgreSQL which replica it is and which shards it holds, and to the
// admin the fingerprints of its signing keys.
type Info struct {
	// Store is "sqlite" or "postgres".
	Store string `json:"store"`
	// Replica is the daemon's id: host and pid.
	Replica string `json:"replica"`
	// Role is "active" once it serves (every replica serves the API, and
	// schedules and delivers the watches of the shards it holds),
	// "starting", or "stopping" once a shutdown has begun.
	Role string `json:"role"`
	// Shards are the shards it holds, on PostgreSQL, and ShardCount the
	// database's number of shards.
	Shards     []int `json:"shards,omitempty"`
	ShardCount int   `json:"shard_count,omitempty"`
	// MaxWait is how long it holds a long-poll or a check for the probe
	// it asks for (Limits.MaxWait), as a duration ("60s"): a client
	// bounds its own wait for a check by it.
	MaxWait string `json:"max_wait"`
	// Keys are the fingerprints of the daemon's webhook secrets and link
	// key, shown to the admin token only: every replica on one database
	// must show the same (checkKeys).
	Keys *KeyFingerprints `json:"keys,omitempty"`
}

// clipQuery bounds a caller's query before it is echoed.
func clipQuery(s string) string {
	if len(s) > 64 {
		return s[:64] + "…"
	}
	return s
}

// info serves GET /v1/daemon (also while starting: the gate lets it
// through, so vigil status can say so).
func (d *Daemon) info(w http.ResponseWriter, r *http.Request) {
	if r.URL.RawQuery != "" {
		// It takes no parameter: refused as every route of the API
		// refuses one it does not take.
		field := ""
		if q, err := url.ParseQuery(r.URL.RawQuery); err == nil {
			for name := range q {
				field = name
				break
			}
		}
		d.api.Fail(w, r, vigil.FieldErrorf(vigil.CodeInvalidRequest, clipQuery(field), "GET /v1/daemon takes no query parameter (%q given)", clipQuery(r.URL.RawQuery)))
		return
	}
	role := "starting"
	switch {
	case d.isStopping():
		role = "stopping"
	case d.ready.Load():
		role = "active"
	}
	in := Info{Store: d.cfg.StoreKind(), Replica: d.replica, Role: role, MaxWait: vigil.FormatDuration(d.cfg.Limits.MaxWait)}
	if _, scoped := vigil.ScopeFrom(r.Context()); !scoped {
		keys := d.keys
		in.Keys = &keys
	}
	if d.shards != nil {
		in.Shards, in.ShardCount = d.shards.held(), postgres.Shards
		if in.Shards == nil {
			in.Shards = []int{}
		}
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(in)
}

// registerReplicaMetrics adds to reg which daemon this is and what it
// holds: vigil_replica_info{replica,store} (always 1), vigil_replica_active
// (1 once it serves) and, on PostgreSQL, vigil_shards_owned (how many
// shards it holds).
func (d *Daemon) registerReplicaMetrics(reg *prometheus.Registry) {
	info := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "vigil_replica_info",
		Help: "This daemon: its replica id (host:pid) and store kind; always 1."}, []string{"replica", "store"})
	info.WithLabelValues(d.replica, d.cfg.StoreKind()).Set(1)
	active := prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "vigil_replica_active",
		Help: "1 once this daemon serves, 0 while it starts."},
		func() float64 {
			if d.ready.Load() {
				return 1
			}
			return 0
		})
	owned := prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "vigil_shards_owned",
		Help: "How many shards this replica holds (PostgreSQL); the shards' watches are the ones it schedules and delivers. 0 on SQLite."},
		func() float64 {
			if d.shards == nil {
				return 0
			}
			return float64(len(d.shards.held()))
		})
	reg.MustRegister(info, active, owned)
}
