package postgres

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/vigil-run/vigil"
	"github.com/vigil-run/vigil/internal/pgtest"
)

// TestPoolStaysOpen: the pool opens its connections when the store opens
// and keeps them, so that a burst does not first start a backend for each;
// pool_min_conns in the URL still says otherwise.
func TestPoolStaysOpen(t *testing.T) {
	u := pgtest.Schema(t, "vigil_pool")
	s, err := Open(t.Context(), u, &Options{MaxConns: 3})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if got := s.pool.Config().MinConns; got != 3 {
		t.Fatalf("MinConns = %d, want the pool's size, 3", got)
	}
	// pgxpool opens them in the background.
	for deadline := time.Now().Add(10 * time.Second); s.pool.Stat().TotalConns() < 3; {
		if time.Now().After(deadline) {
			t.Fatalf("the pool holds %d connections 10 s after the store opened, want 3", s.pool.Stat().TotalConns())
		}
		time.Sleep(10 * time.Millisecond)
	}

	sep := "?"
	if strings.Contains(u, "?") {
		sep = "&"
	}
	s2, err := Open(t.Context(), u+sep+"pool_min_conns=1", &Options{MaxConns: 3})
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	if got := s2.pool.Config().MinConns; got != 1 {
		t.Errorf("with pool_min_conns=1 in the URL, MinConns = %d, want 1", got)
	}
}

// TestPoolResetWhenTheServerEndsItsConnections: when the database ends
// the pool's sessions (a restart, a failover, pg_terminate_backend), the
// first statement to meet that resets the pool, so that the connections
// it ended are not handed out again one failed statement at a time; the
// others' failures that follow ask for no second reset.
func TestPoolResetWhenTheServerEndsItsConnections(t *testing.T) {
	u := pgtest.Schema(t, "vigil_reset")
	ctx := t.Context()
	s, err := Open(ctx, u, &Options{MaxConns: 3})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	// All three in use, as on a busy replica: none idle long enough for
	// pgxpool to ping it before handing it out.
	var conns []*pgxpool.Conn
	for range 3 {
		c, err := s.pool.Acquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
	}
	defer func() {
		// Before s.Close, which waits for every connection in use to
		// come back (Release is safe to call again).
		for _, c := range conns {
			c.Release()
		}
	}()
	for _, c := range conns {
		pgtest.Exec(t, u, `SELECT pg_terminate_backend($1, 5000)`, c.Conn().PgConn().PID())
	}
	_, err = conns[0].Exec(ctx, `SELECT 1`)
	var pe *pgconn.PgError
	if !errors.As(err, &pe) || pe.Code != "57P01" {
		t.Fatalf("a statement on a connection the server ended: %v, want admin_shutdown (57P01)", err)
	}
	if _, err := conns[1].Exec(ctx, `SELECT 1`); err == nil {
		t.Fatal("a second connection the server ended answered")
	}
	s.resets.mu.Lock()
	resets := s.resets.gen
	s.resets.mu.Unlock()
	if resets != 1 {
		t.Errorf("%d resets after two statements met connections the server ended, want 1", resets)
	}
	for _, c := range conns {
		c.Release()
	}

	// No connection the server ended is handed out again: every idle
	// connection (AcquireAllIdle pings none) answers.
	for _, c := range s.pool.AcquireAllIdle(ctx) {
		if _, err := c.Exec(ctx, `SELECT 1`); err != nil {
			t.Errorf("an idle connection of the pool after the reset: %v", err)
		}
		c.Release()
	}
	for i := range 3 {
		if _, err := s.WatchGet(ctx, "01KNOSUCHWATCH0000000000000"); vigil.ErrorCode(err) != vigil.CodeNotFound {
			t.Fatalf("read %d after the reset: %v, want not found", i+1, err)
		}
	}
}
