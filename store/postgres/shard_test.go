package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/vigil-run/vigil"
	"github.com/vigil-run/vigil/internal/pgtest"
	"github.com/vigil-run/vigil/store/postgres"
)

// TestShardOfMatchesDatabase: the shard the database computes for a row
// (watches.shard) is ShardOf of its id, for ids of every shape.
func TestShardOfMatchesDatabase(t *testing.T) {
	u := newSchema(t)
	s := open(t, u)
	defer s.Close()
	ctx := t.Context()
	ids := []string{"01ARZ3NDEKTSV4RRFFQ69G5FAV", "a", "é", "w-1", "Z"}
	for i := range 300 {
		ids = append(ids, fmt.Sprintf("w%05d", i))
	}
	for i, id := range ids {
		if _, err := s.WatchCreate(ctx, vigil.WatchCreateParams{Watch: timerWatch(id, "r", fmt.Sprintf(`{"n":%d}`, i))}); err != nil {
			t.Fatal(err)
		}
	}
	rows, err := s.Pool().Query(ctx, `SELECT id, shard FROM watches`)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[int]bool{}
	n := 0
	for rows.Next() {
		var id string
		var sh int16
		if err := rows.Scan(&id, &sh); err != nil {
			t.Fatal(err)
		}
		n++
		seen[int(sh)] = true
		if got := postgres.ShardOf(id); got != int(sh) {
			t.Errorf("ShardOf(%q) = %d, the database says %d", id, got, sh)
		}
	}
	if rows.Err() != nil || n != len(ids) {
		t.Fatalf("read %d rows (%v), want %d", n, rows.Err(), len(ids))
	}
	if len(seen) < 60 {
		t.Errorf("%d ids fall in %d shards of 64: the hash does not spread", len(ids), len(seen))
	}
}

// inShard returns a new timer watch whose id falls in shard sh.
func inShard(t *testing.T, sh int, tag string) *vigil.Watch {
	t.Helper()
	for i := range 100000 {
		id := fmt.Sprintf("%s-%d", tag, i)
		if postgres.ShardOf(id) == sh {
			return timerWatch(id, "r", fmt.Sprintf(`{"id":%q}`, id))
		}
	}
	t.Fatalf("no id in shard %d", sh)
	return nil
}

// TestFencing: a replica whose fence names a shard it no longer holds
// (another took it over at the next epoch, or its lease lapsed) can
// neither settle a watch of it, nor record an observation, nor write a
// receipt; the holder can, and the row says who settled it. The leases
// themselves: taken once, renewed only by their holder at their epoch
// before they lapse, released to the next taker.
func TestFencing(t *testing.T) {
	u, a, b := twoReplicas(t)
	ctx := t.Context()

	if lb, err := b.Acquire(ctx, "b", 64, time.Minute, 0); err != nil || len(lb) != 0 {
		t.Fatalf("b acquires %v, %v before its first heartbeat (no lease); want none", lb, err)
	}
	beat(t, a, "a", nil)
	beat(t, b, "b", nil)
	la, err := a.Acquire(ctx, "a", 64, time.Minute, 0)
	if err != nil || len(la) != 64 || la[0].Epoch != 1 {
		t.Fatalf("a acquires %v, %v; want all 64 shards at epoch 1", la, err)
	}
	if lb, err := b.Acquire(ctx, "b", 64, time.Minute, 0); err != nil || len(lb) != 0 {
		t.Fatalf("b acquires %v, %v while a holds every shard; want none", lb, err)
	}
	a.SetFence("a", la)
	w1, w2, w3 := inShard(t, 1, "one"), inShard(t, 2, "two"), inShard(t, 3, "three")
	for _, w := range []*vigil.Watch{w1, w2, w3} {
		if _, err := b.WatchCreate(ctx, vigil.WatchCreateParams{Watch: w}); err != nil {
			t.Fatal(err)
		}
	}

	// a releases shard 2 (its fence is left naming it, as a replica
	// frozen since would have it); b takes it at epoch 2.
	if err := a.Release(ctx, "a", []postgres.Lease{la[2]}); err != nil {
		t.Fatal(err)
	}
	lb, err := b.Acquire(ctx, "b", 64, time.Minute, 0)
	if err != nil || len(lb) != 1 || lb[0] != (postgres.Lease{Shard: 2, Epoch: 2}) {
		t.Fatalf("b acquires %v, %v; want shard 2 at epoch 2", lb, err)
	}
	b.SetFence("b", lb)
	now := time.Now()
	settle := func(s *postgres.Store, w *vigil.Watch) bool {
		t.Helper()
		won, err := s.WatchSettle(ctx, []vigil.WatchSettleParams{{ID: w.ID, State: vigil.StateFired, SettledAt: now,
			Outcome: &vigil.Outcome{State: vigil.StateFired}, Message: &vigil.Message{ID: "m-" + w.ID, Text: "fired", CreatedAt: now}}})
		if err != nil {
			t.Fatal(err)
		}
		return won[0]
	}
	if settle(a, w2) {
		t.Fatal("a settled a watch of the shard it released")
	}
	if won, err := a.WatchObserve(ctx, vigil.WatchObserveParams{ID: w2.ID, Polls: 1, Observation: &vigil.Observation{At: now}}); err != nil || won {
		t.Fatalf("a's observation of a watch of the shard it released: %v, %v; want not written", won, err)
	}
	receipt := vigil.ReceiptUpsertParams{ReceiptRecord: vigil.ReceiptRecord{WatchID: w2.ID, MessageID: "m",
		Receipt: vigil.Receipt{Channel: "webhook", Status: vigil.ReceiptSending, Attempts: 1, UpdatedAt: now}}}
	if err := a.ReceiptUpsert(ctx, receipt); !errors.Is(err, postgres.ErrFenced) {
		t.Fatalf("a's receipt of a watch of the shard it released: %v, want ErrFenced", err)
	}
	if err := b.ReceiptUpsert(ctx, receipt); err != nil {
		t.Fatalf("the holder's receipt: %v", err)
	}
	if !settle(b, w2) {
		t.Fatal("the holder could not settle its watch")
	}
	// A watch of a shard held by neither fence: not won by b, which
	// does not hold it, whatever the database says.
	if settle(b, w3) {
		t.Fatal("b settled a watch of a shard it does not hold")
	}

	// a renews: every shard but the one it released.
	if p := beat(t, a, "a", la); len(p.Renewed) != 63 || slices.ContainsFunc(p.Renewed, func(l postgres.Lease) bool { return l.Shard == 2 }) {
		t.Fatalf("a renews %d leases; want the 63 it still holds", len(p.Renewed))
	}
	// a's lease lapses (by the database's clock): a can no longer settle
	// a watch of any shard it held, nor renew them.
	pgtest.Lapse(t, u, "a", time.Second)
	if settle(a, w1) {
		t.Fatal("a settled a watch of a shard whose lease lapsed")
	}
	if p := beat(t, a, "a", la); len(p.Renewed) != 0 || p.Freed != 63 {
		t.Fatalf("a's heartbeat after its lease lapsed renews %d and frees %d; want none renewed, its 63 freed", len(p.Renewed), p.Freed)
	}
	// Taken over after the lapse, at the next epoch.
	lb2, err := b.Acquire(ctx, "b", 64, time.Minute, 0)
	if err != nil || len(lb2) != 63 || !slices.Contains(lb2, postgres.Lease{Shard: 1, Epoch: 2}) {
		t.Fatalf("b acquires %v, %v; want the 63 a held, shard 1 at epoch 2", lb2, err)
	}
	b.SetFence("b", append(lb, lb2...))
	if !settle(b, w1) {
		t.Fatal("b could not settle the watch of the shard it took over")
	}
	var by1, by2 string
	if err := a.Pool().QueryRow(ctx, `SELECT (SELECT settled_by FROM watches WHERE id = $1), (SELECT settled_by FROM watches WHERE id = $2)`,
		w1.ID, w2.ID).Scan(&by1, &by2); err != nil || by1 != "b" || by2 != "b" {
		t.Fatalf("settled_by = %q, %q (%v); want b, b", by1, by2, err)
	}
	var msgs int
	if err := a.Pool().QueryRow(ctx, `SELECT count(*) FROM messages`).Scan(&msgs); err != nil || msgs != 2 {
		t.Fatalf("%d messages (%v), want 2: one per settled watch", msgs, err)
	}
}

