package storetest

import (
	"fmt"
	"sync"
	"testing"
	"time"

	gocmp "github.com/google/go-cmp/cmp"
	"github.com/vigil-run/vigil"
)

// testCreateMany: WatchCreateMany answers each item as WatchCreate would,
// in order, each item seeing the ones before it; a refused item writes
// nothing and the others go on; what it wrote survives a reopen.
func testCreateMany(t *testing.T, newStore NewStoreFunc) {
	s, reopen := newStore(t)
	ctx := t.Context()
	since := base.Add(-24 * time.Hour)
	caps := func(w *vigil.Watch, key, hash string) vigil.WatchCreateParams {
		return vigil.WatchCreateParams{Watch: w, IdempotencyKey: key, RequestHash: hash, IdempotencySince: since,
			MaxActive: 100, MaxActivePerRecipient: 4}
	}
	// Before the batch: a pending watch and a ledger entry.
	p0 := create(t, s, httpWatch("p0", "a", 100, base))
	if _, err := s.WatchCreate(ctx, caps(httpWatch("p1", "a", 101, base), "kp", "hp")); err != nil {
		t.Fatal(err)
	}
	// "a" has 2 pending, its cap is 4.
	noIdentity := httpWatch("bad", "a", 999, base)
	noIdentity.Identity = ""
	items := []vigil.WatchCreateParams{
		caps(httpWatch("n1", "a", 1, base), "k1", "h1"),         // 0 created
		caps(httpWatch("n1-again", "a", 1, base), "", ""),       // 1 existing n1 (same identity, earlier in the batch)
		caps(httpWatch("n1-retry", "a", 1, base), "k1", "h1"),   // 2 replayed n1 (same key, earlier in the batch)
		caps(httpWatch("k1-other", "a", 2, base), "k1", "h9"),   // 3 idempotency_conflict
		caps(httpWatch("p0-again", "a", 100, base), "", ""),     // 4 existing p0 (in the store before)
		caps(httpWatch("p1-retry", "a", 101, base), "kp", "hp"), // 5 replayed p1 (the ledger before)
		caps(httpWatch("p0", "b", 3, base), "", ""),             // 6 conflict: id p0 is taken
		{Watch: noIdentity},                             // 7 invalid_request
		caps(httpWatch("n2", "a", 4, base), "", ""),     // 8 created: a's 4th
		caps(httpWatch("n3", "a", 5, base), "k3", "h3"), // 9 quota_exceeded: a's 5th
		caps(httpWatch("m1", "b", 6, base), "k3", "h3"), // 10 created: another recipient, same key
		caps(httpWatch("m2", "b", 7, base.Add(time.Second)), "", ""),
	}
	res, err := s.WatchCreateMany(ctx, items)
	if err != nil {
		t.Fatalf("WatchCreateMany error = %v", err)
	}
	if len(res) != len(items) {
		t.Fatalf("WatchCreateMany returned %d results for %d items", len(res), len(items))
	}
	type want struct {
		id                 string
		existing, replayed bool
		code               vigil.Code
	}
	wants := []want{
		{id: "n1"}, {id: "n1", existing: true}, {id: "n1", replayed: true},
		{code: vigil.CodeIdempotencyConflict}, {id: "p0", existing: true}, {id: "p1", replayed: true},
		{code: vigil.CodeConflict}, {code: vigil.CodeInvalidRequest}, {id: "n2"},
		{code: vigil.CodeQuotaExceeded}, {id: "m1"}, {id: "m2"},
	}
	for i, w := range wants {
		r := res[i]
		if w.code != "" {
			if r.Watch != nil || vigil.ErrorCode(r.Err) != w.code {
				t.Errorf("item %d = %+v, %v; want refused with %s", i, r.Watch, r.Err, w.code)
			}
			continue
		}
		if r.Err != nil || r.Watch == nil {
			t.Errorf("item %d error = %v, want watch %s", i, r.Err, w.id)
			continue
		}
		if r.Watch.ID != w.id || r.Watch.Existing != w.existing || r.Watch.Replayed != w.replayed {
			t.Errorf("item %d = %s existing %v replayed %v, want %s existing %v replayed %v",
				i, r.Watch.ID, r.Watch.Existing, r.Watch.Replayed, w.id, w.existing, w.replayed)
		}
	}
	if diff := gocmp.Diff(p0, stripFlags(res[4].Watch), opts); diff != "" {
		t.Errorf("existing p0 (-want +got):\n%s", diff)
	}

	check := func(s vigil.Store, when string) {
		t.Helper()
		// What the batch created reads back as it answered.
		for _, i := range []int{0, 8, 10, 11} {
			if diff := gocmp.Diff(res[i].Watch, get(t, s, res[i].Watch.ID), opts); diff != "" {
				t.Errorf("%s: %s (-answered +stored):\n%s", when, res[i].Watch.ID, diff)
			}
		}
		// A refused item wrote nothing: no watch, no ledger entry.
		for _, id := range []string{"k1-other", "bad", "n3", "n1-again", "n1-retry", "p0-again", "p1-retry"} {
			if _, err := s.WatchGet(ctx, id); !errorsIs(err, vigil.ErrNotFound) {
				t.Errorf("%s: WatchGet(%s) error = %v, want not_found", when, id, err)
			}
		}
		if got := get(t, s, "p0"); got.Recipient != "a" {
			t.Errorf("%s: p0 belongs to %s after a batch item reused its id, want a", when, got.Recipient)
		}
		got, err := s.WatchCreate(ctx, caps(httpWatch("x", "a", 1, base), "k1", "h1"))
		if err != nil || got.ID != "n1" || !got.Replayed {
			t.Errorf("%s: key k1 = %+v, %v; want n1 replayed (the conflicting item left the ledger alone)", when, got, err)
		}
		got, err = s.WatchCreate(ctx, caps(httpWatch("y", "b", 6, base), "k3", "h3"))
		if err != nil || got.ID != "m1" || !got.Replayed {
			t.Errorf("%s: b's key k3 = %+v, %v; want m1 replayed", when, got, err)
		}
		// The counts moved with the batch: a holds its 4, b has room.
		_, err = s.WatchCreate(ctx, caps(httpWatch("a5", "a", 50, base), "", ""))
		wantCode(t, when+": a's 5th watch", err, vigil.CodeQuotaExceeded)
		counts, err := s.WatchListPending(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(counts) != 6 {
			t.Errorf("%s: %d pending watches, want 6 (p0 p1 n1 n2 m1 m2 and none else)", when, len(counts))
		}
	}
	check(s, "after the batch")
	check(reopen(), "after reopen")
}

// testCreateManyLarge: a batch of a thousand, and a second one that finds
// each of them by identity.
func testCreateManyLarge(t *testing.T, newStore NewStoreFunc) {
	s, _ := newStore(t)
	ctx := t.Context()
	const n = 1000
	mk := func(prefix string) []vigil.WatchCreateParams {
		ps := make([]vigil.WatchCreateParams, n)
		for i := range ps {
			ps[i] = vigil.WatchCreateParams{Watch: httpWatch(fmt.Sprintf("%s%04d", prefix, i), fmt.Sprintf("r%d", i%7), i, base),
				IdempotencyKey: fmt.Sprintf("k%d", i), RequestHash: "h", IdempotencySince: base.Add(-time.Hour), MaxActive: n, MaxActivePerRecipient: n}
		}
		return ps
	}
	res, err := s.WatchCreateMany(ctx, mk("w"))
	if err != nil {
		t.Fatalf("WatchCreateMany error = %v", err)
	}
	for i, r := range res {
		if want := fmt.Sprintf("w%04d", i); r.Err != nil || r.Watch.ID != want || r.Watch.Existing {
			t.Fatalf("item %d = %+v, %v; want %s created", i, r.Watch, r.Err, want)
		}
	}
	pending, err := s.WatchListPending(ctx)
	if err != nil || len(pending) != n {
		t.Fatalf("WatchListPending = %d watches, %v; want %d", len(pending), err, n)
	}
	// The same again with new ids and no keys: every one exists.
	again := mk("v")
	for i := range again {
		again[i].IdempotencyKey, again[i].RequestHash = "", ""
	}
	res, err = s.WatchCreateMany(ctx, again)
	if err != nil {
		t.Fatalf("second WatchCreateMany error = %v", err)
	}
	for i, r := range res {
		if want := fmt.Sprintf("w%04d", i); r.Err != nil || r.Watch.ID != want || !r.Watch.Existing {
			t.Fatalf("second batch item %d = %+v, %v; want %s existing", i, r.Watch, r.Err, want)
		}
	}
	// The global cap counts the thousand.
	_, err = s.WatchCreate(ctx, vigil.WatchCreateParams{Watch: httpWatch("over", "r0", n+1, base), MaxActive: n})
	wantCode(t, "the watch past the cap", err, vigil.CodeQuotaExceeded)
}

// testCapsConcurrentBatches: the caps hold under concurrent WatchCreate
// and WatchCreateMany calls of several recipients: the pending watches
// reach the global cap, and no recipient passes its own.
func testCapsConcurrentBatches(t *testing.T, newStore NewStoreFunc) {
	s, _ := newStore(t)
	ctx := t.Context()
	const perRecipient, global = 3, 5
	var wg sync.WaitGroup
	start := make(chan struct{})
	for g := range 12 {
		wg.Go(func() {
			<-start
			r := fmt.Sprintf("r%d", g%3)
			for j := range 4 {
				id, n := fmt.Sprintf("g%02d-%d", g, j), g*10+j
				p := vigil.WatchCreateParams{Watch: httpWatch(id, r, n, base), MaxActive: global, MaxActivePerRecipient: perRecipient}
				if g%2 == 1 {
					if _, err := s.WatchCreate(ctx, p); err != nil && vigil.ErrorCode(err) != vigil.CodeQuotaExceeded {
						t.Errorf("WatchCreate(%s) error = %v", id, err)
					}
					continue
				}
				q := p
				q.Watch = httpWatch(id+"b", r, 1000+n, base)
				res, err := s.WatchCreateMany(ctx, []vigil.WatchCreateParams{p, q})
				if err != nil {
					t.Errorf("WatchCreateMany(%s) error = %v", id, err)
					continue
				}
				for _, r := range res {
					if r.Err != nil && vigil.ErrorCode(r.Err) != vigil.CodeQuotaExceeded {
						t.Errorf("WatchCreateMany(%s) item error = %v", id, r.Err)
					}
				}
			}
		})
	}
	close(start)
	wg.Wait()
	pending, err := s.WatchListPending(ctx)
	if err != nil {
		t.Fatal(err)
	}
	per := map[string]int{}
	for _, e := range pending {
		per[get(t, s, e.ID).Recipient]++
	}
	if len(pending) != global {
		t.Errorf("%d pending (%v), want the global cap %d", len(pending), per, global)
	}
	for r, n := range per {
		if n > perRecipient {
			t.Errorf("recipient %s has %d pending, past its cap %d", r, n, perRecipient)
		}
	}
}

// stripFlags returns w without the per-call flags.
func stripFlags(w *vigil.Watch) *vigil.Watch {
	c := *w
	c.Existing, c.Replayed = false, false
	return &c
}
