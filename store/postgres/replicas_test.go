package postgres_test

import (
	"fmt"
	"maps"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/vigil-run/vigil"
)

// Two stores on one schema stand for two daemons on one database: each has
// its own pool and connections, as another process would. What must hold
// across them is held by the database.

var at = time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)

func timerWatch(id, recipient, predicate string) *vigil.Watch {
	w := &vigil.Watch{ID: id, Recipient: recipient, Kind: "timer", Mode: vigil.ModeUntil,
		Predicate: []byte(predicate), CreatedAt: at, Deadline: at.Add(time.Hour)}
	w.Identity = vigil.Identity(recipient, w.Kind, w.Mode, w.Predicate)
	return w
}

// race runs n registrations split over the two stores, all released at
// once, and returns what each got.
func race(t *testing.T, stores [2]vigil.Store, n int, mk func(i int) vigil.WatchCreateParams) ([]*vigil.Watch, []error) {
	t.Helper()
	ws, errs := make([]*vigil.Watch, n), make([]error, n)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			<-start
			ws[i], errs[i] = stores[i%2].WatchCreate(t.Context(), mk(i))
		})
	}
	close(start)
	wg.Wait()
	return ws, errs
}

func twoStores(t *testing.T) [2]vigil.Store {
	u := newSchema(t)
	a, b := open(t, u), open(t, u)
	t.Cleanup(func() { a.Close(); b.Close() })
	return [2]vigil.Store{a, b}
}

func TestReplicasIdentityDedup(t *testing.T) {
	stores := twoStores(t)
	// Several rounds, each of one thing: the race between the look-up and
	// the insert is narrow, and each round is another chance at it.
	const rounds = 8
	for round := range rounds {
		ws, errs := race(t, stores, 16, func(i int) vigil.WatchCreateParams {
			return vigil.WatchCreateParams{Watch: timerWatch(fmt.Sprintf("w%d-%d", round, i), "r", fmt.Sprintf(`{"round":%d}`, round))}
		})
		created, ids := 0, map[string]bool{}
		for i, err := range errs {
			if err != nil {
				t.Fatalf("round %d, registration %d: %v", round, i, err)
			}
			if !ws[i].Existing {
				created++
			}
			ids[ws[i].ID] = true
		}
		if created != 1 || len(ids) != 1 {
			t.Errorf("round %d: 16 registrations of one thing over two stores: %d created, %d distinct ids; want 1 and 1", round, created, len(ids))
		}
	}
	page, err := stores[0].WatchList(t.Context(), vigil.WatchListParams{State: vigil.StatePending})
	if err != nil || len(page.Watches) != rounds {
		t.Errorf("pending watches = %d (%v), want %d", len(page.Watches), err, rounds)
	}
}

func TestReplicasCapPerRecipient(t *testing.T) {
	stores := twoStores(t)
	const cap = 5
	_, errs := race(t, stores, 30, func(i int) vigil.WatchCreateParams {
		return vigil.WatchCreateParams{Watch: timerWatch(fmt.Sprintf("w%d", i), "r", fmt.Sprintf(`{"n":%d}`, i)),
			MaxActive: 1000, MaxActivePerRecipient: cap}
	})
	ok, quota := 0, 0
	for i, err := range errs {
		switch vigil.ErrorCode(err) {
		case "":
			ok++
		case vigil.CodeQuotaExceeded:
			quota++
		default:
			t.Fatalf("registration %d: %v", i, err)
		}
	}
	if ok != cap || quota != 30-cap {
		t.Errorf("30 registrations over two stores with a cap of %d: %d made, %d refused; want %d and %d", cap, ok, quota, cap, 30-cap)
	}
	// And the global cap, against the same counters.
	_, errs = race(t, stores, 20, func(i int) vigil.WatchCreateParams {
		return vigil.WatchCreateParams{Watch: timerWatch(fmt.Sprintf("g%d", i), fmt.Sprintf("g%d", i), `{}`), MaxActive: cap + 3}
	})
	ok = 0
	for _, err := range errs {
		if err == nil {
			ok++
		}
	}
	if ok != 3 {
		t.Errorf("20 registrations under a global cap with 3 slots left: %d made, want 3", ok)
	}
}

