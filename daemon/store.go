package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/vigil-run/vigil"
	"github.com/vigil-run/vigil/store/postgres"
	"github.com/vigil-run/vigil/store/sqlite"
)

// openStore opens the store cfg names: the SQLite file (checked first: see
// checkDatabase) or the PostgreSQL database.
func openStore(ctx context.Context, cfg Config, logger *slog.Logger) (vigil.Store, error) {
	if cfg.Postgres() {
		st, err := postgres.Open(ctx, cfg.Store, &postgres.Options{Logger: logger,
			// Every write is heard by the other daemons on the database
			// (see pgEvents and its Listen).
			Notify: true})
		if err != nil {
			return nil, fmt.Errorf("store: %w", err)
		}
		return st, nil
	}
	if err := checkDatabase(cfg); err != nil {
		return nil, err
	}
	dbPath := cfg.DatabasePath()
	if err := os.MkdirAll(filepath.Dir(dbPath), 0o700); err != nil {
		return nil, fmt.Errorf("store: %w", err)
	}
	st, err := sqlite.Open(ctx, dbPath, &sqlite.Options{Logger: logger})
	if err != nil {
		// The store's own message names the file; ErrSchemaNewer also
		// says which versions and what to do, ErrCorrupt what to do.
		if errors.Is(err, sqlite.ErrCorrupt) {
			return nil, refuse(err, "store: %v", err)
		}
		return nil, fmt.Errorf("store: %w", err)
	}
	return st, nil
}

// schedulingLockPing is how often the holder of the scheduling lock checks
// that its session, and so the lock, is still there.
const schedulingLockPing = 2 * time.Second

// schedulingLock is the PostgreSQL session advisory lock that makes one
// daemon, of all those on one database and schema, the one that schedules
// and delivers: until watches are sharded, two schedulers would both probe
// and fire every watch. The others stand by (the API answers 503) and the
// first to get the lock when the holder's session ends primes everything,
// as a restarted daemon does. The lock lives on one connection taken out
// of the pool for as long as it is held.
type schedulingLock struct {
	conn *pgxpool.Conn
	key  int64
}

// takeSchedulingLock waits until it holds the scheduling lock of st's
// schema, or ctx ends. standby is called once if it has to wait.
func takeSchedulingLock(ctx context.Context, st *postgres.Store, standby func()) (*schedulingLock, error) {
	h := fnv.New64a()
	h.Write([]byte("vigil scheduler " + st.Schema()))
	l := &schedulingLock{key: int64(h.Sum64())}
	var err error
	if l.conn, err = st.Pool().Acquire(ctx); err != nil {
		return nil, fmt.Errorf("scheduling lock: %w", err)
	}
	var got bool
	if err := l.conn.QueryRow(ctx, `SELECT pg_try_advisory_lock($1)`, l.key).Scan(&got); err != nil {
		l.release()
		return nil, fmt.Errorf("scheduling lock: %w", err)
	}
	if !got {
		standby()
		// Blocks until the holder's session ends; a cancelled ctx
		// cancels the wait (and closes the connection).
		if _, err := l.conn.Exec(ctx, `SELECT pg_advisory_lock($1)`, l.key); err != nil {
			l.release()
			return nil, fmt.Errorf("scheduling lock: %w", err)
		}
	}
	return l, nil
}

// hold checks the lock's session every schedulingLockPing until ctx ends
// (nil) or the session is gone (an error: the lock may be someone else's
// now, so this daemon must stop scheduling at once).
func (l *schedulingLock) hold(ctx context.Context) error {
	t := time.NewTicker(schedulingLockPing)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		var held bool
		err := l.conn.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_locks WHERE locktype = 'advisory' AND pid = pg_backend_pid()
			AND granted AND ((classid::bigint << 32) | objid::bigint) = $1)`, l.key).Scan(&held)
		if ctx.Err() != nil {
			return nil
		}
		if err != nil {
			return fmt.Errorf("lost the connection holding the scheduling lock (another daemon may schedule now), so this one stops: %w", err)
		}
		if !held {
			return errors.New("the scheduling lock is no longer held (another daemon may schedule now), so this one stops")
		}
	}
}

// release ends the lock's session, which releases the lock: the
// connection is closed, never handed back to the pool holding it.
func (l *schedulingLock) release() {
	if l == nil || l.conn == nil {
		return
	}
	c := l.conn.Hijack()
	l.conn = nil
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = c.Close(ctx)
}

// ReplicaID names this daemon among those on one database: host and pid.
func ReplicaID() string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "unknown-host"
	}
	return host + ":" + strconv.Itoa(os.Getpid())
}

// Info is what GET /v1/daemon says about the daemon: the kind of its store
// and, on PostgreSQL, which replica it is and whether it schedules.
type Info struct {
	// Store is "sqlite" or "postgres".
	Store string `json:"store"`
	// Replica is the daemon's id: host and pid.
	Replica string `json:"replica"`
	// Role is "active" (it schedules and delivers), "standby" (another
	// daemon on the same database does) or "starting".
	Role string `json:"role"`
}

// info serves GET /v1/daemon. A standby answers it too (the gate lets it
// through), so vigil status can say so.
func (d *Daemon) info(w http.ResponseWriter, _ *http.Request) {
	role := "starting"
	switch {
	case d.standby.Load():
		role = "standby"
	case d.ready.Load():
		role = "active"
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(Info{Store: d.cfg.StoreKind(), Replica: d.replica, Role: role})
}

// registerReplicaMetrics adds to reg which daemon this is and whether it
// schedules: vigil_replica_info{replica,store} (always 1) and
// vigil_replica_active (1 when it schedules and delivers, 0 while it
// stands by or starts).
func (d *Daemon) registerReplicaMetrics(reg *prometheus.Registry) {
	info := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "vigil_replica_info",
		Help: "This daemon: its replica id (host:pid) and store kind; always 1."}, []string{"replica", "store"})
	info.WithLabelValues(d.replica, d.cfg.StoreKind()).Set(1)
	active := prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "vigil_replica_active",
		Help: "1 when this daemon schedules and delivers, 0 while it stands by (PostgreSQL) or starts."},
		func() float64 {
			if d.ready.Load() && !d.standby.Load() {
				return 1
			}
			return 0
		})
	reg.MustRegister(info, active)
}
