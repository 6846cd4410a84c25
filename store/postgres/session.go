package postgres

import (
	"context"
	"errors"
	"hash/fnv"
	"strconv"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/vigil-run/vigil"
)

// A replica's lease is its database session (schema 13): on a server with
// idle_session_timeout (PostgreSQL 14 and later) each replica holds a
// session-level advisory lock, keyed by its id and the schema, on a
// connection of its own whose idle_session_timeout is the lease. The lease
// holds while that session lives: the server ends it when the replica's
// process ends (it reads the closed socket at once) and when it has sat
// idle for a lease (a replica frozen or cut off), and the lock goes with
// it. Its heartbeat runs on that session every few seconds, which keeps it
// from going idle, and writes nothing in the steady state: a renewal is
// the session staying alive, not a row rewritten. The other replicas read
// who holds a lock from pg_locks; a fenced write asks the lock itself
// (fenceSQL). A replica whose session ended takes a new one at its next
// heartbeat, which then renews nothing of what it held (a lapse): another
// replica may have taken it meanwhile.

// sessionMinVersion is the first server version with idle_session_timeout.
const sessionMinVersion = 140000

// lockTimeout bounds how long a new session waits for its replica's lock:
// a fenced write that found the previous session gone holds the lock
// shared for the rest of its transaction (milliseconds), and the session
// of a process that just died is ended by the server as soon as it reads
// the closed socket; a lock still held past it is another live process's,
// under the same replica id.
const lockTimeout = 2 * time.Second

// ErrReplicaTaken is the error of a heartbeat whose replica's lease is
// held by another session: another live process runs under the same
// replica id (or one that stopped answering has yet to lose its session,
// within a lease).
var ErrReplicaTaken = &vigil.Error{Code: vigil.CodeUnavailable,
	Message: "another live process holds this replica id's lease: give each replica an id of its own (replica_id)"}

// sessions holds the lease session of each replica this store heartbeats
// for (a daemon: one).
type sessions struct {
	mu sync.Mutex
	m  map[string]*session
}

// session is one replica's lease session.
type session struct {
	// mu runs one statement at a time on conn.
	mu   sync.Mutex
	key  int64
	conn *pgx.Conn
	// fresh is set while no heartbeat has succeeded on conn.
	fresh bool
	// last is what a quick heartbeat on conn answers from (nil: the next
	// heartbeat is a full one).
	last *quickState
}

// get returns replica's session, made (without a connection) if needed.
func (ss *sessions) get(replica string, key int64) *session {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if ss.m == nil {
		ss.m = map[string]*session{}
	}
	se := ss.m[replica]
	if se == nil {
		se = &session{key: key}
		ss.m[replica] = se
	}
	return se
}

// end closes replica's session (its lock goes with it), if it has one.
func (ss *sessions) end(replica string) {
	ss.mu.Lock()
	se := ss.m[replica]
	delete(ss.m, replica)
	ss.mu.Unlock()
	if se != nil {
		se.mu.Lock()
		se.close()
		se.mu.Unlock()
	}
}

// endAll closes every session.
func (ss *sessions) endAll() {
	ss.mu.Lock()
	all := ss.m
	ss.m = nil
	ss.mu.Unlock()
	for _, se := range all {
		se.mu.Lock()
		se.close()
		se.mu.Unlock()
	}
}

// close closes se's connection; se.mu is held.
func (se *session) close() {
	if se.conn != nil {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		se.conn.Close(ctx)
		cancel()
		se.conn = nil
	}
	se.last = nil
}

// sessionKey is the key of replica's lease lock in this store's schema.
func (s *Store) sessionKey(replica string) int64 {
	h := fnv.New64a()
	h.Write([]byte("vigil replica lease " + s.schema + "\x00" + replica))
	return int64(h.Sum64())
}

// SessionLeases reports whether this store holds replicas' leases as
// database sessions (schema 13, a server with idle_session_timeout, and
// Options.RenewedLeases not set); otherwise each renewal rewrites the
// replica's row, as before.
func (s *Store) SessionLeases() bool { return s.sessionLeases }