func TestReplicasIdempotency(t *testing.T) {
	stores := twoStores(t)
	// The same request under one key: one watch, every other call replays it.
	ws, errs := race(t, stores, 12, func(i int) vigil.WatchCreateParams {
		return vigil.WatchCreateParams{Watch: timerWatch(fmt.Sprintf("w%d", i), "r", `{"same":true}`),
			IdempotencyKey: "k1", RequestHash: "h1"}
	})
	ids, replayed := map[string]bool{}, 0
	for i, err := range errs {
		if err != nil {
			t.Fatalf("registration %d: %v", i, err)
		}
		ids[ws[i].ID] = true
		if ws[i].Replayed {
			replayed++
		}
	}
	if len(ids) != 1 {
		t.Errorf("one key, one request, 12 calls over two stores: %d watches, want 1", len(ids))
	}
	if replayed < 1 {
		t.Errorf("no call replayed the key")
	}
	// Different requests under one key: one wins, the others conflict.
	_, errs = race(t, stores, 12, func(i int) vigil.WatchCreateParams {
		return vigil.WatchCreateParams{Watch: timerWatch(fmt.Sprintf("x%d", i), "r", fmt.Sprintf(`{"n":%d}`, i)),
			IdempotencyKey: "k2", RequestHash: fmt.Sprintf("h%d", i)}
	})
	ok, conflict := 0, 0
	for i, err := range errs {
		switch vigil.ErrorCode(err) {
		case "":
			ok++
		case vigil.CodeIdempotencyConflict:
			conflict++
		default:
			t.Fatalf("registration %d: %v", i, err)
		}
	}
	if ok != 1 || conflict != 11 {
		t.Errorf("one key, 12 different requests: %d made, %d conflicts; want 1 and 11", ok, conflict)
	}
}

