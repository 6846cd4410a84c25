package postgres_test

import (
	"sync"
	"testing"
	"time"

	"github.com/vigil-run/vigil/store/postgres"
)

// TestAcquireRaceTakesEachShardOnce: two replicas acquire the same lapsed
// shards at once, again and again. A shard goes to one of them: the one
// whose statement locks its row second, after the other's commit, finds it
// taken (PostgreSQL rechecks the row it locks, and its pick must judge the
// lease on what it then holds, not on the rows its statement read
// before). Each round starts the second replica's statement a little
// later than the last, so that one of them lands while the first commits.
func TestAcquireRaceTakesEachShardOnce(t *testing.T) {
	_, a, b := twoReplicas(t)
	ctx := t.Context()
	beat(t, a, "a", nil)
	beat(t, b, "b", nil)
	const rounds = 150
	for round := range rounds {
		// Every lease lapsed an hour ago, nobody holding it.
		if _, err := a.Pool().Exec(ctx, `UPDATE leases SET owner = NULL; UPDATE lease_expiry SET expires_at = now() - interval '1 hour'`); err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		var got [2][]postgres.Lease
		var errs [2]error
		start := make(chan struct{})
		for k, s := range []*postgres.Store{a, b} {
			wg.Go(func() {
				<-start
				if k == 1 {
					// 0 – 3 ms after the other.
					time.Sleep(time.Duration(round%30) * 100 * time.Microsecond)
				}
				got[k], errs[k] = s.Acquire(ctx, string(rune('a'+k)), 64, time.Minute, 0)
			})
		}
		close(start)
		wg.Wait()
		for k := range errs {
			if errs[k] != nil {
				t.Fatalf("round %d: replica %c: %v", round, 'a'+k, errs[k])
			}
		}
		seen := map[int]postgres.Lease{}
		for _, l := range got[0] {
			seen[l.Shard] = l
		}
		for _, l := range got[1] {
			if m, ok := seen[l.Shard]; ok {
				t.Fatalf("round %d: shard %d taken by a at epoch %d and by b at epoch %d", round, l.Shard, m.Epoch, l.Epoch)
			}
		}
		if n := len(got[0]) + len(got[1]); n != 64 {
			t.Fatalf("round %d: %d shards taken; want all 64, once each", round, n)
		}
	}
}
