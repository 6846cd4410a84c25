package postgres

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/vigil-run/vigil"
)

// TestBatchesHoldTheGlobalCap: two batches registering at once, on two
// stores, over disjoint stripes of the total and disjoint recipients,
// together stay under max_active. Each batch's last item waits on an
// idempotency key another transaction is writing, so both are in flight
// at once; once it rolls back, the cap must hold. A batch that counted
// the total under the shared cap lock (as one registration does, whose
// margin counts one watch per transaction in flight) missed the other
// batch's items and both went through: 61 pending under a cap of 40.
func TestBatchesHoldTheGlobalCap(t *testing.T) {
	if testingShort(t) {
		return
	}
	var b *Store
	a := internalStore(t, 4, &b)
	a.margin, b.margin = 5, 5
	ctx := context.Background()
	const limit, items = 40, 30
	mk := func(id, recipient string, n int) vigil.WatchCreateParams {
		w := benchWatch(int64(n))
		w.ID, w.Recipient = id, recipient
		w.Identity = vigil.Identity(w.Recipient, w.Kind, w.Mode, w.Predicate)
		return vigil.WatchCreateParams{Watch: w, MaxActive: limit}
	}
	w0 := mk("w0", "r0", 0)
	if _, err := a.WatchCreate(ctx, w0); err != nil {
		t.Fatal(err)
	}
	// The items: batch 0 on the stripes below 32, batch 1 above.
	batches := make([][]vigil.WatchCreateParams, 2)
	for n := 1; len(batches[0]) < items || len(batches[1]) < items; n++ {
		id := fmt.Sprintf("cap%06d", n)
		g := 0
		if stripe(id) >= stripes/2 {
			g = 1
		}
		if len(batches[g]) < items {
			batches[g] = append(batches[g], mk(id, fmt.Sprintf("r%d-%d", g, len(batches[g])), n))
		}
	}
	// Another transaction writes the keys of their last items, and
	// holds them.
	tx, err := a.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	for g := range batches {
		last := &batches[g][items-1]
		last.IdempotencyKey, last.RequestHash = "k", "h"
		if _, err := tx.Exec(ctx, `INSERT INTO idempotency (recipient, key, request_hash, watch_id, created_at) VALUES ($1, 'k', 'other', 'w0', 0)`,
			last.Watch.Recipient); err != nil {
			t.Fatal(err)
		}
	}
	var holder int
	if err := tx.QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&holder); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for g, st := range []*Store{a, b} {
		wg.Go(func() {
			_, errs[g] = st.WatchCreateMany(ctx, batches[g])
		})
	}
	// Both batches in flight: waiting on the holder, or on a batch that
	// waits on it.
	deadline := time.Now().Add(time.Minute)
	for {
		var n int
		err := a.pool.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity w
			WHERE $1 = ANY(pg_blocking_pids(w.pid))
			OR EXISTS (SELECT 1 FROM unnest(pg_blocking_pids(w.pid)) AS x(pid) WHERE $1 = ANY(pg_blocking_pids(x.pid)))`, holder).Scan(&n)
		if err != nil {
			t.Fatal(err)
		}
		if n >= 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d batches waiting after a minute, want 2", n)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	for g, err := range errs {
		if err != nil {
			t.Fatalf("batch %d: %v", g, err)
		}
	}
	var pending int64
	if err := a.pool.QueryRow(ctx, `SELECT count(*) FROM watches WHERE state = 'pending'`).Scan(&pending); err != nil {
		t.Fatal(err)
	}
	if pending > limit {
		t.Errorf("%d watches pending under a max_active of %d", pending, limit)
	}
	var total int64
	if err := a.pool.QueryRow(ctx, `SELECT coalesce(sum(pending), 0) FROM totals`).Scan(&total); err != nil {
		t.Fatal(err)
	}
	if total != pending {
		t.Errorf("the total counts %d pending watches, the table holds %d", total, pending)
	}
}

// TestBatchInsertColumns: a watch with every stored field set, and one
// with none it may leave out, written by one multi-row insert (its columns
// as arrays), read back as they were written: no column takes another's
// value, and what is absent stays NULL.
func TestBatchInsertColumns(t *testing.T) {
	s := internalStore(t, 2)
	ctx := context.Background()
	at := benchAt.Add(time.Minute)
	full := benchWatch(1)
	full.ID, full.Mode, full.Every = "full", vigil.ModeUntil, 90*time.Second
	full.Deadline, full.StartAt, full.CheckedAt = at.Add(3*time.Hour), at.Add(time.Hour), at.Add(2*time.Minute)
	full.Polls, full.Errors, full.ConsecutiveErrors = 4, 3, 2
	full.Standing, full.AnsweredAtCreation = true, true
	full.Note, full.Labels, full.Deliver = "a note", map[string]string{"task": "T-1"}, json.RawMessage(`{"webhook":{"url":"https://example.com/h"}}`)
	full.Stable, full.StableFor, full.MaxPolls, full.MaxErrors, full.ChainDepth = 5, 7*time.Second, 11, 13, 2
	full.TokenID = "tok"
	full.LastObservation = &vigil.Observation{At: at, Summary: "seen", Facts: map[string]any{"n": float64(1)}}
	full.Receipts = []vigil.Receipt{{Channel: "webhook", Status: "delivered", Attempts: 1, UpdatedAt: at}}
	bare := &vigil.Watch{ID: "bare", Recipient: "r", Kind: vigil.KindTimer, Identity: "bare-identity", CreatedAt: at}
	var want []*vigil.Watch
	for _, w := range []*vigil.Watch{full, bare} {
		nw := *w
		nw.State = vigil.StatePending
		enc, err := encodeWatch(&nw)
		if err != nil {
			t.Fatal(err)
		}
		st, err := enc.stored(&nw)
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, st)
	}
	res, err := s.WatchCreateMany(ctx, []vigil.WatchCreateParams{{Watch: full}, {Watch: bare}})
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range res {
		if r.Err != nil {
			t.Fatalf("item %d: %v", i, r.Err)
		}
		got, err := s.WatchGet(ctx, want[i].ID)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(want[i], got); diff != "" {
			t.Errorf("watch %s read back (-written +read):\n%s", want[i].ID, diff)
		}
	}
}
