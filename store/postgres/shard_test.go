package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/vigil-run/vigil"
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
	u := newSchema(t)
	a := openWith(t, u, &postgres.Options{MaxConns: 4, Replica: "a"})
	b := openWith(t, u, &postgres.Options{MaxConns: 4, Replica: "b"})
	t.Cleanup(func() { a.Close(); b.Close() })
	ctx := t.Context()

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

	// a's lease of shard 1 lapses (by the database's clock): a can no
	// longer settle it, nor renew it.
	admin(t, u, `UPDATE lease_expiry SET expires_at = now() - interval '1 second' WHERE shard = 1`)
	if settle(a, w1) {
		t.Fatal("a settled a watch of a shard whose lease lapsed")
	}
	renewed, err := a.Renew(ctx, "a", la, time.Minute)
	if err != nil || len(renewed) != 62 || slices.ContainsFunc(renewed, func(l postgres.Lease) bool { return l.Shard == 1 || l.Shard == 2 }) {
		t.Fatalf("a renews %d leases (%v); want the 62 it still holds", len(renewed), err)
	}
	// Taken over after the lapse, at the next epoch.
	lb2, err := b.Acquire(ctx, "b", 64, time.Minute, 0)
	if err != nil || len(lb2) != 1 || lb2[0] != (postgres.Lease{Shard: 1, Epoch: 2}) {
		t.Fatalf("b acquires %v, %v; want shard 1 at epoch 2", lb2, err)
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
	u := newSchema(t)
	a := openWith(t, u, &postgres.Options{MaxConns: 4, Replica: "a"})
	b := openWith(t, u, &postgres.Options{MaxConns: 4, Replica: "b"})
	t.Cleanup(func() { a.Close(); b.Close() })
	ctx := t.Context()
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
	if renewed, err := a.Renew(ctx, "a", la, time.Minute); err != nil || len(renewed) != 64 {
		t.Fatalf("a renews %d leases (%v) while its write holds one; want 64", len(renewed), err)
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
	if renewed, err := a.Renew(ctx, "a", la[5:6], time.Minute); err != nil || len(renewed) != 0 {
		t.Fatalf("a renews %v, %v after b took shard 5; want nothing", renewed, err)
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

// TestPendingSince: the repair scan finds the pending watches of the
// shards asked for inserted after the instant given, and no others.
func TestPendingSince(t *testing.T) {
	u := newSchema(t)
	s := open(t, u)
	defer s.Close()
	ctx := t.Context()
	old := inShard(t, 9, "old")
	if _, err := s.WatchCreate(ctx, vigil.WatchCreateParams{Watch: old}); err != nil {
		t.Fatal(err)
	}
	_, mark, err := s.PendingSince(ctx, nil, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	fresh, other := inShard(t, 9, "fresh"), inShard(t, 10, "other")
	for _, w := range []*vigil.Watch{fresh, other} {
		if _, err := s.WatchCreate(ctx, vigil.WatchCreateParams{Watch: w}); err != nil {
			t.Fatal(err)
		}
	}
	ids, _, err := s.PendingSince(ctx, []int{9}, mark)
	if err != nil || !slices.Equal(ids, []string{fresh.ID}) {
		t.Fatalf("PendingSince = %v, %v; want [%s]", ids, err, fresh.ID)
	}
}

// TestHeartbeat: the heartbeat's one round trip says who is live, how many
// shards each holds, how many are free, when the first lease of a replica
// that is not live lapses, and whether this was the replica's first beat
// (which tells the others, once).
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

	p, err := s.Heartbeat(ctx, "a", time.Minute, nil, 0)
	if err != nil || !p.Joined || !slices.Equal(p.Live, []string{"a"}) || len(p.Held) != 0 || p.Free != 64 || p.NextLapse != 0 {
		t.Fatalf("a's first heartbeat = %+v, %v; want joined, live [a], none held, 64 free", p, err)
	}
	if ev := <-heard; ev.Kind != postgres.EventRebalance {
		t.Fatalf("after the first heartbeat heard %+v, want a rebalance", ev)
	}
	la, err := s.Acquire(ctx, "a", 40, time.Minute, 0)
	if err != nil || len(la) != 40 {
		t.Fatalf("a acquires %d, %v", len(la), err)
	}
	if _, err := s.Acquire(ctx, "b", 10, time.Minute, 0); err != nil {
		t.Fatal(err)
	}
	p, err = s.Heartbeat(ctx, "a", time.Minute, nil, 0)
	if err != nil || p.Joined || !slices.Equal(p.Live, []string{"a"}) || p.Held["a"] != 40 || p.Held["b"] != 10 || p.Free != 14 {
		t.Fatalf("a's second heartbeat = %+v, %v; want live [a], 40 and 10 held, 14 free", p, err)
	}
	// b never beat: it is not live, so its first lapse is due.
	if p.NextLapse <= 50*time.Second || p.NextLapse > time.Minute {
		t.Errorf("next lapse in %v, want b's lease, about a minute", p.NextLapse)
	}
	// A lapsed lease is free, not held.
	admin(t, u, `UPDATE lease_expiry SET expires_at = now() - interval '1 second' WHERE shard = $1`, la[0].Shard)
	// The heartbeat renews what is still held, in the same transaction:
	// the lapsed lease is lost.
	p, err = s.Heartbeat(ctx, "a", time.Minute, la, time.Minute)
	if err != nil || !slices.Equal(p.Renewed, la[1:]) || p.Held["a"] != 39 || p.Free != 15 {
		t.Fatalf("a's heartbeat renewing %d leases = %+v, %v; want the 39 not lapsed renewed, 15 free", len(la), p, err)
	}
	p, err = s.Heartbeat(ctx, "b", time.Minute, nil, 0)
	if err != nil || !p.Joined || !slices.Equal(p.Live, []string{"a", "b"}) || p.Held["a"] != 39 || p.Free != 15 || p.NextLapse != 0 {
		t.Fatalf("b's first heartbeat = %+v, %v; want live [a b], 39 held by a, 15 free, no lapse to wait for", p, err)
	}
	if ev := <-heard; ev.Kind != postgres.EventRebalance {
		t.Fatalf("after b's first heartbeat heard %+v, want a rebalance", ev)
	}
	if _, err := s.Heartbeat(ctx, "b", time.Minute, nil, 0); err != nil {
		t.Fatal(err)
	}
	// A later heartbeat tells nobody: the next event heard is the
	// check sent after it.
	if err := s.NotifyCheck(ctx, "w-marker"); err != nil {
		t.Fatal(err)
	}
	if ev := <-heard; ev.Kind != postgres.EventCheck {
		t.Fatalf("after b's second heartbeat heard %+v, want only the check sent after it", ev)
	}
}