// TestFenceHoldsTakeover: a fenced write holds a share lock on its lease
// rows until it ends, so a takeover of a lease that lapses meanwhile waits
// for it (the taker skips the row) and the write that passed the fence
// commits before anyone else can hold the shard; the holder's renewal does
// not wait for it.
func TestFenceHoldsTakeover(t *testing.T) {
	_, a, b := twoReplicas(t)
	ctx := t.Context()
	beat(t, a, "a", nil)
	beat(t, b, "b", nil)
	la, err := a.Acquire(ctx, "a", 64, time.Minute, 0)
	if err != nil {
		t.Fatal(err)
	}
	// What a fenced write does first, held open.
	tx, err := a.Pool().Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(context.Background())
	if _, err := tx.Exec(ctx, `SELECT shard FROM leases WHERE shard = 5 AND owner = 'a' FOR SHARE`); err != nil {
		t.Fatal(err)
	}
	// The holder renews meanwhile: a renewal does not wait for the
	// fenced writes.
	if p := beat(t, a, "a", la); len(p.Renewed) != 64 {
		t.Fatalf("a renews %d leases while its write holds one; want 64", len(p.Renewed))
	}
	// As if every lease had lapsed (lapsedFor negative: lapsed by two
	// hours from now), b takes all it can: every shard but the one a's
	// write holds.
	got, err := b.Acquire(ctx, "b", 64, time.Minute, -2*time.Hour)
	if err != nil || len(got) != 63 || slices.ContainsFunc(got, func(l postgres.Lease) bool { return l.Shard == 5 }) {
		t.Fatalf("b acquires %d shards (%v) while a's write holds shard 5; want the other 63", len(got), err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	got, err = b.Acquire(ctx, "b", 64, time.Minute, -2*time.Hour)
	if err != nil || !slices.Contains(got, postgres.Lease{Shard: 5, Epoch: 2}) {
		t.Fatalf("b acquires %v, %v once a's write ended; want shard 5", got, err)
	}
	if p := beat(t, a, "a", la[5:6]); len(p.Renewed) != 0 {
		t.Fatalf("a renews %v after b took shard 5; want nothing", p.Renewed)
	}
}

// TestFenceLapsedLease: a replica holds all its shards on its one lease
// (its row's lease_until): once that lapses by the database's clock it can
// neither settle, nor observe, nor write a receipt for a watch of any of
// them, though nobody took them over (the holder and epoch are still its
// own); its renewal then renews none of them and frees them all, and a
// fresh lease does not bring them back.
func TestFenceLapsedLease(t *testing.T) {
	u, a, la := holding(t, 64)
	ctx := t.Context()
	a.SetFence("a", la)
	w1, w2 := inShard(t, 1, "one"), inShard(t, 2, "two")
	for _, w := range []*vigil.Watch{w1, w2} {
		if _, err := a.WatchCreate(ctx, vigil.WatchCreateParams{Watch: w}); err != nil {
			t.Fatal(err)
		}
	}
	now := time.Now()
	settle := func(w *vigil.Watch) bool {
		t.Helper()
		won, err := a.WatchSettle(ctx, []vigil.WatchSettleParams{{ID: w.ID, State: vigil.StateFired, SettledAt: now,
			Outcome: &vigil.Outcome{State: vigil.StateFired}, Message: &vigil.Message{ID: "m-" + w.ID, Text: "fired", CreatedAt: now}}})
		if err != nil {
			t.Fatal(err)
		}
		return won[0]
	}
	if !settle(w1) {
		t.Fatal("the holder could not settle on its lease")
	}
	pgtest.Lapse(t, u, "a", time.Millisecond)
	if settle(w2) {
		t.Fatal("a settled a watch on a lease that lapsed")
	}
	if won, err := a.WatchObserve(ctx, vigil.WatchObserveParams{ID: w2.ID, Polls: 1, Observation: &vigil.Observation{At: now}}); err != nil || won {
		t.Fatalf("an observation on a lease that lapsed: %v, %v; want not written", won, err)
	}
	receipt := vigil.ReceiptUpsertParams{ReceiptRecord: vigil.ReceiptRecord{WatchID: w2.ID, MessageID: "m",
		Receipt: vigil.Receipt{Channel: "webhook", Status: vigil.ReceiptSending, Attempts: 1, UpdatedAt: now}}}
	if err := a.ReceiptUpsert(ctx, receipt); !errors.Is(err, postgres.ErrFenced) {
		t.Fatalf("a receipt on a lease that lapsed: %v, want ErrFenced", err)
	}
	p := beat(t, a, "a", la)
	if len(p.Renewed) != 0 || p.Freed != 64 || p.Free != 64 {
		t.Fatalf("the heartbeat after the lapse renews %d, frees %d, counts %d free; want 0, 64, 64", len(p.Renewed), p.Freed, p.Free)
	}
	// The lease is fresh again, but the shards are nobody's: the fence
	// (still naming them at their epochs) passes nothing.
	if settle(w2) {
		t.Fatal("a settled a watch of a shard its lapsed lease had held")
	}
	var state string
	if err := a.Pool().QueryRow(ctx, `SELECT state FROM watches WHERE id = $1`, w2.ID).Scan(&state); err != nil || state != "pending" {
		t.Fatalf("w2 is %q (%v), want pending", state, err)
	}
}

// TestHeartbeatWritesOneRow: with its lease renewed as a row (a server
// before PostgreSQL 14, or Options.RenewedLeases), in the steady state a
// renewal writes one row, the replica's own (counted by the rows whose
// xmin is the heartbeat's transaction), whatever the number of shards it
// holds; while a replica of an older build (no lease_until) is live it
// also renews its shards' lease_expiry rows, which that replica reads.
func TestHeartbeatWritesOneRow(t *testing.T) {
	u, a, la := holdingWith(t, 21, &postgres.Options{MaxConns: 4, Replica: "a", RenewedLeases: true})
	ctx := t.Context()
	written := func() int {
		t.Helper()
		var n int
		if err := a.Pool().QueryRow(ctx, `WITH hb AS (SELECT xmin FROM replicas WHERE id = 'a')
			SELECT (SELECT count(*) FROM replicas, hb WHERE replicas.xmin = hb.xmin)
				+ (SELECT count(*) FROM leases, hb WHERE leases.xmin = hb.xmin)
				+ (SELECT count(*) FROM lease_expiry, hb WHERE lease_expiry.xmin = hb.xmin)
				+ (SELECT count(*) FROM watches, hb WHERE watches.xmin = hb.xmin)`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	for range 3 {
		if p := beat(t, a, "a", la); len(p.Renewed) != 21 {
			t.Fatalf("a renews %d, want 21", len(p.Renewed))
		}
		if n := written(); n != 1 {
			t.Fatalf("a renewal of 21 shards wrote %d rows, want 1", n)
		}
	}
	// A replica of an older build is live: a's shards' lease_expiry rows
	// are renewed too, so that replica sees them held.
	admin(t, u, `INSERT INTO replicas (id, seen_at, started_at) VALUES ('old', now(), now())`)
	beat(t, a, "a", la)
	if n := written(); n != 22 {
		t.Fatalf("a renewal of 21 shards beside an older replica wrote %d rows, want 22", n)
	}
	var lapsed int
	if err := a.Pool().QueryRow(ctx, `SELECT count(*) FROM leases AS l JOIN lease_expiry AS x ON x.shard = l.shard
		WHERE l.owner = 'a' AND x.expires_at <= now() + interval '50 seconds'`).Scan(&lapsed); err != nil || lapsed != 0 {
		t.Fatalf("%d of a's shards lapse within 50 s in lease_expiry (%v), want none", lapsed, err)
	}
}

// TestReceiptsResumeShards: a replica that takes shards over resumes the
// receipts of those shards only: their sending receipts become unknown,
// and the others' (in flight on their holders) are left alone.
func TestReceiptsResumeShards(t *testing.T) {
	u := newSchema(t)
	s := open(t, u)
	defer s.Close()
	ctx := t.Context()
	w1, w2 := inShard(t, 7, "seven"), inShard(t, 8, "eight")
	now := time.Now().UTC().Truncate(time.Millisecond)
	for _, w := range []*vigil.Watch{w1, w2} {
		w.Deliver = []byte(`{"webhook":{"url":"http://example.invalid/"}}`)
		if _, err := s.WatchCreate(ctx, vigil.WatchCreateParams{Watch: w}); err != nil {
			t.Fatal(err)
		}
		if err := s.ReceiptUpsert(ctx, vigil.ReceiptUpsertParams{ReceiptRecord: vigil.ReceiptRecord{WatchID: w.ID, MessageID: "m",
			Receipt: vigil.Receipt{Channel: "webhook", Status: vigil.ReceiptSending, Attempts: 1, UpdatedAt: now}}}); err != nil {
			t.Fatal(err)
		}
	}
	res, err := s.ReceiptsResumeShards(ctx, vigil.ReceiptsResumeParams{Now: now, SettledSince: now.Add(-time.Hour), Channels: []string{"webhook"}}, []int{7})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Unknown) != 1 || res.Unknown[0].WatchID != w1.ID {
		t.Fatalf("resumed %+v, want w1's receipt only", res.Unknown)
	}
	for _, c := range []struct {
		id   string
		want string
	}{{w1.ID, vigil.ReceiptUnknown}, {w2.ID, vigil.ReceiptSending}} {
		var st string
		if err := s.Pool().QueryRow(ctx, `SELECT status FROM receipts WHERE watch_id = $1`, c.id).Scan(&st); err != nil || st != c.want {
			t.Errorf("receipt of %s is %q (%v), want %q", c.id, st, err, c.want)
		}
	}
}

// TestHeartbeatRepairScan: the heartbeat's repair scan finds the pending
// watches of the shards it renews inserted after the instant given, and no
// others; with no instant it reads none.
func TestHeartbeatRepairScan(t *testing.T) {
	_, s, la := holding(t, 64)
	ctx := t.Context()
	held := slices.DeleteFunc(la, func(l postgres.Lease) bool { return l.Shard == 10 })
	old := inShard(t, 9, "old")
	if _, err := s.WatchCreate(ctx, vigil.WatchCreateParams{Watch: old}); err != nil {
		t.Fatal(err)
	}
	p := beat(t, s, "a", held)
	if len(p.Pending) != 0 || p.Now.IsZero() {
		t.Fatalf("a heartbeat with no instant found %v at %v; want nothing, and the clock", p.Pending, p.Now)
	}
	fresh, other := inShard(t, 9, "fresh"), inShard(t, 10, "other")
	for _, w := range []*vigil.Watch{fresh, other} {
		if _, err := s.WatchCreate(ctx, vigil.WatchCreateParams{Watch: w}); err != nil {
			t.Fatal(err)
		}
	}
	p, err := s.Heartbeat(ctx, postgres.HeartbeatParams{Replica: "a", Live: time.Minute, Held: held, Lease: time.Minute, PendingSince: p.Now})
	if err != nil || !slices.Equal(p.Pending, []string{fresh.ID}) {
		t.Fatalf("the repair scan found %v, %v; want [%s]", p.Pending, err, fresh.ID)
	}
}

// TestHeartbeatRepairScanBounded: the repair scan reads at most
// PendingLimit rows of a shard, the oldest, and says where it cut
// (PendingMore); scans from there read the rest, each row at least once,
// and the last says nothing more. A shard under the limit is read whole
// and cuts nothing.
func TestHeartbeatRepairScanBounded(t *testing.T) {
	_, s, held := holding(t, 64)
	ctx := t.Context()
	p := beat(t, s, "a", held)
	var want []string
	for i := range 5 {
		// One transaction each: each its own insertion instant.
		w := inShard(t, 9, fmt.Sprintf("burst%d", i))
		if _, err := s.WatchCreate(ctx, vigil.WatchCreateParams{Watch: w}); err != nil {
			t.Fatal(err)
		}
		want = append(want, w.ID)
	}
	other := inShard(t, 11, "other")
	if _, err := s.WatchCreate(ctx, vigil.WatchCreateParams{Watch: other}); err != nil {
		t.Fatal(err)
	}
	scan := func(since time.Time, limit int) postgres.Peers {
		t.Helper()
		q, err := s.Heartbeat(ctx, postgres.HeartbeatParams{Replica: "a", Live: time.Minute, Held: held, Lease: time.Minute, PendingSince: since, PendingLimit: limit})
		if err != nil {
			t.Fatal(err)
		}
		return q
	}
	if q := scan(p.Now, 0); !q.PendingMore.IsZero() || len(q.Pending) != 6 {
		t.Fatalf("a scan under the default limit found %v and cut at %v; want all 6 and no cut", q.Pending, q.PendingMore)
	}
	q := scan(p.Now, 2)
	if !slices.Contains(q.Pending, other.ID) || !slices.Contains(q.Pending, want[0]) || !slices.Contains(q.Pending, want[1]) || len(q.Pending) != 3 {
		t.Fatalf("a scan reading 2 a shard found %v; want %s, %s and %s", q.Pending, want[0], want[1], other.ID)
	}
	seen := map[string]bool{}
	for _, id := range q.Pending {
		seen[id] = true
	}
	for i := 0; !q.PendingMore.IsZero(); i++ {
		if i > 10 {
			t.Fatalf("the scans never reached the end; last cut at %v", q.PendingMore)
		}
		q = scan(q.PendingMore, 2)
		for _, id := range q.Pending {
			seen[id] = true
		}
	}
	for _, id := range want {
		if !seen[id] {
			t.Errorf("the scans from each cut never read %s (read %v)", id, seen)
		}
	}
}

// TestHeartbeatHorizon: a row inserted by a transaction still open when
// a heartbeat ran is invisible to its scan; the next scan, from the
// heartbeat's Horizon, finds it once it commits, where one from the
// heartbeat's clock would not (the row was stamped before it).
func TestHeartbeatHorizon(t *testing.T) {
	u, s, held := holding(t, 64)
	ctx := t.Context()
	conn, err := pgx.Connect(ctx, u)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(context.Background())
	var began time.Time
	if err := tx.QueryRow(ctx, `SELECT now()`).Scan(&began); err != nil {
		t.Fatal(err)
	}
	late := inShard(t, 9, "late")
	if _, err := tx.Exec(ctx, `INSERT INTO watches (id, recipient, kind, state, identity, created_at) VALUES ($1, 'r', 'timer', 'pending', $1, 0)`, late.ID); err != nil {
		t.Fatal(err)
	}
	// A transaction of another test that ends between the heartbeat's
	// snapshot and its read of pg_stat_activity makes the horizon
	// unknown (zero) for that beat: beat again.
	p := beat(t, s, "a", held)
	for i := 0; p.Horizon.IsZero() && i < 50; i++ {
		p = beat(t, s, "a", held)
	}
	if p.Horizon.IsZero() || p.Horizon.After(began) || p.Horizon.After(p.Now) {
		t.Fatalf("Horizon = %v with a transaction open since %v (now %v): want at or before it", p.Horizon, began, p.Now)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	scan := func(since time.Time) []string {
		t.Helper()
		q, err := s.Heartbeat(ctx, postgres.HeartbeatParams{Replica: "a", Live: time.Minute, Held: held, Lease: time.Minute, PendingSince: since})
		if err != nil {
			t.Fatal(err)
		}
		return q.Pending
	}
	if got := scan(p.Now); slices.Contains(got, late.ID) {
		t.Fatalf("a scan from the heartbeat's clock found %v: the test no longer shows what the horizon is for", got)
	}
	if got := scan(p.Horizon); !slices.Contains(got, late.ID) {
		t.Fatalf("the scan from the horizon found %v, want %s, committed after the heartbeat", got, late.ID)
	}
}

// TestHeartbeatHorizonRace: a transaction that writes after a heartbeat,
// is unseen by the next heartbeat's snapshot and ends before that
// heartbeat reads who is writing is left out of its reading; its rows are
// found by the next scan all the same, which starts at the earlier
// heartbeat's reading. The heartbeat is held between its snapshot and its
// reading by a lock on the replica's row, which its renewal waits for.
// (With no transaction ending after the writer took its id and before
// that snapshot, the writer is not among the snapshot's transactions in
// progress either: xip lists only ids below the latest that ended.)
func TestHeartbeatHorizonRace(t *testing.T) {
	// Its heartbeat must write a's row to wait for the lock below: a
	// lease renewed as a row.
	u, s, held := holdingWith(t, 64, &postgres.Options{MaxConns: 4, Replica: "a", RenewedLeases: true})
	ctx := t.Context()
	connect := func() *pgx.Conn {
		t.Helper()
		c, err := pgx.Connect(ctx, u)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close(context.Background()) })
		return c
	}
	hp := postgres.HeartbeatParams{Replica: "a", Live: time.Minute, Held: held, Lease: time.Minute}
	first, err := s.Heartbeat(ctx, hp)
	if err != nil {
		t.Fatal(err)
	}
	// The writer, after that heartbeat: its row is stamped now, and
	// committed later.
	writer, err := connect().Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer writer.Rollback(context.Background())
	late := inShard(t, 9, "late")
	var stamped time.Time
	if err := writer.QueryRow(ctx, `INSERT INTO watches (id, recipient, kind, state, identity, created_at) VALUES ($1, 'r', 'timer', 'pending', $1, 0)
		RETURNING inserted_at`, late.ID).Scan(&stamped); err != nil {
		t.Fatal(err)
	}
	// The next heartbeat takes its snapshot, then waits for the lock on
	// a's row while the writer commits.
	hp.PendingSince = first.Now
	locker := connect()
	lock, err := locker.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Rollback(context.Background())
	var lockPID int
	if err := lock.QueryRow(ctx, `SELECT pg_backend_pid() FROM replicas WHERE id = 'a' FOR UPDATE`).Scan(&lockPID); err != nil {
		t.Fatal(err)
	}
	type result struct {
		p   postgres.Peers
		err error
	}
	done := make(chan result, 1)
	go func() {
		p, err := s.Heartbeat(ctx, hp)
		done <- result{p, err}
	}()
	for waiting := false; !waiting; {
		if err := locker.QueryRow(ctx, `SELECT EXISTS (SELECT FROM pg_stat_activity WHERE $1 = ANY (pg_blocking_pids(pid)))`, lockPID).Scan(&waiting); err != nil {
			t.Fatal(err)
		}
		if !waiting {
			runtime.Gosched()
		}
	}
	if err := writer.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if err := lock.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	r := <-done
	if r.err != nil {
		t.Fatal(r.err)
	}
	if slices.Contains(r.p.Pending, late.ID) {
		t.Fatalf("the held heartbeat's scan found %s: its snapshot was taken after the writer committed, the test shows nothing", late.ID)
	}
	if r.p.Horizon.IsZero() || !r.p.Horizon.Before(stamped) {
		t.Fatalf("the held heartbeat's horizon is %v (its clock %v), want one before the writer's row, stamped %v", r.p.Horizon, r.p.Now, stamped)
	}
	hp.PendingSince = r.p.Horizon
	p, err := s.Heartbeat(ctx, hp)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(p.Pending, late.ID) {
		t.Fatalf("the scan from the held heartbeat's horizon %v (its clock %v) found %v, want %s, committed while it ran", r.p.Horizon, r.p.Now, p.Pending, late.ID)
	}
}

// TestHeartbeatHorizonHidden: a replica whose role cannot see another
// role's session of the database (no pg_read_all_stats) cannot tell where
// that session's transactions began, so its heartbeat gives no horizon
// (zero: the repair scan falls back to its fixed margin), even with that
// session idle; a superuser's heartbeat, seeing every session, gives one.
func TestHeartbeatHorizonHidden(t *testing.T) {
	u, hs, held := holding(t, 4)
	// Another store beats as a below: this one's lease session, which
	// holds a's lock, ends.
	hs.Close()
	ctx := t.Context()
	pu, err := url.Parse(u)
	if err != nil {
		t.Fatal(err)
	}
	role := pu.Query().Get("search_path") + "_replica" // unique: the schema's name is
	admin(t, u, `CREATE ROLE `+role+` LOGIN`)
	t.Cleanup(func() {
		admin(t, u, `DROP OWNED BY `+role)
		admin(t, u, `DROP ROLE `+role)
	})
	schema := pu.Query().Get("search_path")
	for _, stmt := range []string{`GRANT USAGE ON SCHEMA ` + schema + ` TO ` + role,
		`GRANT ALL ON ALL TABLES IN SCHEMA ` + schema + ` TO ` + role,
		`GRANT ALL ON ALL SEQUENCES IN SCHEMA ` + schema + ` TO ` + role} {
		admin(t, u, stmt)
	}
	ru := *pu
	ru.User = url.User(role)
	r := openWith(t, ru.String(), &postgres.Options{MaxConns: 2, Replica: "a"})
	defer r.Close()

	// Another role's session of the database, idle: the store opened
	// above as the superuser keeps its pool's connections open, and one
	// more is held here so that the test does not rest on that.
	other, err := pgx.Connect(ctx, u)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close(context.Background())
	for range 3 {
		if p := beat(t, r, "a", held); !p.Horizon.IsZero() {
			t.Fatalf("Horizon = %v for a role that cannot see another role's session: want none (zero)", p.Horizon)
		}
	}
	// The premise: the same database seen by the superuser gives a
	// horizon (a beat may miss one, as another test's transaction ends
	// while it reads: beat again).
	s := openWith(t, u, &postgres.Options{MaxConns: 2, Replica: "b"})
	defer s.Close()
	p := beat(t, s, "b", nil)
	for i := 0; p.Horizon.IsZero() && i < 50; i++ {
		p = beat(t, s, "b", nil)
	}
	if p.Horizon.IsZero() {
		t.Fatalf("the superuser's heartbeat gives no horizon either: the test no longer shows what hides it")
	}
}

// holding opens a store on a new schema, as replica "a", which has beaten
// once and holds n shards on a lease of a minute; the store closes with
// the test.
func holding(t *testing.T, n int) (string, *postgres.Store, []postgres.Lease) {
	t.Helper()
	return holdingWith(t, n, &postgres.Options{MaxConns: 4, Replica: "a"})
}

// holdingWith is holding, the store opened with o.
func holdingWith(t *testing.T, n int, o *postgres.Options) (string, *postgres.Store, []postgres.Lease) {
	t.Helper()
	u := newSchema(t)
	s := openWith(t, u, o)
	t.Cleanup(func() { s.Close() })
	beat(t, s, "a", nil)
	held, err := s.Acquire(t.Context(), "a", n, time.Minute, 0)
	if err != nil || len(held) != n {
		t.Fatalf("a acquires %d, %v; want %d", len(held), err, n)
	}
	return u, s, held
}

// TestHeartbeat: the heartbeat's one round trip says who is live, how many
// shards each holds, how many are free, when the first lease of a replica
// that is not live lapses, and whether this was the replica's first beat
// (which tells the others, once, as does a beat that frees shards).
func TestHeartbeat(t *testing.T) {
	u := newSchema(t)
	s := open(t, u)
	defer s.Close()
	ctx := t.Context()
	heard := make(chan postgres.Event, 16)
	lctx, stop := context.WithCancel(ctx)
	defer stop()
	go func() { _ = s.Listen(lctx, func(ev postgres.Event) { heard <- ev }) }()
	if ev := <-heard; ev.Kind != postgres.EventResync {
		t.Fatalf("first event %+v, want a resync", ev)
	}

	p := beat(t, s, "a", nil)
	if !p.Joined || !slices.Equal(p.Live, []string{"a"}) || len(p.Held) != 0 || p.Free != 64 || p.NextLapse != 0 {
		t.Fatalf("a's first heartbeat = %+v; want joined, live [a], none held, 64 free", p)
	}
	if ev := <-heard; ev.Kind != postgres.EventRebalance {
		t.Fatalf("after the first heartbeat heard %+v, want a rebalance", ev)
	}
	la, err := s.Acquire(ctx, "a", 40, time.Minute, 0)
	if err != nil || len(la) != 40 {
		t.Fatalf("a acquires %d, %v", len(la), err)
	}
	// b holds 10 shards on a lease of a minute, and has not beaten
	// within the live window.
	admin(t, u, `INSERT INTO replicas (id, seen_at, started_at, lease_until) VALUES ('b', now() - interval '2 minutes', now() - interval '2 minutes', now() + interval '1 minute')`)
	if _, err := s.Acquire(ctx, "b", 10, time.Minute, 0); err != nil {
		t.Fatal(err)
	}
	p = beat(t, s, "a", la)
	if p.Joined || !slices.Equal(p.Live, []string{"a"}) || p.Held["a"] != 40 || p.Held["b"] != 10 || p.Free != 14 || len(p.Renewed) != 40 {
		t.Fatalf("a's second heartbeat = %+v; want live [a], 40 and 10 held, 14 free, 40 renewed", p)
	}
	// b is not live, so its lapse is due.
	if p.NextLapse <= 50*time.Second || p.NextLapse > time.Minute {
		t.Errorf("next lapse in %v, want b's lease, about a minute", p.NextLapse)
	}
	// A shard a holds and does not know it holds is freed: lapsed, not
	// held.
	// Renewing all of them tells nobody; freeing one tells the others
	// (the check sent between the two comes first).
	beat(t, s, "a", la)
	if err := s.NotifyCheck(ctx, "w-marker"); err != nil {
		t.Fatal(err)
	}
	p = beat(t, s, "a", la[1:])
	if !slices.Equal(p.Renewed, la[1:]) || p.Freed != 1 || p.Held["a"] != 39 || p.Free != 15 {
		t.Fatalf("a's heartbeat renewing %d of its 40 leases = %+v; want the 39 renewed, 1 freed, 15 free", len(la)-1, p)
	}
	if ev := <-heard; ev.Kind != postgres.EventCheck {
		t.Fatalf("after a's heartbeat renewing all it holds heard %+v, want only the check sent after it", ev)
	}
	if ev := nextEvent(t, heard); ev.Kind != postgres.EventRebalance {
		t.Fatalf("after a's heartbeat that freed a shard heard %+v, want a rebalance", ev)
	}
	// b starts again under its id, its row still there: its first beat
	// frees what the row held, and tells the others, so that they take
	// those shards at once.
	p = beat(t, s, "b", nil)
	if p.Joined || !slices.Equal(p.Live, []string{"a", "b"}) || p.Held["a"] != 39 || p.Free != 25 || p.Freed != 10 || p.NextLapse != 0 {
		t.Fatalf("b's heartbeat holding nothing = %+v; want live [a b], 39 held by a, its 10 freed, 25 free, no lapse to wait for", p)
	}
	if ev := nextEvent(t, heard); ev.Kind != postgres.EventRebalance {
		t.Fatalf("after b's heartbeat that freed its shards heard %+v, want a rebalance", ev)
	}
	// b starts again under its id (its row gone): it joins, which tells
	// the others.
	admin(t, u, `DELETE FROM replicas WHERE id = 'b'`)
	if p := beat(t, s, "b", nil); !p.Joined {
		t.Fatalf("b's heartbeat after its row went = %+v; want joined", p)
	}
	if ev := <-heard; ev.Kind != postgres.EventRebalance {
		t.Fatalf("after b's first heartbeat heard %+v, want a rebalance", ev)
	}
	beat(t, s, "b", nil)
	// A later heartbeat tells nobody: the next event heard is the
	// check sent after it.
	if err := s.NotifyCheck(ctx, "w-marker"); err != nil {
		t.Fatal(err)
	}
	if ev := <-heard; ev.Kind != postgres.EventCheck {
		t.Fatalf("after b's second heartbeat heard %+v, want only the check sent after it", ev)
	}
}

// nextEvent is the next event heard, or a failure if none comes (the
// bound only ends a test that would otherwise hang).
func nextEvent(t *testing.T, heard <-chan postgres.Event) postgres.Event {
	t.Helper()
	select {
	case ev := <-heard:
		return ev
	case <-time.After(10 * time.Second):
		t.Fatal("no event heard")
		return postgres.Event{}
	}
}

// twoReplicas opens replicas a and b on a fresh schema, closed at the
// test's end.
func twoReplicas(t *testing.T) (string, *postgres.Store, *postgres.Store) {
	t.Helper()
	u := newSchema(t)
	a := openWith(t, u, &postgres.Options{MaxConns: 4, Replica: "a"})
	b := openWith(t, u, &postgres.Options{MaxConns: 4, Replica: "b"})
	t.Cleanup(func() { a.Close(); b.Close() })
	return u, a, b
}

// beat is replica's heartbeat on s renewing held, on a lease of a minute
// with a live window of a minute.
func beat(t *testing.T, s *postgres.Store, replica string, held []postgres.Lease) postgres.Peers {
	t.Helper()
	p, err := s.Heartbeat(t.Context(), postgres.HeartbeatParams{Replica: replica, Live: time.Minute, Held: held, Lease: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestFenceRefusalsAreKept: the watches a fenced write refused while the
// replica's fence held their shards are handed back once by Refused (the
// daemon arms them again if its next heartbeat keeps the shards); one of a
// shard the fence did not hold, and one settled, are not.
func TestFenceRefusalsAreKept(t *testing.T) {
	u, a, la := holding(t, 64)
	ctx := t.Context()
	w1, w2, w3 := inShard(t, 1, "one"), inShard(t, 2, "two"), inShard(t, 3, "three")
	for _, w := range []*vigil.Watch{w1, w2, w3} {
		if _, err := a.WatchCreate(ctx, vigil.WatchCreateParams{Watch: w}); err != nil {
			t.Fatal(err)
		}
	}
	// The fence holds every shard but 3's.
	var held []postgres.Lease
	for _, l := range la {
		if l.Shard != 3 {
			held = append(held, l)
		}
	}
	a.SetFence("a", held)
	now := time.Now()
	settle := func(ws ...*vigil.Watch) []bool {
		t.Helper()
		ps := make([]vigil.WatchSettleParams, len(ws))
		for i, w := range ws {
			ps[i] = vigil.WatchSettleParams{ID: w.ID, State: vigil.StateFired, SettledAt: now,
				Outcome: &vigil.Outcome{State: vigil.StateFired}, Message: &vigil.Message{ID: "m-" + w.ID, Text: "fired", CreatedAt: now}}
		}
		won, err := a.WatchSettle(ctx, ps)
		if err != nil {
			t.Fatal(err)
		}
		return won
	}
	if won := settle(w1); !won[0] {
		t.Fatal("the holder could not settle on its lease")
	}
	if got := a.Refused(); len(got) != 0 {
		t.Fatalf("Refused after a settlement that won = %v, want none", got)
	}
	pgtest.Lapse(t, u, "a", time.Millisecond)
	if won := settle(w2, w3); won[0] || won[1] {
		t.Fatalf("settled on a lease that lapsed: %v", won)
	}
	if won, err := a.WatchObserve(ctx, vigil.WatchObserveParams{ID: w2.ID, Polls: 1, Observation: &vigil.Observation{At: now}}); err != nil || won {
		t.Fatalf("an observation on a lease that lapsed: %v, %v; want not written", won, err)
	}
	if got := a.Refused(); !slices.Equal(got, []string{w2.ID}) {
		t.Fatalf("Refused = %v, want [%s] (w3's shard was not held by the fence)", got, w2.ID)
	}
	if got := a.Refused(); len(got) != 0 {
		t.Fatalf("Refused a second time = %v, want none", got)
	}
}

// TestAnsweredOnStaleFenceTellsHolder: a completion (Answered) settled on
// a replica whose fence still names the watch's shard, though its lease
// lapsed and another replica took the shard over (a replica frozen past
// its lease, not yet told by its next heartbeat), tells the holder, which
// delivers it: the settling replica's receipts are fenced, and the holder
// primed the shard before the settlement, so nobody else would.
func TestAnsweredOnStaleFenceTellsHolder(t *testing.T) {
	u := newSchema(t)
	a := openWith(t, u, &postgres.Options{MaxConns: 4, Replica: "a", Notify: true})
	b := openWith(t, u, &postgres.Options{MaxConns: 4, Replica: "b", Notify: true})
	t.Cleanup(func() { a.Close(); b.Close() })
	ctx := t.Context()
	beat(t, a, "a", nil)
	beat(t, b, "b", nil)
	la, err := a.Acquire(ctx, "a", 64, time.Minute, 0)
	if err != nil || len(la) != 64 {
		t.Fatalf("a acquires %d, %v", len(la), err)
	}
	a.SetFence("a", la)
	w := inShard(t, 1, "done")
	w.Kind = vigil.KindToken
	if _, err := a.WatchCreate(ctx, vigil.WatchCreateParams{Watch: w}); err != nil {
		t.Fatal(err)
	}
	// a's lease lapses; b takes shard 1 over. a's fence still names it.
	pgtest.Lapse(t, u, "a", time.Second)
	lb, err := b.Acquire(ctx, "b", 1, time.Minute, 0)
	if err != nil || len(lb) != 1 || lb[0].Shard != 0 && lb[0].Shard != 1 {
		t.Fatalf("b acquires %v, %v", lb, err)
	}
	if lb[0].Shard != 1 {
		if lb, err = b.Acquire(ctx, "b", 1, time.Minute, 0); err != nil || len(lb) != 1 || lb[0].Shard != 1 {
			t.Fatalf("b acquires %v, %v; want shard 1", lb, err)
		}
	}
	b.SetFence("b", lb)

	heard := make(chan postgres.Event, 64)
	lctx, stop := context.WithCancel(ctx)
	defer stop()
	go func() { _ = b.Listen(lctx, func(ev postgres.Event) { heard <- ev }) }()
	if ev := nextEvent(t, heard); ev.Kind != postgres.EventResync {
		t.Fatalf("first event %+v, want a resync", ev)
	}
	now := time.Now()
	won, err := a.WatchSettle(ctx, []vigil.WatchSettleParams{{ID: w.ID, State: vigil.StateFired, SettledAt: now, Answered: true,
		Outcome: &vigil.Outcome{State: vigil.StateFired}, Message: &vigil.Message{ID: "m-" + w.ID, Text: "fired", CreatedAt: now}}})
	if err != nil || !won[0] {
		t.Fatalf("a's completion: %v, %v; want won (a completion is not fenced)", won, err)
	}
	if err := a.NotifyCheck(ctx, "w-marker"); err != nil {
		t.Fatal(err)
	}
	for {
		ev := nextEvent(t, heard)
		if ev.Kind == postgres.EventWatch && ev.WatchID == w.ID && ev.Gone && ev.Message == "m-"+w.ID {
			return
		}
		if ev.Kind == postgres.EventCheck && ev.WatchID == "w-marker" {
			t.Fatal("the holder was not told of the completion settled for its shard on a replica whose lease lapsed: nobody delivers it")
		}
	}
}

// sessionStore skips t on a server whose replicas' leases cannot be
// sessions (before PostgreSQL 14).
func sessionStore(t *testing.T, s *postgres.Store) {
	t.Helper()
	if !s.SessionLeases() {
		t.Skip("the server has no idle_session_timeout: leases are renewed rows")
	}
}

// TestIdleHeartbeatWritesNothing: with its lease a database session, a
// replica's first heartbeat writes its row and the next ones write
// nothing (no row of replicas, leases or lease_expiry changes): the lease holds
// because the session lives. While a row of a replica of an older build
// (no lock_key) is there, each heartbeat renews lease_until again, which
// that replica reads.
func TestIdleHeartbeatWritesNothing(t *testing.T) {
	u, a, la := holding(t, 21)
	sessionStore(t, a)
	ctx := t.Context()
	xmins := func() string {
		t.Helper()
		var x string
		if err := a.Pool().QueryRow(ctx, `SELECT (SELECT string_agg(xmin::text, ',' ORDER BY id) FROM replicas)
			|| '/' || (SELECT string_agg(xmin::text, ',' ORDER BY shard) FROM leases)
			|| '/' || (SELECT string_agg(xmin::text, ',' ORDER BY shard) FROM lease_expiry)`).Scan(&x); err != nil {
			t.Fatal(err)
		}
		return x
	}
	before := xmins()
	for range 5 {
		if p := beat(t, a, "a", la); len(p.Renewed) != 21 || p.Joined {
			t.Fatalf("a renews %d (joined %v), want 21", len(p.Renewed), p.Joined)
		}
	}
	if after := xmins(); after != before {
		t.Fatalf("idle heartbeats rewrote rows: xmins %s, then %s", before, after)
	}
	var until time.Time
	if err := a.Pool().QueryRow(ctx, `SELECT lease_until FROM replicas WHERE id = 'a'`).Scan(&until); err != nil {
		t.Fatal(err)
	}
	admin(t, u, `INSERT INTO replicas (id, seen_at, started_at, lease_until) VALUES ('old', now(), now(), now() + interval '1 minute')`)
	beat(t, a, "a", la)
	var renewed time.Time
	if err := a.Pool().QueryRow(ctx, `SELECT lease_until FROM replicas WHERE id = 'a'`).Scan(&renewed); err != nil {
		t.Fatal(err)
	}
	if !renewed.After(until) {
		t.Fatalf("beside a replica of an older build a's lease_until stayed %v: want it renewed, for that replica to see a live", until)
	}
}

// TestSessionLease: a replica's lease is its session. Another store
// cannot beat as the same replica while it lives (ErrReplicaTaken). Once
// the session ends (the server ends it, as it ends one idle past the
// lease, or the process died) the lease has lapsed at once, whatever its
// lease_until said before: the holder's fenced writes are refused, another
// replica's heartbeat counts its shards free and takes them without
// waiting for a lease, and the holder's next heartbeat, on a new session,
// renews none of them and says it must compare its keys again.
func TestSessionLease(t *testing.T) {
	u, a, la := holding(t, 64)
	sessionStore(t, a)
	ctx := t.Context()
	a.SetFence("a", la)
	// a recorded its keys, and its start window is over: it counts as
	// live for the keys' check by its session alone.
	record(t, a, "a", postgres.KeyPrints{Webhook: []string{"aaaa000000000001"}, Link: "1111000000000000"}, nil)
	admin(t, u, `UPDATE replica_keys SET start_until = now() - interval '1 millisecond' WHERE replica = 'a'`)
	if p := beat(t, a, "a", la); p.Unchecked || len(p.Renewed) != 64 {
		t.Fatalf("a's heartbeat on its session = %+v; want its 64 renewed, not Unchecked", p)
	}
	twin := openWith(t, u, &postgres.Options{MaxConns: 2, Replica: "a"})
	defer twin.Close()
	if _, err := twin.Heartbeat(ctx, postgres.HeartbeatParams{Replica: "a", Live: time.Minute, Lease: time.Minute}); !errors.Is(err, postgres.ErrReplicaTaken) {
		t.Fatalf("a second process beating as a: %v, want ErrReplicaTaken", err)
	}
	b := openWith(t, u, &postgres.Options{MaxConns: 2, Replica: "b"})
	defer b.Close()
	if p := beat(t, b, "b", nil); p.Free != 0 || p.Held["a"] != 64 || !slices.Contains(p.Live, "a") {
		t.Fatalf("b's heartbeat with a's session alive = %+v; want a live, holding 64, none free", p)
	}
	if got, err := b.Acquire(ctx, "b", 64, time.Minute, 0); err != nil || len(got) != 0 {
		t.Fatalf("b acquired %v (%v) of a live replica's shards", got, err)
	}
	w, w2 := inShard(t, 5, "five"), inShard(t, 6, "six")
	for _, w := range []*vigil.Watch{w, w2} {
		if _, err := a.WatchCreate(ctx, vigil.WatchCreateParams{Watch: w}); err != nil {
			t.Fatal(err)
		}
	}
	settle := func(w *vigil.Watch) bool {
		t.Helper()
		now := time.Now()
		won, err := a.WatchSettle(ctx, []vigil.WatchSettleParams{{ID: w.ID, State: vigil.StateFired, SettledAt: now,
			Outcome: &vigil.Outcome{State: vigil.StateFired}, Message: &vigil.Message{ID: "m-" + w.ID, Text: "fired", CreatedAt: now}}})
		if err != nil {
			t.Fatal(err)
		}
		return won[0]
	}
	// Its lease_until (written at its first beat) long past, a holds its
	// lease by its session: it settles.
	admin(t, u, `UPDATE replicas SET lease_until = now() - interval '1 hour' WHERE id = 'a'`)
	if !settle(w) {
		t.Fatal("a could not settle on its live session with its lease_until past")
	}
	// a's session ends.
	admin(t, u, `SELECT pg_terminate_backend(l.pid, 5000) FROM pg_locks AS l JOIN replicas AS r ON (l.classid::bigint << 32 | l.objid::bigint) = r.lock_key
		WHERE r.id = 'a' AND l.locktype = 'advisory' AND l.objsubid = 1 AND l.granted`)
	if settle(w2) {
		t.Fatal("a settled on a lease whose session ended")
	}
	p := beat(t, b, "b", nil)
	if p.Free != 64 || slices.Contains(p.Live, "a") {
		t.Fatalf("b's heartbeat after a's session ended = %+v; want a not live, its 64 free", p)
	}
	got, err := b.Acquire(ctx, "b", 64, time.Minute, 0)
	if err != nil || len(got) != 64 {
		t.Fatalf("b acquired %d (%v), want a's 64 at once", len(got), err)
	}
	q := beat(t, a, "a", la)
	if len(q.Renewed) != 0 || !q.Unchecked {
		t.Fatalf("a's heartbeat on a new session = %+v; want nothing renewed, Unchecked", q)
	}
	if q := beat(t, a, "a", nil); q.Unchecked || q.Held["b"] != 64 || q.Free != 0 {
		t.Fatalf("a's next heartbeat = %+v; want b holding 64", q)
	}
}

// TestSessionLeaseIdleTimeout: a replica that stops beating (frozen, or
// cut off) loses its lease when the server ends its session, idle past the
// lease (idle_session_timeout), without anyone writing anything.
func TestSessionLeaseIdleTimeout(t *testing.T) {
	u := newSchema(t)
	a := openWith(t, u, &postgres.Options{MaxConns: 2, Replica: "a"})
	defer a.Close()
	sessionStore(t, a)
	ctx := t.Context()
	if _, err := a.Heartbeat(ctx, postgres.HeartbeatParams{Replica: "a", Live: time.Second, Lease: 300 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	// The server ends the session 300 ms after its last statement: wait
	// for it (the server's timer, not this test's), up to 10 s.
	held := true
	for deadline := time.Now().Add(10 * time.Second); held && time.Now().Before(deadline); {
		if err := a.Pool().QueryRow(ctx, `SELECT EXISTS (SELECT FROM pg_locks AS l JOIN replicas AS r ON (l.classid::bigint << 32 | l.objid::bigint) = r.lock_key
			WHERE r.id = 'a' AND l.locktype = 'advisory' AND l.granted)`).Scan(&held); err != nil {
			t.Fatal(err)
		}
		if held {
			time.Sleep(50 * time.Millisecond)
		}
	}
	if held {
		t.Fatal("a's lease session, idle past its lease, still holds its lock after 10 s")
	}
	p, err := a.Heartbeat(ctx, postgres.HeartbeatParams{Replica: "a", Live: time.Second, Lease: time.Minute})
	if err != nil {
		t.Fatalf("the heartbeat after the server ended the session: %v, want one on a new session", err)
	}
	if !p.Unchecked {
		t.Fatalf("the heartbeat after the lapse = %+v; want Unchecked", p)
	}
}

// TestQuickHeartbeat: with the database steady (every shard held by a
// replica whose session lives), a heartbeat that may be quick answers
// from the last full one on its session, reading only a fingerprint, and
// renews as a full one does; every change of what a full one reads makes
// the next one full, with the answer a full one gives: a replica joining,
// a shard released (and the heartbeats while it is free), another
// replica's session ending, the replica's signing keys recorded again, a
// lapse of its own session. One asked with other leases held is full,
// and so is every one with leases renewed as rows.
func TestQuickHeartbeat(t *testing.T) {
	u, a, la := holding(t, 32)
	sessionStore(t, a)
	ctx := t.Context()
	record(t, a, "a", postgres.KeyPrints{Webhook: []string{"aaaa000000000001"}, Link: "1111000000000000"}, nil)
	b := openWith(t, u, &postgres.Options{MaxConns: 2, Replica: "b"})
	defer b.Close()
	beat(t, b, "b", nil)
	lb, err := b.Acquire(ctx, "b", 32, time.Minute, 0)
	if err != nil || len(lb) != 32 {
		t.Fatalf("b acquires %d, %v; want 32", len(lb), err)
	}
	quick := func(held []postgres.Lease) postgres.Peers {
		t.Helper()
		p, err := a.Heartbeat(ctx, postgres.HeartbeatParams{Replica: "a", Live: time.Minute, Held: held, Lease: time.Minute, Quick: true})
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	steady := func(step string, p postgres.Peers, wantQuick bool, live ...string) {
		t.Helper()
		if p.Quick != wantQuick || !slices.Equal(p.Live, live) || !slices.Equal(p.Renewed, la) || p.Free != 0 || p.NextLapse != 0 || p.Now.IsZero() {
			t.Fatalf("%s: a's heartbeat = %+v; want quick %t, live %v, its 32 renewed, none free", step, p, wantQuick, live)
		}
	}
	// A heartbeat that wrote (a's row, after it recorded its keys) read
	// the database before its write: the next is full too.
	steady("the first asked quick (the last one was not steady)", quick(la), false, "a", "b")
	steady("the one after a heartbeat that wrote", quick(la), false, "a", "b")
	p := quick(la)
	steady("nothing changed", p, true, "a", "b")
	if p.Held["a"] != 32 || p.Held["b"] != 32 || len(p.Pending) != 0 || !p.Horizon.IsZero() {
		t.Fatalf("a's quick heartbeat = %+v; want a and b holding 32 each, no scan, no horizon", p)
	}
	steady("nothing changed, again", quick(la), true, "a", "b")

	// A replica joins: the next is full and sees it; then quick again.
	c := openWith(t, u, &postgres.Options{MaxConns: 2, Replica: "c"})
	defer c.Close()
	beat(t, c, "c", nil)
	steady("after c joined", quick(la), false, "a", "b", "c")
	steady("c holding nothing", quick(la), true, "a", "b", "c")

	// b releases a shard: full while it is free, then c takes it.
	if err := b.Release(ctx, "b", lb[:1]); err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		if p := quick(la); p.Quick || p.Free != 1 {
			t.Fatalf("heartbeat %d with a shard free = %+v; want a full one, 1 free", i, p)
		}
	}
	lc, err := c.Acquire(ctx, "c", 1, time.Minute, 0)
	if err != nil || len(lc) != 1 {
		t.Fatalf("c acquires %v, %v; want the shard b released", lc, err)
	}
	steady("after c took it", quick(la), false, "a", "b", "c")
	steady("all held again", quick(la), true, "a", "b", "c")

	// c's session ends (its process died): the next is full, c is no
	// longer live and its shard is free.
	admin(t, u, `SELECT pg_terminate_backend(l.pid, 5000) FROM pg_locks AS l JOIN replicas AS r ON (l.classid::bigint << 32 | l.objid::bigint) = r.lock_key
		WHERE r.id = 'c' AND l.locktype = 'advisory' AND l.objsubid = 1 AND l.granted`)
	if p := quick(la); p.Quick || slices.Contains(p.Live, "c") || p.Free != 1 {
		t.Fatalf("a's heartbeat after c's session ended = %+v; want a full one, c not live, its shard free", p)
	}
	if _, err := b.Acquire(ctx, "b", 1, time.Minute, 0); err != nil {
		t.Fatal(err)
	}
	quick(la)
	steady("b took c's shard", quick(la), true, "a", "b")

	// Asked with other leases held: full (it frees the one left out).
	if p := quick(la[1:]); p.Quick || len(p.Renewed) != 31 || p.Freed != 1 {
		t.Fatalf("a's heartbeat holding 31 of its 32 = %+v; want a full one, 31 renewed, 1 freed", p)
	}
	if _, err := b.Acquire(ctx, "b", 1, time.Minute, 0); err != nil {
		t.Fatal(err)
	}
	la = la[1:]
	quick(la)
	steady("b took a's shard", quick(la), true, "a", "b")

	// a records its signing keys again: full.
	record(t, a, "a", postgres.KeyPrints{Webhook: []string{"aaaa000000000001"}, Link: "1111000000000000"}, nil)
	if p := quick(la); p.Quick {
		t.Fatalf("a's heartbeat after it recorded its keys = %+v; want a full one", p)
	}
	quick(la)
	steady("keys recorded", quick(la), true, "a", "b")

	// a's own session ends: the next is full, a lapse.
	admin(t, u, `SELECT pg_terminate_backend(l.pid, 5000) FROM pg_locks AS l JOIN replicas AS r ON (l.classid::bigint << 32 | l.objid::bigint) = r.lock_key
		WHERE r.id = 'a' AND l.locktype = 'advisory' AND l.objsubid = 1 AND l.granted`)
	if p := quick(la); p.Quick || len(p.Renewed) != 0 || !p.Unchecked {
		t.Fatalf("a's heartbeat after its session ended = %+v; want a full one, nothing renewed, Unchecked", p)
	}

	// Leases renewed as rows: every heartbeat is full.
	r := openWith(t, u, &postgres.Options{MaxConns: 2, Replica: "r", RenewedLeases: true})
	defer r.Close()
	for i := range 3 {
		p, err := r.Heartbeat(ctx, postgres.HeartbeatParams{Replica: "r", Live: time.Minute, Lease: time.Minute, Quick: true})
		if err != nil || p.Quick {
			t.Fatalf("heartbeat %d of a replica whose lease is its row = %+v, %v; want a full one", i, p, err)
		}
	}
}
