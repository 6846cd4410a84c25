package engine_test

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"testing"

	"github.com/vigil-run/vigil"
	"github.com/vigil-run/vigil/internal/pgtest"
	"github.com/vigil-run/vigil/store/memstore"
	"github.com/vigil-run/vigil/store/postgres"
	"github.com/vigil-run/vigil/store/sqlite"
)

// batchStores are the stores the batch tests run on: memory, SQLite, and
// PostgreSQL when VIGIL_TEST_POSTGRES names one.
func batchStores(t *testing.T) map[string]func(t *testing.T) vigil.Store {
	return map[string]func(t *testing.T) vigil.Store{
		"memstore": func(t *testing.T) vigil.Store { return memstore.New() },
		"sqlite": func(t *testing.T) vigil.Store {
			st, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "vigil.db"), nil)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { st.Close() })
			return st
		},
		"postgres": func(t *testing.T) vigil.Store {
			u := pgtest.Schema(t, "vigil_engine")
			st, err := postgres.Open(context.Background(), u, &postgres.Options{MaxConns: 8})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { st.Close() })
			return st
		},
	}
}

// TestBatchLedgerAndIdentity: a batch answers each item as registrations
// one after the other would, on every store: a key reused with another
// body is idempotency_conflict (single or batch), two items of one
// identity make one watch, the per-recipient cap counts only what was
// made, and the same batch again answers the same watches.
func TestBatchLedgerAndIdentity(t *testing.T) {
	for name, mk := range batchStores(t) {
		t.Run(name, func(t *testing.T) {
			lim := vigil.DefaultLimits()
			lim.MaxActivePerRecipient = 3
			v := newEnv(t, envOpts{store: mk(t), limits: &lim})
			timer := func(in, key string) vigil.RegisterRequest {
				return vigil.RegisterRequest{Kind: vigil.KindTimer, Predicate: obj(`{"in":"` + in + `"}`), Recipient: "agent-1", IdempotencyKey: key}
			}
			batch := []vigil.RegisterRequest{
				timer("1m", "k1"), // created
				timer("1m", ""),   // existing of 0
				timer("2m", "k1"), // refused: k1 again
				timer("1m", "k2"), // existing of 0, recorded under k2
				timer("3m", ""),   // created
				timer("4m", "k4"), // created: the 3rd
				timer("5m", ""),   // quota
			}
			res, err := v.eng.RegisterBatch(v.ctx, batch)
			if err != nil {
				t.Fatal(err)
			}
			want := []string{"created", "existing", "refused", "existing", "created", "created", "refused"}
			for i, r := range res {
				if r.Status != want[i] {
					t.Errorf("item %d = %s (%v), want %s", i, r.Status, r.Err, want[i])
				}
			}
			if len(res) != len(want) {
				t.Fatalf("%d results", len(res))
			}
			if vigil.ErrorCode(res[2].Err) != vigil.CodeIdempotencyConflict || vigil.ErrorCode(res[6].Err) != vigil.CodeQuotaExceeded {
				t.Errorf("refusals = %v, %v", res[2].Err, res[6].Err)
			}
			if res[1].Watch == nil || res[3].Watch == nil || res[1].Watch.ID != res[0].Watch.ID || res[3].Watch.ID != res[0].Watch.ID {
				t.Fatalf("existing items name other watches")
			}
			// The same key with another body: refused, single and batch.
			if _, err := v.eng.Register(v.ctx, timer("9m", "k1")); vigil.ErrorCode(err) != vigil.CodeIdempotencyConflict {
				t.Errorf("single reuse of k1 = %v, want idempotency_conflict", err)
			}
			again, err := v.eng.RegisterBatch(v.ctx, []vigil.RegisterRequest{timer("9m", "k4")})
			if err != nil || vigil.ErrorCode(again[0].Err) != vigil.CodeIdempotencyConflict {
				t.Errorf("batch reuse of k4 = %+v, %v, want idempotency_conflict", again, err)
			}
			// The same batch again: the same watches.
			rep, err := v.eng.RegisterBatch(v.ctx, batch)
			if err != nil {
				t.Fatal(err)
			}
			for _, i := range []int{0, 1, 3, 4, 5} {
				if rep[i].Watch == nil || rep[i].Watch.ID != res[i].Watch.ID {
					t.Errorf("replay item %d = %+v, want %s", i, rep[i], res[i].Watch.ID)
				}
			}
			for _, i := range []int{0, 3, 5} {
				if rep[i].Watch != nil && !rep[i].Watch.Replayed {
					t.Errorf("replay item %d not replayed", i)
				}
			}
			n := 0
			page, err := v.eng.Watches(v.ctx, vigil.ListRequest{Recipient: "agent-1", State: vigil.StatePending})
			if err == nil {
				n = len(page.Watches)
			}
			if n != 3 {
				t.Errorf("%d pending (%v), want 3", n, err)
			}
		})
	}
}

// TestBatchRacesSingle: single registrations and batches of the same
// watches at once make each watch once.
func TestBatchRacesSingle(t *testing.T) {
	for name, mk := range batchStores(t) {
		t.Run(name, func(t *testing.T) {
			v := newEnv(t, envOpts{store: mk(t)})
			var wg sync.WaitGroup
			ids := make([][]string, 8)
			for g := range 8 {
				wg.Go(func() {
					var rs []vigil.RegisterRequest
					for j := range 5 {
						rs = append(rs, vigil.RegisterRequest{Kind: vigil.KindTimer, Predicate: obj(fmt.Sprintf(`{"in":"%dm"}`, j+1)), Recipient: "agent-1",
							IdempotencyKey: fmt.Sprintf("g%d-%d", g, j)})
					}
					if g%2 == 0 {
						for _, r := range rs {
							w, err := v.eng.Register(v.ctx, r)
							if err != nil {
								t.Error(err)
								return
							}
							ids[g] = append(ids[g], w.ID)
						}
						return
					}
					res, err := v.eng.RegisterBatch(v.ctx, rs)
					if err != nil {
						t.Error(err)
						return
					}
					for _, r := range res {
						if r.Watch == nil {
							t.Errorf("refused: %v", r.Err)
							return
						}
						ids[g] = append(ids[g], r.Watch.ID)
					}
				})
			}
			wg.Wait()
			for g := range ids {
				for j := range ids[g] {
					if ids[g][j] != ids[0][j] {
						t.Errorf("caller %d item %d = %s, caller 0's %s", g, j, ids[g][j], ids[0][j])
					}
				}
			}
		})
	}
}