func TestReplicasSettleOnce(t *testing.T) {
	stores := twoStores(t)
	var ps []vigil.WatchSettleParams
	for i := range 50 {
		w, err := stores[i%2].WatchCreate(t.Context(), vigil.WatchCreateParams{Watch: timerWatch(fmt.Sprintf("w%02d", i), "r", fmt.Sprintf(`{"n":%d}`, i))})
		if err != nil {
			t.Fatal(err)
		}
		ps = append(ps, vigil.WatchSettleParams{ID: w.ID, State: vigil.StateFired, SettledAt: at.Add(time.Minute),
			Outcome: &vigil.Outcome{State: vigil.StateFired, Reason: "time"}})
	}
	// Both stores settle every watch, in opposite orders, several times.
	var wg sync.WaitGroup
	wins := make([][]bool, 8)
	errs := make([]error, 8)
	for k := range 8 {
		batch := make([]vigil.WatchSettleParams, len(ps))
		for i := range ps {
			p := ps[i]
			if k%2 == 1 {
				p = ps[len(ps)-1-i]
			}
			p.Message = &vigil.Message{ID: fmt.Sprintf("m-%s-%d", p.ID, k), Text: "fired"}
			batch[i] = p
		}
		wg.Go(func() { wins[k], errs[k] = stores[k%2].WatchSettle(t.Context(), batch) })
	}
	wg.Wait()
	won := map[string]int{}
	for k := range 8 {
		if errs[k] != nil {
			t.Fatalf("settle %d: %v", k, errs[k])
		}
		for i, w := range wins[k] {
			if w {
				id := ps[i].ID
				if k%2 == 1 {
					id = ps[len(ps)-1-i].ID
				}
				won[id]++
			}
		}
	}
	for _, p := range ps {
		if won[p.ID] != 1 {
			t.Errorf("%s settled %d times, want once", p.ID, won[p.ID])
		}
	}
	page, err := stores[1].MessagesRead(t.Context(), vigil.MessagesReadParams{Recipient: "r", Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Messages) != len(ps) {
		t.Errorf("mailbox holds %d messages, want %d: one per watch", len(page.Messages), len(ps))
	}
}

// TestReplicasMailboxOrder: messages appended from two stores at once are
// each seen exactly once by a reader that moves its cursor past what it
// read as it goes: no message commits behind a cursor with a smaller seq.
func TestReplicasMailboxOrder(t *testing.T) {
	stores := twoStores(t)
	const writers, each = 16, 40
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for g := range writers {
		wg.Go(func() {
			for i := range each {
				_, err := stores[g%2].MessageCreate(t.Context(), &vigil.Message{ID: fmt.Sprintf("m%d-%d", g, i), Recipient: "r",
					Type: vigil.MessageNote, Text: "x", CreatedAt: at})
				if err != nil {
					errs <- err
					return
				}
			}
		})
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	seen := map[string]int{}
	var cursor int64
	read := func() {
		page, err := stores[0].MessagesRead(t.Context(), vigil.MessagesReadParams{Recipient: "r", After: &cursor, Limit: 1000})
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range page.Messages {
			seen[m.ID]++
			cursor = m.Seq
		}
	}
	for running := true; running; {
		select {
		case <-done:
			running = false
		case err := <-errs:
			t.Fatal(err)
		default:
		}
		read()
	}
	read()
	missing := 0
	for g := range writers {
		for i := range each {
			switch seen[fmt.Sprintf("m%d-%d", g, i)] {
			case 0:
				missing++
			case 1:
			default:
				t.Errorf("m%d-%d seen %d times", g, i, seen[fmt.Sprintf("m%d-%d", g, i)])
			}
		}
	}
	if missing > 0 {
		t.Errorf("%d of %d messages were never seen: a cursor passed them before they committed", missing, writers*each)
	}
}

// TestReplicasCounts: registrations, settlements (in opposite orders),
// cancels and deletes from two stores at once all go through (a deadlock
// is run again), and WatchCounts then says what the watches counted one by
// one say, before and after Prune.
func TestReplicasCounts(t *testing.T) {
	u := newSchema(t)
	a, b := open(t, u), open(t, u)
	t.Cleanup(func() { a.Close(); b.Close() })
	stores := [2]vigil.Store{a, b}
	ctx := t.Context()
	const n = 60
	ws, errs := race(t, stores, n, func(i int) vigil.WatchCreateParams {
		w := timerWatch(fmt.Sprintf("w%02d", i), fmt.Sprintf("r%d", i%3), fmt.Sprintf(`{"n":%d}`, i))
		if i%2 == 1 {
			w.Kind = vigil.KindHTTP
		}
		return vigil.WatchCreateParams{Watch: w}
	})
	for i, err := range errs {
		if err != nil {
			t.Fatalf("create %d: %v", i, err)
		}
	}
	var ps []vigil.WatchSettleParams
	for _, w := range ws[:n/2] {
		ps = append(ps, vigil.WatchSettleParams{ID: w.ID, State: vigil.StateFired, SettledAt: at.Add(time.Minute),
			Outcome: &vigil.Outcome{State: vigil.StateFired, Reason: "time"}})
	}
	var wg sync.WaitGroup
	for k := range 4 {
		batch := slices.Clone(ps)
		if k%2 == 1 {
			slices.Reverse(batch)
		}
		wg.Go(func() {
			if _, err := stores[k%2].WatchSettle(ctx, batch); err != nil {
				t.Errorf("settle %d: %v", k, err)
			}
		})
	}
	for i, w := range ws[n/2:] {
		if i%3 != 0 {
			continue
		}
		wg.Go(func() {
			if _, _, err := stores[i%2].WatchCancel(ctx, vigil.WatchCancelParams{ID: w.ID, SettledAt: at.Add(time.Minute),
				Outcome: &vigil.Outcome{State: vigil.StateCancelled, Reason: "cancelled"}}); err != nil {
				t.Errorf("cancel %s: %v", w.ID, err)
			}
		})
	}
	wg.Wait()
	for _, w := range ws[:5] {
		if err := stores[1].WatchDelete(ctx, w.ID); err != nil {
			t.Fatal(err)
		}
	}
	check := func(when string) {
		t.Helper()
		got, err := stores[0].WatchCounts(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		gotMap := map[string]int{}
		for _, c := range got {
			gotMap[string(c.State)+"/"+string(c.Kind)] = c.N
		}
		conn, err := pgx.Connect(ctx, u)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close(ctx)
		rows, err := conn.Query(ctx, `SELECT state || '/' || kind, count(*)::int FROM watches GROUP BY state, kind`)
		if err != nil {
			t.Fatal(err)
		}
		want, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (struct {
			k string
			n int
		}, error) {
			var v struct {
				k string
				n int
			}
			return v, r.Scan(&v.k, &v.n)
		})
		if err != nil {
			t.Fatal(err)
		}
		wantMap := map[string]int{}
		for _, v := range want {
			wantMap[v.k] = v.n
		}
		if !maps.Equal(gotMap, wantMap) {
			t.Errorf("%s: WatchCounts = %v, the watches counted one by one %v", when, gotMap, wantMap)
		}
	}
	check("after the race")
	if _, err := stores[0].Prune(ctx, vigil.PruneParams{WatchesBefore: at.Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	check("after Prune")
}
