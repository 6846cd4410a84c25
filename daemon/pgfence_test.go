package daemon_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/vigil-run/vigil"
	"github.com/vigil-run/vigil/daemon"
	"github.com/vigil-run/vigil/internal/pgtest"
)

// TestPostgresRefusedSettlementArmedAgain: a settlement the fence refused
// (the lease had lapsed by the database's clock) makes the engine drop the
// watch; when the next heartbeat keeps the shard after all (here the lease
// is made fresh again before it, as a renewal that committed just as the
// lease lapsed would), the daemon arms the watch again instead of leaving
// it pending with nobody to settle it. A lease held as a session cannot
// come back so (its session ended, the next heartbeat renews nothing): the
// replica renews its lease as a row here, as on PostgreSQL 13.
func TestPostgresRefusedSettlementArmedAgain(t *testing.T) {
	t.Parallel()
	url := pgStore(t)
	cfg := testConfig(t.TempDir(), t.TempDir())
	cfg.Store, cfg.Lease, cfg.LeaseRenew = url, 3*time.Second, time.Second
	daemon.RenewLeasesAsRows(&cfg)
	d := start(t, cfg)
	if got := shardsOf(t, 64, newClient(t, d)); len(got[0]) != 64 {
		t.Fatalf("one replica holds %d shards, want 64", len(got[0]))
	}
	ctx := t.Context()
	w, err := newClient(t, d).Register(ctx, vigil.RegisterRequest{Kind: vigil.KindTimer, Predicate: json.RawMessage(`{"in": "1h"}`), Recipient: "r"})
	if err != nil {
		t.Fatal(err)
	}
	if !d.Scheduled(w.ID) {
		t.Fatal("the watch registered is not on the schedule")
	}
	// Older than the repair scan's window, so only the refusal can bring
	// it back.
	pgtest.Exec(t, url, `UPDATE watches SET inserted_at = now() - interval '1 hour' WHERE id = $1`, w.ID)

	pg := d.PostgresStore()
	pgtest.Exec(t, url, `UPDATE replicas SET lease_until = now() - interval '1 millisecond'`)
	now := time.Now()
	won, err := pg.WatchSettle(ctx, []vigil.WatchSettleParams{{ID: w.ID, State: vigil.StateFired, SettledAt: now,
		Outcome: &vigil.Outcome{State: vigil.StateFired}, Message: &vigil.Message{ID: "m-" + w.ID, Text: "fired", CreatedAt: now}}})
	pgtest.Exec(t, url, `UPDATE replicas SET lease_until = now() + interval '1 minute'`)
	if err != nil || won[0] {
		t.Fatalf("settling on a lapsed lease: won %v, %v; want refused", won, err)
	}
	d.Forget(w.ID) // what the engine does with a settlement that lost
	if d.Scheduled(w.ID) {
		t.Fatal("the watch is still on the schedule after Forget")
	}
	for deadline := time.Now().Add(30 * time.Second); !d.Scheduled(w.ID); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the watch a fenced settlement refused was never armed again, though this replica kept its shard")
		}
	}
	got, err := pg.WatchGet(ctx, w.ID)
	if err != nil || got.State != vigil.StatePending {
		t.Fatalf("the watch is %v (%v), want pending", got, err)
	}
}
