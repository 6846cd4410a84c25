package postgres_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/vigil-run/vigil/store/postgres"
)

// TestIdleTxTimeoutFreesLocks: a session left idle inside a transaction
// (a replica frozen or cut off mid-write) for Options.IdleTxTimeout is
// ended by the server, its transaction rolled back and its row locks
// released: a write of another replica waiting on one of them goes on,
// and the frozen one's transaction fails when it resumes.
func TestIdleTxTimeoutFreesLocks(t *testing.T) {
	u := newSchema(t)
	a := openWith(t, u, &postgres.Options{MaxConns: 2, Replica: "a", IdleTxTimeout: 200 * time.Millisecond})
	b := openWith(t, u, &postgres.Options{MaxConns: 2, Replica: "b"})
	t.Cleanup(func() { a.Close(); b.Close() })
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute) // a failure guard only
	defer cancel()
	tx, err := a.Pool().Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(context.Background())
	if _, err := tx.Exec(ctx, `SELECT shard FROM leases WHERE shard = 5 FOR UPDATE`); err != nil {
		t.Fatal(err)
	}
	// b's write waits on a's row lock until the server ends a's session.
	if _, err := b.Pool().Exec(ctx, `UPDATE leases SET owner = 'b' WHERE shard = 5`); err != nil {
		t.Fatalf("b's write waiting on the lock of a's idle transaction: %v", err)
	}
	if _, err := tx.Exec(ctx, `UPDATE leases SET owner = 'a' WHERE shard = 5`); err == nil {
		t.Fatal("a's transaction went on after the server ended its idle session")
	}
	var owner string
	if err := b.Pool().QueryRow(ctx, `SELECT owner FROM leases WHERE shard = 5`).Scan(&owner); err != nil || owner != "b" {
		t.Fatalf("shard 5's owner = %q, %v; want b", owner, err)
	}
}

// TestPingWithThePoolBusy: a replica whose every pooled connection is
// busy (under load, or held by writes waiting on locks) still answers its
// readiness ping, on the lease pool, within the ping's bound; a closed
// store does not.
func TestPingWithThePoolBusy(t *testing.T) {
	u := newSchema(t)
	s := openWith(t, u, &postgres.Options{MaxConns: 2, Replica: "a"})
	ctx := t.Context()
	var held []*pgxpool.Conn
	for range 2 {
		c, err := s.Pool().Acquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, c)
	}
	pctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	if err := s.Ping(pctx); err != nil {
		t.Fatalf("Ping with every pooled connection busy = %v, want nil", err)
	}
	for _, c := range held {
		c.Release()
	}
	if err := s.Ping(ctx); err != nil {
		t.Fatalf("Ping = %v, want nil", err)
	}
	s.Close()
	if err := s.Ping(ctx); err == nil {
		t.Fatal("Ping of a closed store = nil, want an error")
	}
}
