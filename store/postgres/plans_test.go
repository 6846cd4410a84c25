package postgres

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/vigil-run/vigil"
)

// TestIdentityLookupPlanAfterGrowth: a registration's identity lookup is
// a prepared statement of each pooled connection, and PostgreSQL keeps
// the generic plan it chose after five executions. Chosen on a table with
// no rows yet, that plan reads the whole of another partial index of the
// pending watches (watches_shard_pending) for each lookup, a cost that
// grew with every watch registered until autovacuum's next ANALYZE, a
// minute or more later. The store has the table analyzed once it has
// written warmRows rows to a table it found nearly empty, and the lookup
// plans again, on watches_identity_pending.
func TestIdentityLookupPlanAfterGrowth(t *testing.T) {
	t.Parallel()
	s := internalStore(t, 2)
	ctx := context.Background()
	for i := range int64(warmRows + 50) {
		w := benchWatch(i)
		if _, err := s.WatchCreate(ctx, vigil.WatchCreateParams{Watch: w}); err != nil {
			t.Fatal(err)
		}
	}
	select {
	case <-s.warm.done:
	case <-time.After(time.Minute):
		t.Fatal("the watches table was not analyzed after the store wrote its first rows")
	}
	conns := s.pool.AcquireAllIdle(ctx)
	defer func() {
		for _, c := range conns {
			c.Release()
		}
	}()
	checked := 0
	for _, c := range conns {
		if index := lookupIndex(t, c); index != "" {
			checked++
			if index != "watches_identity_pending" {
				t.Errorf("connection %d looks identities up through %s, want watches_identity_pending", c.Conn().PgConn().PID(), index)
			}
		}
	}
	if checked == 0 {
		t.Fatal("no pooled connection had prepared the identity lookup")
	}
}

// lookupIndex is the index the identity lookup prepared on c reads, as
// its plan for the next execution says ("" when c has not prepared it).
func lookupIndex(t *testing.T, c *pgxpool.Conn) string {
	t.Helper()
	ctx := context.Background()
	var name string
	if err := c.QueryRow(ctx, `SELECT coalesce(max(name), '') FROM pg_prepared_statements WHERE statement = $1`, sqlWatchPendingByIdentity).Scan(&name); err != nil {
		t.Fatal(err)
	}
	if name == "" {
		return ""
	}
	var plan []byte
	if err := c.QueryRow(ctx, `EXPLAIN (FORMAT JSON) EXECUTE `+name+`('00000000000000000000000000000000')`).Scan(&plan); err != nil {
		t.Fatal(err)
	}
	var p []struct {
		Plan struct {
			NodeType  string `json:"Node Type"`
			IndexName string `json:"Index Name"`
		} `json:"Plan"`
	}
	if err := json.Unmarshal(plan, &p); err != nil || len(p) == 0 {
		t.Fatalf("plan %s: %v", plan, err)
	}
	if p[0].Plan.IndexName == "" {
		return p[0].Plan.NodeType
	}
	return p[0].Plan.IndexName
}

// TestWarmAnalyzeGivesWayToVacuum: while a VACUUM or ANALYZE of watches
// holds its lock (autovacuum's, here a session that took the same lock),
// the store's own ANALYZE gives up after a second instead of holding a
// pooled connection until that one ends.
func TestWarmAnalyzeGivesWayToVacuum(t *testing.T) {
	t.Parallel()
	s := internalStore(t, 3)
	ctx := context.Background()
	holder, err := s.pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Release()
	tx, err := holder.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, `LOCK TABLE watches IN SHARE UPDATE EXCLUSIVE MODE`); err != nil {
		t.Fatal(err)
	}
	for i := range int64(warmRows) {
		if _, err := s.WatchCreate(ctx, vigil.WatchCreateParams{Watch: benchWatch(i)}); err != nil {
			t.Fatal(err)
		}
	}
	select {
	case <-s.warm.done:
	case <-time.After(30 * time.Second):
		t.Fatal("the store's ANALYZE waited on the lock of another one")
	}
}
