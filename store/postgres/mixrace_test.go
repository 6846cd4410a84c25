package postgres

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vigil-run/vigil"
)

// TestMixedRaceKeepsCounters: single registrations and batches on two
// replicas at once, mixing new watches, identities already pending or
// made meanwhile, keys replayed or reused for another request and items
// over the caps, leave each recipient's counter and the total equal to
// the pending rows, and no identity pending twice.
func TestMixedRaceKeepsCounters(t *testing.T) {
	var b *Store
	a := internalStore(t, 8, &b)
	ctx := context.Background()
	var seq atomic.Int64
	item := func(g, j int) vigil.WatchCreateParams {
		n := seq.Add(1)
		w := benchWatch(n)
		w.ID = fmt.Sprintf("01JMIX%020d", n)
		w.Recipient = fmt.Sprintf("r%d", (g+j)%3)
		// Eight identities a recipient, shared by every caller.
		w.Predicate = []byte(fmt.Sprintf(`{"provider":"github","repo":"acme/api","sha":"%040x"}`, j%8))
		w.Identity = vigil.Identity(w.Recipient, w.Kind, w.Mode, w.Predicate)
		p := vigil.WatchCreateParams{Watch: w, MaxActive: 12, MaxActivePerRecipient: 5}
		if j%3 == 0 {
			p.IdempotencyKey = fmt.Sprintf("k%d", j%4)
			p.RequestHash = fmt.Sprintf("h%d", g%2)
			p.IdempotencySince = benchAt.Add(-time.Hour)
		}
		return p
	}
	var wg sync.WaitGroup
	for g := range 12 {
		wg.Go(func() {
			st := a
			if g%2 == 1 {
				st = b
			}
			for round := range 4 {
				if g%3 == 0 {
					for j := range 6 {
						if _, err := st.WatchCreate(ctx, item(g, round*6+j)); err != nil {
							switch vigil.ErrorCode(err) {
							case vigil.CodeQuotaExceeded, vigil.CodeIdempotencyConflict:
							default:
								t.Errorf("WatchCreate: %v", err)
							}
						}
					}
					continue
				}
				var ps []vigil.WatchCreateParams
				for j := range 6 {
					ps = append(ps, item(g, round*6+j))
				}
				res, err := st.WatchCreateMany(ctx, ps)
				if err != nil {
					t.Errorf("WatchCreateMany: %v", err)
					continue
				}
				for _, r := range res {
					switch vigil.ErrorCode(r.Err) {
					case "", vigil.CodeQuotaExceeded, vigil.CodeIdempotencyConflict:
					default:
						t.Errorf("item: %v", r.Err)
					}
				}
			}
		})
	}
	wg.Wait()
	rows, err := a.pool.Query(ctx, `SELECT c.recipient, c.pending, (SELECT count(*) FROM watches w WHERE w.recipient = c.recipient AND w.state = 'pending') FROM counters c`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var all int64
	for rows.Next() {
		var r string
		var c, n int64
		if err := rows.Scan(&r, &c, &n); err != nil {
			t.Fatal(err)
		}
		all += n
		if c != n {
			t.Errorf("recipient %s: counter %d, pending rows %d", r, c, n)
		}
		if n > 5 {
			t.Errorf("recipient %s: %d pending, past its cap of 5", r, n)
		}
	}
	var total int64
	if err := a.pool.QueryRow(ctx, `SELECT sum(pending) FROM totals`).Scan(&total); err != nil {
		t.Fatal(err)
	}
	if all > 12 {
		t.Errorf("%d pending, past the global cap of 12", all)
	}
	if total != all {
		t.Errorf("total %d, pending rows %d", total, all)
	}
	var dup int64
	if err := a.pool.QueryRow(ctx, `SELECT count(*) FROM (SELECT identity FROM watches WHERE state = 'pending' GROUP BY identity HAVING count(*) > 1) d`).Scan(&dup); err != nil {
		t.Fatal(err)
	}
	if dup != 0 {
		t.Errorf("%d identities pending twice", dup)
	}
	t.Logf("%d pending, %d races run again", all, a.raced.Load()+b.raced.Load())
}
