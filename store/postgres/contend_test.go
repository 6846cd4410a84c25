package postgres

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/vigil-run/vigil"
)

// TestBatchMovesOneStripe: a batch moves the total in one stripe, its
// first item's, and locks no other: with another transaction holding the
// stripe of a later item, the batch commits without waiting for it. A
// batch (or a group of registrations) that moved each item's own stripe
// locked most of the 64 for a group of thirty, so that the groups of
// several replicas waited on each other's commits.
func TestBatchMovesOneStripe(t *testing.T) {
	s := internalStore(t, 4)
	ctx := context.Background()
	var ps []vigil.WatchCreateParams
	for n := 1; len(ps) < 8; n++ {
		w := benchWatch(int64(n))
		w.ID, w.Recipient = fmt.Sprintf("stripe%04d", n), fmt.Sprintf("stripe-r%d", n)
		w.Identity = vigil.Identity(w.Recipient, w.Kind, w.Mode, w.Predicate)
		if len(ps) > 0 && stripe(w.ID) == stripe(ps[0].Watch.ID) {
			continue
		}
		ps = append(ps, vigil.WatchCreateParams{Watch: w, MaxActive: 1000, MaxActivePerRecipient: 1000})
	}
	held := stripe(ps[len(ps)-1].Watch.ID)
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, `SELECT FROM totals WHERE stripe = $1 FOR UPDATE`, held); err != nil {
		t.Fatal(err)
	}
	type answer struct {
		res []vigil.WatchCreateResult
		err error
	}
	done := make(chan answer, 1)
	go func() {
		res, err := s.WatchCreateMany(ctx, ps)
		done <- answer{res, err}
	}()
	var got answer
	waitFor(t, "the batch to commit or to wait on a lock", func() bool {
		select {
		case got = <-done:
			return true
		default:
		}
		var n int
		// Waiting on this transaction (other tests may run beside).
		if err := tx.QueryRow(ctx, `SELECT count(*) FROM pg_locks WHERE NOT granted AND pg_backend_pid() = ANY(pg_blocking_pids(pid))`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n > 0 {
			t.Fatalf("the batch waits on a lock: stripe %d, its last item's, held by another transaction (its first item's is %d)", held, stripe(ps[0].Watch.ID))
		}
		return false
	})
	if got.err != nil {
		t.Fatal(got.err)
	}
	for i, r := range got.res {
		if r.Err != nil || r.Watch == nil || r.Watch.Existing {
			t.Fatalf("item %d: %+v", i, r)
		}
	}
	tx.Rollback(ctx)
	var total int64
	if err := s.pool.QueryRow(ctx, `SELECT sum(pending) FROM totals`).Scan(&total); err != nil {
		t.Fatal(err)
	}
	if total != int64(len(ps)) {
		t.Fatalf("the total holds %d, want %d", total, len(ps))
	}
}

// TestEventsAfterTheCommit: a registration's events are sent after its
// commit, in a transaction of their own (PostgreSQL commits the
// transactions that notify one at a time, WAL flush included, across
// every replica): events that cannot be sent are logged, and the
// registration, one or a batch, stands. Sent in the registration's own
// transaction, the failure rolled the registration back.
func TestEventsAfterTheCommit(t *testing.T) {
	u := benchSchema(t)
	var logged bytes.Buffer
	s, err := Open(context.Background(), u, &Options{Notify: true, Logger: slog.New(slog.NewTextHandler(&logged, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	s.channel = strings.Repeat("c", 100) // longer than a channel may be: pg_notify fails
	mk := func(n int64) vigil.WatchCreateParams {
		w := benchWatch(n)
		w.Recipient = fmt.Sprintf("after-%d", n)
		w.Identity = vigil.Identity(w.Recipient, w.Kind, w.Mode, w.Predicate)
		return vigil.WatchCreateParams{Watch: w, MaxActive: 1000, MaxActivePerRecipient: 1000}
	}
	one, err := s.WatchCreate(ctx, mk(1))
	if err != nil {
		t.Fatalf("a registration whose event could not be sent: %v", err)
	}
	res, err := s.WatchCreateMany(ctx, []vigil.WatchCreateParams{mk(2), mk(3)})
	if err != nil {
		t.Fatalf("a batch whose events could not be sent: %v", err)
	}
	ids := []string{one.ID}
	for i, r := range res {
		if r.Err != nil {
			t.Fatalf("batch item %d: %v", i, r.Err)
		}
		ids = append(ids, r.Watch.ID)
	}
	for _, id := range ids {
		if _, err := s.WatchGet(ctx, id); err != nil {
			t.Fatalf("watch %s: %v", id, err)
		}
	}
	if n := strings.Count(logged.String(), "events of a committed registration not sent"); n != 2 {
		t.Fatalf("logged the events not sent %d times, want 2:\n%s", n, logged.String())
	}
}
