package sqlite

import (
	"context"
	"fmt"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vigil-run/vigil"
	"github.com/vigil-run/vigil/internal/cputime"
)

// The benchmarks run with synchronous=FULL, as the store does in
// production: every commit is fsynced. Run them with, for example,
//
//	go test ./store/sqlite -run XXX -bench . -benchtime 20000x
//
// An op is one create, one settlement or one listed row, so one -benchtime
// Nx fits them all.

var benchAt = time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)

// benchWatch is a typical pending watch: a ci watch on a SHA, with a note
// and a label.
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

func benchStore(b *testing.B) *Store {
	b.Helper()
	s := open(b, filepath.Join(b.TempDir(), "bench.db"), nil)
	b.Cleanup(func() { s.Close() })
	return s
}

func benchCreate(s *Store, i int64) error {
	_, err := s.WatchCreate(context.Background(), vigil.WatchCreateParams{
		Watch: benchWatch(i), MaxActive: 100_000_000, MaxActivePerRecipient: 100_000_000,
	})
	return err
}

// BenchmarkCommitFloor is the floor under every write on this disk: one
// transaction that changes one row, committed with its fsync.
func BenchmarkCommitFloor(b *testing.B) {
	s := benchStore(b)
	b.ResetTimer()
	for i := range b.N {
		err := s.w.do(context.Background(), func(t *wtx) error {
			_, err := t.exec(t.pendingTotalAdd, i%2*2-1)
			return err
		})
		if err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "commits/s")
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

// BenchmarkWatchCreateParallel registers from 32 goroutines at once: group
// commit puts the waiting ones in one transaction.
func BenchmarkWatchCreateParallel(b *testing.B) {
	s := benchStore(b)
	var n atomic.Int64
	b.ReportAllocs()
	b.SetParallelism(max(1, 32/runtime.GOMAXPROCS(0)))
	b.ResetTimer()
	cpu0 := cputime.Self()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if err := benchCreate(s, n.Add(1)); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "creates/s")
	b.ReportMetric(float64(cputime.Self()-cpu0)/float64(time.Microsecond)/float64(b.N), "cpu-µs/create")
}

// BenchmarkWatchCreateMany creates watches 1 000 per WatchCreateMany (one
// transaction, one commit each) on a store that already holds 100 000,
// each with an idempotency key: the store's part of POST
// /v1/watches/batch. An op is one watch.
func BenchmarkWatchCreateMany(b *testing.B) {
	s := benchStore(b)
	bulkInsert(b, s, 1_000_000, 100_000)
	b.ReportAllocs()
	b.ResetTimer()
	ps := make([]vigil.WatchCreateParams, 0, vigil.MaxBatch)
	cpu0 := cputime.Self()
	for done := 0; done < b.N; {
		ps = ps[:0]
		for j := range min(vigil.MaxBatch, b.N-done) {
			i := int64(done + j)
			ps = append(ps, vigil.WatchCreateParams{Watch: benchWatch(i), MaxActive: 100_000_000, MaxActivePerRecipient: 100_000_000,
				IdempotencyKey: fmt.Sprintf("key-%d", i), RequestHash: "h", IdempotencySince: benchAt.Add(-time.Hour)})
		}
		res, err := s.WatchCreateMany(context.Background(), ps)
		if err != nil {
			b.Fatal(err)
		}
		for _, r := range res {
			if r.Err != nil || r.Watch.Existing {
				b.Fatal(r.Err)
			}
		}
		done += len(ps)
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "creates/s")
	b.ReportMetric(float64(cputime.Self()-cpu0)/float64(time.Microsecond)/float64(b.N), "cpu-µs/create")
}

