package postgres

import (
	"context"
	"log/slog"
	"sync"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// A pool keeps its connections open (Open: MinConns), and pgxpool pings
// one before handing it out only when it has been idle for over a second.
// When the database restarts or fails over, or an administrator ends the
// sessions, every connection of the pool is dead, but the pool learns it
// one statement at a time: each connection used in the last second fails
// the next statement given to it, so a busy replica answered as many
// requests "unavailable" (and failed as many settlements and probes) as
// its pool holds connections. So, as Npgsql clears its pool on the same
// errors, the first statement that meets the server's word that it ended
// its session for a reason that ends them all (endsAll) resets the pool:
// its idle connections are closed at once and those in use when they come
// back, and the next statements open new ones.

// resetter resets one pool when the server ends one of its connections
// for a reason that ends them all. Its hooks go on the pool's Config
// (hook) before the pool is made; set pool once it is.
type resetter struct {
	name string // which pool, for the log
	log  *slog.Logger

	mu   sync.Mutex
	pool *pgxpool.Pool
	// gen counts the resets; born holds, for each live connection of the
	// pool, gen when it connected: a connection born before the last
	// reset is one that reset already let go of, and its failure asks for
	// no other.
	gen  uint64
	born map[*pgconn.PgConn]uint64
}

// hook sets cfg's callbacks: AfterConnect and BeforeClose to know the
// pool's connections, and the connections' OnPgError to hear the
// server's word. A connection made from a copy of cfg.ConnConfig outside
// the pool (the listener's, a lease session) calls the same OnPgError but
// is none of the pool's, and resets nothing.
func (r *resetter) hook(cfg *pgxpool.Config) {
	r.born = make(map[*pgconn.PgConn]uint64)
	after := cfg.AfterConnect
	cfg.AfterConnect = func(ctx context.Context, c *pgx.Conn) error {
		if after != nil {
			if err := after(ctx, c); err != nil {
				return err
			}
		}
		r.mu.Lock()
		r.born[c.PgConn()] = r.gen
		r.mu.Unlock()
		return nil
	}
	before := cfg.BeforeClose
	cfg.BeforeClose = func(c *pgx.Conn) {
		if before != nil {
			before(c)
		}
		r.mu.Lock()
		delete(r.born, c.PgConn())
		r.mu.Unlock()
	}
	onErr := cfg.ConnConfig.OnPgError
	cfg.ConnConfig.OnPgError = func(c *pgconn.PgConn, e *pgconn.PgError) bool {
		if endsAll(e) {
			r.ended(c, e)
		}
		if onErr != nil {
			return onErr(c, e)
		}
		// pgconn's own default: a FATAL error ends the connection.
		return e.Severity != "FATAL"
	}
}

// endsAll reports whether e is the server ending a session for a reason
// that ends every session of the pool: it is shutting down or restarting
// (a fast or smart shutdown, and pg_terminate_backend: admin_shutdown), or
// recovering from another backend's crash (crash_shutdown).
func endsAll(e *pgconn.PgError) bool {
	return e.Code == "57P01" || e.Code == "57P02"
}

// ended resets the pool unless c is a connection the last reset already
// let go of, or none of the pool's.
func (r *resetter) ended(c *pgconn.PgConn, e *pgconn.PgError) {
	r.mu.Lock()
	g, ok := r.born[c]
	pool := r.pool
	if !ok || g != r.gen || pool == nil {
		r.mu.Unlock()
		return
	}
	r.gen++
	r.mu.Unlock()
	r.log.Warn("the database ended a connection of the pool; closing the others, which it ended too, and opening new ones as needed",
		"pool", r.name, "code", e.Code, "err", e.Message)
	pool.Reset()
}

// set gives r the pool its hooks are on.
func (r *resetter) set(p *pgxpool.Pool) {
	r.mu.Lock()
	r.pool = p
	r.mu.Unlock()
}
