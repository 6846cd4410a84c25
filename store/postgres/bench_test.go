package postgres

import (
	"context"
	"fmt"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/vigil-run/vigil"
	"github.com/vigil-run/vigil/internal/pgtest"
)

// The benchmarks mirror store/sqlite's, on the database VIGIL_TEST_POSTGRES
// names (PostgreSQL's own durability settings apply: fsync and
// synchronous_commit as configured). Run them with, for example,
//
//	VIGIL_TEST_POSTGRES=postgres://… go test ./store/postgres -run XXX -bench . -benchtime 20000x
//
// An op is one create or one settlement.

var benchAt = time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)

// benchWatch is store/sqlite's benchWatch: a ci watch on a SHA, with a
// note and a label.
func benchWatch(i int64) *vigil.Watch {
	w := &vigil.Watch{
		ID:        fmt.Sprintf("01JBENCH%018d", i),
		Kind:      vigil.KindCI,
		Predicate: []byte(fmt.Sprintf(`{"provider":"github","repo":"acme/api","sha":"%040x"}`, i)),
		Recipient: fmt.Sprintf("agent-%d", i%100),
		State:     vigil.StatePending,
		Mode:      vigil.ModeUntil,
		Every:     30 * time.Second,
		Deadline:  benchAt.Add(2 * time.Hour),
		CreatedAt: benchAt.Add(time.Duration(i) * time.Millisecond),
		Note:      "merge PR 41 when green",
		Labels:    map[string]string{"task": "T-19"},
	}
	w.Identity = vigil.Identity(w.Recipient, w.Kind, w.Mode, w.Predicate)
	return w
}

// benchStore opens a store in a fresh schema, dropped at cleanup.
func benchStore(b *testing.B) *Store { return internalStore(b, 32) }

// internalStore opens n stores, each with a pool of maxConns, in one fresh
// schema, dropped at cleanup, and returns the first.
func internalStore(b testing.TB, maxConns int32, more ...**Store) *Store {
	b.Helper()
	u := benchSchema(b)
	s, err := Open(context.Background(), u, &Options{MaxConns: maxConns})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	for _, m := range more {
		if *m, err = Open(context.Background(), u, &Options{MaxConns: maxConns}); err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { (*m).Close() })
	}
	return s
}

// benchSchema makes a fresh schema, dropped at cleanup, and returns the
// URL of VIGIL_TEST_POSTGRES with it as the search path.
func benchSchema(b testing.TB) string {
	b.Helper()
	return pgtest.Schema(b, "vigil_bench")
}

func benchCreate(s *Store, i int64) error {
	_, err := s.WatchCreate(context.Background(), vigil.WatchCreateParams{
		Watch: benchWatch(i), MaxActive: 100_000_000, MaxActivePerRecipient: 100_000_000,
	})
	return err
}

func BenchmarkWatchCreate(b *testing.B) {
	s := benchStore(b)
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		if err := benchCreate(s, int64(i)); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "creates/s")
}

// BenchmarkWatchCreateParallel registers from 32 goroutines at once, each
// registration its own transaction.
func BenchmarkWatchCreateParallel(b *testing.B) {
	s := benchStore(b)
	var n atomic.Int64
	b.ReportAllocs()
	b.SetParallelism(max(1, 32/runtime.GOMAXPROCS(0)))
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if err := benchCreate(s, n.Add(1)); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "creates/s")
}

// bulkInsert writes n watches in large transactions, for benchmark setup.
func bulkInsert(b *testing.B, s *Store, n int64) { bulkInsertOf(b, s, n, benchWatch) }

// bulkInsertOf writes watches mk(0) to mk(n-1), as bulkInsert.
func bulkInsertOf(b *testing.B, s *Store, n int64, mk func(int64) *vigil.Watch) {
	b.Helper()
	ctx := context.Background()
	const chunk = 5000
	for start := int64(0); start < n; start += chunk {
		err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
			batch := &pgx.Batch{}
			for i := start; i < min(start+chunk, n); i++ {
				w := mk(i)
				enc, err := encodeWatch(w)
				if err != nil {
					return err
				}
				batch.Queue(sqlWatchInsertFull, enc.args(w)...)
				batch.Queue(sqlMineTake, w.Recipient, 1, w.CreatedAt.UnixMilli())
				batch.Queue(sqlTotalAdd, stripe(w.ID), 1)
			}
			return tx.SendBatch(ctx, batch).Close()
		})
		if err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkWatchSettleBatch512 settles timers the way the scheduler does:
// 512 per call, each with its outcome message.
func BenchmarkWatchSettleBatch512(b *testing.B) {
	const batch = 512
	s := benchStore(b)
	bulkInsert(b, s, int64(b.N))
	out := &vigil.Outcome{State: vigil.StateFired, Sentence: "The timer set for 05:06 went off.", Reason: "satisfied",
		Observation: &vigil.Observation{Verdict: vigil.VerdictSatisfied, At: benchAt, Summary: "05:06 passed"}}
	all := make([]vigil.WatchSettleParams, b.N)
	for n := range all {
		w := benchWatch(int64(n))
		all[n] = vigil.WatchSettleParams{ID: w.ID, State: vigil.StateFired, Outcome: out, SettledAt: benchAt.Add(time.Hour), Polls: 1,
			Message: &vigil.Message{ID: fmt.Sprintf("01JMSG%020d", n), Recipient: w.Recipient, WatchID: w.ID,
				Type: vigil.MessageFired, Text: out.Sentence, CreatedAt: benchAt.Add(time.Hour)}}
	}
	b.ReportAllocs()
	b.ResetTimer()
	for start := 0; start < b.N; start += batch {
		ps := all[start:min(start+batch, b.N)]
		won, err := s.WatchSettle(context.Background(), ps)
		if err != nil {
			b.Fatal(err)
		}
		if !won[0] || !won[len(ps)-1] {
			b.Fatal("a settlement lost")
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "settles/s")
}

// BenchmarkWatchCreateReplicas registers from 32 goroutines spread over
// one or three stores on one schema, as replicas (Options.Notify, as the
// daemon opens them), each watch for a recipient of its own, as
// bench/peers' pg-register does: what the registrations of several
// replicas cost one another in the database (locks, commits).
func BenchmarkWatchCreateReplicas(b *testing.B) {
	for _, n := range []int{1, 3} {
		b.Run(fmt.Sprintf("stores=%d", n), func(b *testing.B) {
			u := benchSchema(b)
			stores := make([]*Store, n)
			for i := range stores {
				s, err := Open(context.Background(), u, &Options{MaxConns: 12, Notify: true})
				if err != nil {
					b.Fatal(err)
				}
				b.Cleanup(func() { s.Close() })
				stores[i] = s
			}
			var next, g atomic.Int64
			b.SetParallelism(max(1, 32/runtime.GOMAXPROCS(0)))
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				s := stores[int(g.Add(1))%n]
				for pb.Next() {
					i := next.Add(1)
					w := benchWatch(i)
					w.Recipient = fmt.Sprintf("agent-%d", i)
					w.Identity = vigil.Identity(w.Recipient, w.Kind, w.Mode, w.Predicate)
					if _, err := s.WatchCreate(context.Background(), vigil.WatchCreateParams{
						Watch: w, MaxActive: 100_000_000, MaxActivePerRecipient: 100_000_000,
					}); err != nil {
						b.Error(err)
						return
					}
				}
			})
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "creates/s")
		})
	}
}
