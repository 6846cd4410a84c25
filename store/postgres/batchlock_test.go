package postgres

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/vigil-run/vigil"
)

// TestBatchesDoNotDeadlock: concurrent batches over two stores, each with
// its items in a random order over the total's stripes and several
// recipients, all commit at their first attempt: a batch takes its
// counters in the one order every registration uses, so two batches that
// meet wait for each other instead of deadlocking (each deadlock costs a
// second and a rerun; under load a rerun outlasted the client).
func TestBatchesDoNotDeadlock(t *testing.T) {
	var b *Store
	a := internalStore(t, 8, &b)
	const batches, items = 8, 60
	var wg sync.WaitGroup
	errs := make([]error, batches)
	for g := range batches {
		wg.Go(func() {
			ps := make([]vigil.WatchCreateParams, items)
			for i := range ps {
				w := benchWatch(int64(g*items + i))
				w.Recipient = fmt.Sprintf("agent-%d", rand.IntN(5))
				w.Identity = vigil.Identity(w.Recipient, w.Kind, w.Mode, w.Predicate)
				ps[i] = vigil.WatchCreateParams{Watch: w, MaxActive: 1_000_000, MaxActivePerRecipient: 1_000_000}
			}
			rand.Shuffle(len(ps), func(i, j int) { ps[i], ps[j] = ps[j], ps[i] })
			st := a
			if g%2 == 1 {
				st = b
			}
			res, err := st.WatchCreateMany(context.Background(), ps)
			if err == nil {
				for _, r := range res {
					if r.Err != nil {
						err = r.Err
						break
					}
				}
			}
			errs[g] = err
		})
	}
	wg.Wait()
	for g, err := range errs {
		if err != nil {
			t.Errorf("batch %d: %v", g, err)
		}
	}
	if n := a.raced.Load() + b.raced.Load(); n != 0 {
		t.Errorf("%d batch transactions ran again after losing a race (a deadlock between batches), want 0", n)
	}
	page, err := a.WatchList(context.Background(), vigil.WatchListParams{Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Watches) != batches*items {
		t.Errorf("%d watches stored, want %d", len(page.Watches), batches*items)
	}
}
