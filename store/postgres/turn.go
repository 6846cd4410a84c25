package postgres

import (
	"context"
	"errors"
	"hash/fnv"
	"log/slog"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
)

// Bounds of the resume turns (Turn).
const (
	// turnPollMin is the first wait of a resume whose session's turn
	// another daemon holds, doubled after each try up to turnPollMax: a
	// turn lasts seconds to minutes, so a second of delay is nothing,
	// and each try is one short statement.
	turnPollMin = 50 * time.Millisecond
	turnPollMax = time.Second
	// turnStatement bounds one statement on the turns' connection; one
	// that outlasts it has its connection closed (which gives up every
	// turn taken on it: see turns.drop).
	turnStatement = 10 * time.Second
	// turnAppName is the application_name of the turns' connection
	// (pg_stat_activity), after the URL's own application_name if it
	// sets one.
	turnAppName = "vigil resume turns"
)

// errTurnsClosed is Turn's error once the store is closed.
var errTurnsClosed = errors.New("postgres: the store is closed: no resume turn can be taken")

// turns holds the resume turns this store has taken: PostgreSQL session
// advisory locks, all on one connection of their own outside the pools,
// so that a turn held for the minutes an agent's turn lasts holds no
// pooled connection, and a daemon that dies (its connection with it)
// gives its turns up at once. A resume that waits holds no connection
// either: it tries (pg_try_advisory_lock, one short statement on that
// connection) and sleeps between tries.
type turns struct {
	cfg *pgx.ConnConfig
	log *slog.Logger
	// prefix starts the text a session key is hashed with: per schema,
	// as the store's other advisory keys.
	prefix string

	mu     sync.Mutex
	conn   *pgx.Conn
	closed bool
	// held counts the locks taken by key (a session-level advisory lock
	// is taken again by the session that holds it, and given up as many
	// times): to give each up, and to take them again on a new
	// connection when the old one was lost.
	held map[int64]int
}

func (t *turns) init(cfg *pgx.ConnConfig, log *slog.Logger, schema string) {
	t.cfg = cfg.Copy()
	if t.cfg.RuntimeParams == nil {
		t.cfg.RuntimeParams = map[string]string{}
	}
	name := turnAppName
	if own := t.cfg.RuntimeParams["application_name"]; own != "" {
		name = own + " resume turns"
	}
	t.cfg.RuntimeParams["application_name"] = name
	t.log = log
	t.prefix = "vigil resume " + schema + "\x00"
	t.held = map[int64]int{}
}

// turnKey is the advisory lock key of a session key.
func (t *turns) turnKey(key string) int64 {
	h := fnv.New64a()
	h.Write([]byte(t.prefix))
	h.Write([]byte(key))
	return int64(h.Sum64())
}

// Turn waits until this store holds the turn that key names among all
// the stores on the same database and schema (the replicas), and returns
// what gives it up; ctx's error when ctx ends first. waiting, when set,
// is called once when the turn is found held elsewhere (or cannot be
// asked for) and Turn starts waiting.
//
// The turn is a session advisory lock on a connection of the store's
// own: the daemon that holds it gives it up when the turn ends, or when
// that connection ends (the daemon died, or was cut off), and another
// takes it within turnPollMax. Two holders of one store (turns of
// different keys whose hashes meet) both hold it: the key is 64 bits,
// and the caller (deliver/command) lets one turn of a key at a time
// through in its own process.
func (s *Store) Turn(ctx context.Context, key string, waiting func()) (func(), error) {
	t := &s.turns
	k := t.turnKey(key)
	wait := turnPollMin
	said := false
	for {
		ok, err := t.try(ctx, k)
		switch {
		case ok:
			var once sync.Once
			return func() { once.Do(func() { t.release(k) }) }, nil
		case errors.Is(err, errTurnsClosed):
			return nil, err
		case err != nil && !said:
			t.log.Warn("cannot ask the database for a resume turn; trying again", "err", err)
		}
		if !said {
			said = true
			if waiting != nil {
				waiting()
			}
		}
		timer := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			timer.Stop()
			return nil, ctx.Err()
		case <-timer.C:
		}
		wait = min(2*wait, turnPollMax)
	}
}

// try takes k if no other session holds it, in one statement. It runs
// apart from ctx (checked before): a statement cut off by a context could
// have taken the lock with nobody knowing; one that fails or outlasts
// turnStatement closes the connection, which gives it up.
func (t *turns) try(ctx context.Context, k int64) (bool, error) {
	if err := ctx.Err(); err != nil {
		return false, err
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	c, err := t.connect()
	if err != nil {
		return false, err
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), turnStatement)
	defer cancel()
	var ok bool
	if err := c.QueryRow(sctx, `SELECT pg_try_advisory_lock($1)`, k).Scan(&ok); err != nil {
		t.drop()
		return false, wrap("take a resume turn", err)
	}
	if ok {
		t.held[k]++
	}
	return ok, nil
}

// release gives k up. When that fails the connection is closed, which
// gives up every turn on it: a turn left held on a live connection
// would keep its session from every other daemon for good. The other
// turns held here are taken again on the next connection (connect).
func (t *turns) release(k int64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.held[k]--; t.held[k] <= 0 {
		delete(t.held, k)
	}
	if t.conn == nil || t.conn.IsClosed() {
		// Lost with its connection: nothing to give up.
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), turnStatement)
	defer cancel()
	if _, err := t.conn.Exec(ctx, `SELECT pg_advisory_unlock($1)`, k); err != nil {
		t.log.Warn("cannot give a resume turn up: closing its connection, which does", "err", err)
		t.drop()
		if len(t.held) > 0 {
			// Take the turns still running again at once.
			_, _ = t.connect()
		}
	}
}

// connect returns the turns' connection, opening it when there is none
// (first use, or the last was lost). A new connection takes again the
// turns still held here: their locks ended with the connection before,
// and another daemon may have taken one meanwhile, which is logged (its
// session may run two turns at once until this one ends). t.mu is held.
func (t *turns) connect() (*pgx.Conn, error) {
	if t.closed {
		return nil, errTurnsClosed
	}
	if t.conn != nil && !t.conn.IsClosed() {
		return t.conn, nil
	}
	t.drop()
	ctx, cancel := context.WithTimeout(context.Background(), turnStatement)
	defer cancel()
	c, err := pgx.ConnectConfig(ctx, t.cfg)
	if err != nil {
		return nil, wrap("connect for resume turns", err)
	}
	lost := 0
	for k, n := range t.held {
		for range n {
			var ok bool
			if err := c.QueryRow(ctx, `SELECT pg_try_advisory_lock($1)`, k).Scan(&ok); err != nil {
				_ = c.Close(ctx)
				return nil, wrap("take the resume turns held here again", err)
			}
			if !ok {
				lost++
				break
			}
		}
	}
	if lost > 0 {
		t.log.Warn("the connection of the resume turns was lost while turns ran, and another daemon took some of them: their sessions may run two turns at once until these end", "turns", lost)
	}
	t.conn = c
	return c, nil
}

// drop closes the connection, if any; the server gives up its locks.
// t.mu is held.
func (t *turns) drop() {
	if t.conn == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_ = t.conn.Close(ctx)
	t.conn = nil
}

// close closes the connection, giving up every turn, and refuses any
// taken after.
func (t *turns) close() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.closed = true
	t.drop()
}
