package daemon

import (
	"context"
	"time"

	"github.com/vigil-run/vigil"
	"github.com/vigil-run/vigil/store/postgres"
)

// rateTake is where the registration rate limit's buckets live: on
// PostgreSQL, the database's (postgres.Store.RateTake), so that the limit
// holds across every replica; nil (this process's memory) on SQLite, which
// one daemon serves.
func rateTake(st vigil.Store) func(ctx context.Context, key string, rate float64, burst, n int, now time.Time) (bool, time.Duration, error) {
	pg, ok := st.(*postgres.Store)
	if !ok {
		return nil
	}
	return func(ctx context.Context, key string, rate float64, burst, n int, now time.Time) (bool, time.Duration, error) {
		return pg.RateTake(ctx, postgres.RateTakeParams{Key: key, Rate: rate, Burst: burst, N: n, Now: now})
	}
}
