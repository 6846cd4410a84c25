package storetest

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/vigil-run/vigil"
)

// testCreateRaceSingleBatch: single registrations and batches of the same
// identity, and of the same idempotency key, made at once: one watch is
// made, every answer names it, a key used for two requests answers
// idempotency_conflict to the ones that lost, and the per-recipient count
// holds one.
func testCreateRaceSingleBatch(t *testing.T, newStore NewStoreFunc) {
	s, _ := newStore(t)
	ctx := t.Context()
	since := base.Add(-24 * time.Hour)
	const rounds, callers = 6, 8
	for round := range rounds {
		r := fmt.Sprintf("race%d", round)
		var wg sync.WaitGroup
		start := make(chan struct{})
		type answer struct {
			id       string
			code     vigil.Code
			hash     string
			replayed bool
		}
		idents := make([]answer, callers)
		keyed := make([]answer, callers)
		for g := range callers {
			wg.Go(func() {
				<-start
				// Same identity, no key.
				p := vigil.WatchCreateParams{Watch: httpWatch(fmt.Sprintf("%s-i%d", r, g), r, 1, base), MaxActive: 1000, MaxActivePerRecipient: 3}
				// Same key, two requests (hash by parity), distinct identities.
				h := fmt.Sprintf("h%d", g%2)
				q := vigil.WatchCreateParams{Watch: httpWatch(fmt.Sprintf("%s-k%d", r, g), r, 100+g%2, base),
					IdempotencyKey: "k", RequestHash: h, IdempotencySince: since, MaxActive: 1000, MaxActivePerRecipient: 3}
				if g%2 == 0 {
					w, err := s.WatchCreate(ctx, p)
					idents[g] = answer{code: vigil.ErrorCode(err)}
					if err == nil {
						idents[g].id = w.ID
					}
					w, err = s.WatchCreate(ctx, q)
					keyed[g] = answer{code: vigil.ErrorCode(err), hash: h}
					if err == nil {
						keyed[g].id, keyed[g].replayed = w.ID, w.Replayed
					}
					return
				}
				res, err := s.WatchCreateMany(ctx, []vigil.WatchCreateParams{p, q})
				if err != nil {
					idents[g] = answer{code: vigil.ErrorCode(err)}
					keyed[g] = answer{code: vigil.ErrorCode(err)}
					return
				}
				for j, a := range []*answer{&idents[g], &keyed[g]} {
					a.code, a.hash = vigil.ErrorCode(res[j].Err), h
					if res[j].Err == nil {
						a.id, a.replayed = res[j].Watch.ID, res[j].Watch.Replayed
					}
				}
			})
		}
		close(start)
		wg.Wait()
		first := ""
		for g, a := range idents {
			if a.code != "" {
				t.Errorf("round %d caller %d: identity registration refused %s", round, g, a.code)
				continue
			}
			if first == "" {
				first = a.id
			}
			if a.id != first {
				t.Errorf("round %d: caller %d answered %s, another %s: two watches of one identity", round, g, a.id, first)
			}
		}
		won, wonHash := "", ""
		for g, a := range keyed {
			if a.code == "" {
				if won == "" {
					won, wonHash = a.id, a.hash
				}
				if a.id != won || a.hash != wonHash {
					t.Errorf("round %d caller %d: key k answered %s (hash %s), another %s (hash %s)", round, g, a.id, a.hash, won, wonHash)
				}
				continue
			}
			if a.code != vigil.CodeIdempotencyConflict {
				t.Errorf("round %d caller %d: key k refused %s, want idempotency_conflict", round, g, a.code)
			}
		}
		pending, err := s.WatchListPending(ctx)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, e := range pending {
			if get(t, s, e.ID).Recipient == r {
				n++
			}
		}
		if n != 2 {
			t.Errorf("round %d: %d pending watches of %s, want 2", round, n, r)
		}
		// The count holds 2: a third fits, a fourth does not.
		if _, err := s.WatchCreate(ctx, vigil.WatchCreateParams{Watch: httpWatch(r+"-3", r, 50, base), MaxActivePerRecipient: 3}); err != nil {
			t.Errorf("round %d: third watch error = %v", round, err)
		}
		_, err = s.WatchCreate(ctx, vigil.WatchCreateParams{Watch: httpWatch(r+"-4", r, 51, base), MaxActivePerRecipient: 3})
		wantCode(t, fmt.Sprintf("round %d: fourth watch", round), err, vigil.CodeQuotaExceeded)
	}
}
