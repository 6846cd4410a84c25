package postgres

import (
	"context"
	"math"
	"time"

	"github.com/vigil-run/vigil"
)

// RateTakeParams takes N from the token bucket Key, which refills at Rate
// a second up to Burst.
type RateTakeParams struct {
	Key   string
	Rate  float64
	Burst int
	N     int
	Now   time.Time
}

// refilled is the bucket's content at $4 (unix ms), refilled at $2 a
// second up to $3; a clock behind the bucket's last take refills nothing
// (replicas' clocks differ a little).
const refilled = `least($3::float8, tokens + greatest(0, $4::bigint - last_ms) / 1000.0 * $2::float8)`

// RateTake takes p.N from bucket p.Key at p.Now, or nothing, and then
// says how long until p.N are there. The bucket is a row of the database
// taken in one conditional UPDATE, so every daemon on the database shares
// it: concurrent takes on several replicas never together take more than
// it holds. A new bucket starts full. p.N must be between 1 and p.Burst,
// p.Rate above 0.
//
// A take commits without waiting for its WAL to reach the disk
// (synchronous_commit off for that one statement), which makes it several
// times cheaper (BenchmarkRateTake): a crash of the database server may
// forget the takes of its last fraction of a second, letting a token
// register that many more afterwards. Nothing else is at stake: the
// registration itself commits durably in its own transaction.
func (s *Store) RateTake(ctx context.Context, p RateTakeParams) (ok bool, retry time.Duration, err error) {
	if p.Key == "" || p.Rate <= 0 || p.N < 1 || p.N > p.Burst {
		return false, 0, vigil.Errorf(vigil.CodeInvalidRequest, "a rate take needs a key, a rate above 0 and 1 to burst (%d) tokens, not %d", p.Burst, p.N)
	}
	now := p.Now.UnixMilli()
	// Take from the bucket; if there is none, make it full and take
	// from it; if another take made it first, take from that one.
	for attempt := range 2 {
		tag, err := s.pool.Exec(ctx, `UPDATE rate_buckets SET tokens = `+refilled+` - $5, last_ms = greatest(last_ms, $4::bigint)
			FROM (SELECT set_config('synchronous_commit', 'off', true)) AS relaxed
			WHERE key = $1 AND `+refilled+` >= $5`, p.Key, p.Rate, p.Burst, now, p.N)
		if err != nil {
			return false, 0, wrap("take from rate bucket", err)
		}
		if tag.RowsAffected() == 1 {
			return true, 0, nil
		}
		if attempt > 0 {
			break
		}
		tag, err = s.pool.Exec(ctx, `INSERT INTO rate_buckets (key, tokens, last_ms) VALUES ($1, $2, $3) ON CONFLICT (key) DO NOTHING`,
			p.Key, float64(p.Burst-p.N), now)
		if err != nil {
			return false, 0, wrap("create rate bucket", err)
		}
		if tag.RowsAffected() == 1 {
			return true, 0, nil
		}
	}
	// Refused: how long until the bucket holds p.N, as it is now.
	var have float64
	if err := s.pool.QueryRow(ctx, `SELECT `+refilled+` FROM rate_buckets WHERE key = $1`, p.Key, p.Rate, p.Burst, now).Scan(&have); err != nil {
		return false, 0, wrap("read rate bucket", err)
	}
	wait := math.Max(0, float64(p.N)-have) / p.Rate
	return false, max(time.Millisecond, time.Duration(wait*float64(time.Second))), nil
}