// onSession runs fn on replica's lease session (se.conn, its lock held;
// se.fresh while no heartbeat has succeeded on it), opened first when it
// has none (a new connection whose idle_session_timeout is lease, which
// takes the replica's lock; ErrReplicaTaken when another session holds
// it). A failure that may
// have left the connection unusable (anything but an error the server
// answered) closes it: the lock goes with it, and the next call opens a
// new one.
func (s *Store) onSession(ctx context.Context, replica string, lease time.Duration, fn func(se *session) error) error {
	se := s.sessions.get(replica, s.sessionKey(replica))
	se.mu.Lock()
	defer se.mu.Unlock()
	for try := 0; ; try++ {
		if se.conn != nil && se.conn.IsClosed() {
			se.conn = nil
		}
		if se.conn == nil {
			if err := s.openSession(ctx, se, lease); err != nil {
				return err
			}
		}
		err := fn(se)
		if err == nil {
			se.fresh = false
			return nil
		}
		pe := (*pgconn.PgError)(nil)
		if errors.As(err, &pe) && pe.Severity != "FATAL" && !se.conn.IsClosed() {
			return err
		}
		se.close()
		// The server ended the session before the statement ran (it
		// answers so once it has ended one idle past its timeout, or
		// at an administrator's command): the lease lapsed then, and a
		// new session says so at once rather than a step later.
		if pe == nil || pe.Severity != "FATAL" || try > 0 {
			return err
		}
	}
}

// openSession connects se and takes its lock.
func (s *Store) openSession(ctx context.Context, se *session, lease time.Duration) error {
	cfg := s.leasePool.Config().ConnConfig.Copy()
	cfg.RuntimeParams["idle_session_timeout"] = strconv.FormatInt(max(1, lease.Milliseconds()), 10)
	// Named in pg_stat_activity: "vigil lease", after the URL's own
	// application_name if it sets one.
	name := "vigil lease"
	if own := cfg.RuntimeParams["application_name"]; own != "" {
		name = own + " lease"
	}
	cfg.RuntimeParams["application_name"] = name
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return wrap("open the lease session", err)
	}
	err = pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT set_config('lock_timeout', $1, true)`, strconv.FormatInt(lockTimeout.Milliseconds(), 10)); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `SELECT pg_advisory_lock($1)`, se.key)
		return err
	})
	if err != nil {
		cctx, cancel := context.WithTimeout(context.Background(), time.Second)
		conn.Close(cctx)
		cancel()
		if pe := (*pgconn.PgError)(nil); errors.As(err, &pe) && pe.Code == "55P03" {
			return ErrReplicaTaken
		}
		return wrap("take the replica's lease lock", err)
	}
	se.conn, se.fresh = conn, true
	return nil
}

// locksSQL is a CTE naming the keys of the advisory locks held in this
// database (bigint keys: objsubid 1, the key's halves in classid and
// objid): the replicas whose lease sessions live.
const locksSQL = `locks AS (
		SELECT (classid::bigint << 32) | objid::bigint AS key FROM pg_locks
		WHERE locktype = 'advisory' AND objsubid = 1 AND granted
			AND database = (SELECT oid FROM pg_database WHERE datname = current_database()))`

// untilSQL is when the lease of the holder of lease row x, replicas row
// r (NULL when nobody holds it, or its holder's row is gone), lapses, for
// statements with locksSQL and the lease as LEASE: a holder whose session
// lives holds a lease from now; one whose session ended lapsed when a
// replica noticed (lost_at; now, if nobody has yet) or at its lease_until,
// whichever is later; a holder of an older build at its lease_until, or
// its shards' lease_expiry rows before schema 6.
func untilSQL(lease string) string {
	return `CASE WHEN r.lock_key IN (SELECT key FROM locks) THEN now() + ` + lease + `
			WHEN r.lock_key IS NOT NULL THEN greatest(r.lease_until, coalesce(r.lost_at, now()))
			ELSE coalesce(r.lease_until, x.expires_at) END`
}
