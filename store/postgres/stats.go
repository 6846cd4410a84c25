package postgres

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// warmRows is how many watches a store registers in a table it found
// nearly empty at Open (fewer rows than this by the table's statistics)
// before it has PostgreSQL analyze the table: see statsWarmer.
const warmRows = 1000

// warmTimeout bounds that ANALYZE.
const warmTimeout = time.Minute

// statsWarmer has the watches table analyzed once, early in its growth.
//
// Every statement of the store is prepared on each pooled connection, and
// after five executions PostgreSQL keeps a generic plan for it, chosen
// with the table's statistics of that moment. On a table with no rows yet
// every index looks alike, and the generic plan of a registration's
// identity lookup read the whole of another partial index of the pending
// watches (watches_shard_pending) instead of the unique one: a cost that
// grew with every watch registered, to over half of PostgreSQL's CPU per
// registration at a few thousand, until autovacuum's first ANALYZE, a
// minute or more later, made every session plan again. After an ANALYZE
// at warmRows rows every session plans again on the right indexes, and
// autovacuum's later passes keep them so.
type statsWarmer struct {
	// left counts the rows still to register before the ANALYZE: it is
	// armed at Open, and the call that takes it to zero or below starts
	// the ANALYZE.
	left atomic.Int64
	// done is closed when the ANALYZE has ended, for tests.
	done chan struct{}

	mu      sync.Mutex
	closed  bool
	running sync.WaitGroup
	cancel  context.CancelFunc
	ctx     context.Context
}

// arm sets the warmer to analyze after warmRows registrations when the
// watches table's statistics count fewer rows than that (-1 when never
// analyzed).
func (w *statsWarmer) arm(tuples float64) {
	w.done = make(chan struct{})
	w.ctx, w.cancel = context.WithCancel(context.Background())
	if tuples < warmRows {
		w.left.Store(warmRows)
	}
}

// wroteWatches notes n watches registered, and starts the ANALYZE on the call
// that reaches warmRows.
func (s *Store) wroteWatches(n int) {
	w := &s.warm
	if n <= 0 || w.left.Load() <= 0 {
		return
	}
	after := w.left.Add(-int64(n))
	if after > 0 || after+int64(n) <= 0 {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return
	}
	w.running.Go(func() {
		defer close(w.done)
		ctx, cancel := context.WithTimeout(w.ctx, warmTimeout)
		defer cancel()
		// A VACUUM or ANALYZE of the table already running (autovacuum's)
		// holds the lock ANALYZE takes, and updates the statistics
		// itself: waiting for it would only keep a pooled connection.
		err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, `SET LOCAL lock_timeout = '1s'`); err != nil {
				return err
			}
			_, err := tx.Exec(ctx, `ANALYZE watches`)
			return err
		})
		switch {
		case err == nil, w.ctx.Err() != nil:
		case isLockTimeout(err):
			s.log.Debug("the watches table is being vacuumed or analyzed already", "err", err)
		default:
			s.log.Warn("could not analyze the watches table after its first registrations; autovacuum will", "err", err)
		}
	})
}

// isLockTimeout reports whether err is PostgreSQL's lock_not_available
// (lock_timeout ran out).
func isLockTimeout(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == "55P03"
}

// stop ends a running ANALYZE and waits for it; none starts after.
func (w *statsWarmer) stop() {
	w.mu.Lock()
	w.closed = true
	w.mu.Unlock()
	if w.cancel == nil {
		return
	}
	w.cancel()
	w.running.Wait()
}