// bulkInsert writes n watches in large transactions, for benchmark setup.
func bulkInsert(b testing.TB, s *Store, from, n int64) {
	b.Helper()
	const chunk = 10_000
	for start := from; start < from+n; start += chunk {
		err := s.w.do(context.Background(), func(t *wtx) error {
			var last int64
			if err := t.queryRow(t.watchMaxRowid).Scan(&last); err != nil {
				return err
			}
			for i := start; i < min(start+chunk, from+n); i++ {
				w := benchWatch(i)
				enc, err := encodeWatch(w)
				if err != nil {
					return err
				}
				if _, err := t.exec(t.watchInsert, enc.args(w)...); err != nil {
					return err
				}
				if err := addPending(t, 1); err != nil {
					return err
				}
			}
			return indexNew(t, last+1)
		})
		if err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkWatchSettleBatch512 settles timers the way the scheduler does:
// 512 per call, each with its outcome message. An op is one settlement, so
// -benchtime 100000x settles 100 000 watches in 196 calls.
func BenchmarkWatchSettleBatch512(b *testing.B) {
	const batch = 512
	s := benchStore(b)
	bulkInsert(b, s, 0, int64(b.N))
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

// BenchmarkWatchSettleStorm settles the storm of bench/peers: timers due
// at one instant, each with a recipient of its own (so no two share a row
// of counters or watch_counts) and the identity vigil.Identity gives it
// (a hash, so a batch's entries of watches_identity_pending are spread
// over that index, as in the daemon), 512 per call with their outcome
// messages, from the scheduler's 8 workers at once (so the writer commits
// several calls together, each in its savepoint, as in the daemon), and
// reports the store's CPU per settlement. -benchtime 20000x is the
// storm's 20 000.
func BenchmarkWatchSettleStorm(b *testing.B) {
	const batch = 512
	s := benchStore(b)
	ps := make([]vigil.WatchCreateParams, 0, 1000)
	for start := 0; start < b.N; start += cap(ps) {
		ps = ps[:0]
		for i := start; i < min(start+cap(ps), b.N); i++ {
			r, pred := fmt.Sprintf("r%d", i), []byte(`{"at":"2026-03-04T06:06:07Z"}`)
			ps = append(ps, vigil.WatchCreateParams{Watch: &vigil.Watch{ID: fmt.Sprintf("01JSTORM%018d", i), Kind: vigil.KindTimer,
				Recipient: r, Predicate: pred, Note: fmt.Sprint(i),
				Identity: vigil.Identity(r, vigil.KindTimer, vigil.ModeUntil, pred), CreatedAt: benchAt, Deadline: benchAt.Add(2 * time.Hour)}})
		}
		if _, err := s.WatchCreateMany(context.Background(), ps); err != nil {
			b.Fatal(err)
		}
	}
	out := &vigil.Outcome{State: vigil.StateFired, Sentence: "The timer set for 06:06 went off.", Reason: "satisfied",
		Observation: &vigil.Observation{Verdict: vigil.VerdictSatisfied, At: benchAt, Summary: "06:06 passed"}}
	all := make([]vigil.WatchSettleParams, b.N)
	for n := range all {
		all[n] = vigil.WatchSettleParams{ID: fmt.Sprintf("01JSTORM%018d", n), State: vigil.StateFired, Outcome: out,
			SettledAt: benchAt.Add(time.Hour), Polls: 1, Message: &vigil.Message{ID: fmt.Sprintf("01JMSG%020d", n),
				Type: vigil.MessageFired, Text: out.Sentence, CreatedAt: benchAt.Add(time.Hour)}}
	}
	b.ReportAllocs()
	b.ResetTimer()
	cpu0 := cputime.Self()
	var next atomic.Int64
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for {
				start := int(next.Add(batch)) - batch
				if start >= b.N {
					return
				}
				ps := all[start:min(start+batch, b.N)]
				won, err := s.WatchSettle(context.Background(), ps)
				if err != nil {
					b.Error(err)
					return
				}
				if !won[0] || !won[len(ps)-1] {
					b.Error("a settlement lost")
					return
				}
			}
		})
	}
	wg.Wait()
	b.ReportMetric(float64(cputime.Self()-cpu0)/float64(time.Microsecond)/float64(b.N), "cpu-µs/settle")
}

// BenchmarkWatchListPending reads every pending watch, as the scheduler does
// at start-up, and reports the bytes each takes on disk. An op is one
// watch: -benchtime 1000000x builds a million rows first (which takes a
// while) and lists them once.
func BenchmarkWatchListPending(b *testing.B) {
	path := filepath.Join(b.TempDir(), "bench.db")
	s := open(b, path, nil)
	b.Cleanup(func() { s.Close() })
	bulkInsert(b, s, 0, int64(b.N))
	var pageSize, pages, freelist int64
	for q, dst := range map[string]*int64{"PRAGMA page_size": &pageSize, "PRAGMA page_count": &pages, "PRAGMA freelist_count": &freelist} {
		if err := s.readDB.QueryRow(q).Scan(dst); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	b.ResetTimer()
	got, err := s.WatchListPending(context.Background())
	if err != nil {
		b.Fatal(err)
	}
	b.StopTimer()
	if len(got) != b.N {
		b.Fatalf("WatchListPending returned %d rows, want %d", len(got), b.N)
	}
	b.ReportMetric(float64((pages-freelist)*pageSize)/float64(b.N), "disk-B/watch")
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "rows/s")
}

// BenchmarkWatchGetMany reads watches by id as the scheduler does for each
// batch of due timers: one at a time (a steady flow) and 512 at once (a
// storm). An op is one batch.
func BenchmarkWatchGetMany(b *testing.B) {
	s := benchStore(b)
	bulkInsert(b, s, 0, 10_000)
	for _, n := range []int{1, 512} {
		b.Run(fmt.Sprintf("batch=%d", n), func(b *testing.B) {
			ids := make([]string, n)
			i := 0
			for b.Loop() {
				for j := range ids {
					ids[j] = benchWatch(int64(i % 10_000)).ID
					i++
				}
				got, err := s.WatchGetMany(context.Background(), ids)
				if err != nil || len(got) != n {
					b.Fatalf("WatchGetMany = %d watches, %v; want %d", len(got), err, n)
				}
			}
		})
	}
}
