package sqlite

import (
	"context"
	"testing"
	"time"

	"github.com/vigil-run/vigil"
	"github.com/vigil-run/vigil/internal/cputime"
)

// BenchmarkWatchListFilters reads the first page (50 watches, as the web
// panel shows) of 100 000 watches under each one filter the panel offers,
// including a text and a label that match nothing, which no index on
// the list's order can stop early, and the counts by state the panel
// shows above the list. An op is one page; cpu-ms/op is this process's
// CPU time per op (user and system), which a loaded machine disturbs less
// than the time. Run it with
//
//	go test -run '^$' -bench WatchListFilters -benchtime 20x ./store/sqlite
func BenchmarkWatchListFilters(b *testing.B) {
	const n = 100_000
	s := benchStore(b)
	bulkInsert(b, s, 0, n)
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		p    vigil.WatchListParams
	}{
		{"none", vigil.WatchListParams{}},
		{"recipient", vigil.WatchListParams{Recipient: "agent-7"}},
		{"state-pending", vigil.WatchListParams{State: vigil.StatePending}},
		{"state-fired-none", vigil.WatchListParams{State: vigil.StateFired}},
		{"kind-none", vigil.WatchListParams{Kind: vigil.KindHTTP}},
		{"label", vigil.WatchListParams{Labels: map[string]string{"task": "T-19"}}},
		{"label-none", vigil.WatchListParams{Labels: map[string]string{"task": "T-20"}}},
		{"text-many", vigil.WatchListParams{Text: "merge"}},
		{"text-one", vigil.WatchListParams{Text: "0000000000000000000000000000000000001234"}},
		{"text-none", vigil.WatchListParams{Text: "no such words"}},
	} {
		tc.p.Limit = 50
		b.Run("list-"+tc.name, func(b *testing.B) {
			cpu0 := cputime.Self()
			for b.Loop() {
				if _, err := s.WatchList(ctx, tc.p); err != nil {
					b.Fatal(err)
				}
			}
			reportCPU(b, cpu0)
		})
	}
	// The counts by state the panel shows above the list.
	b.Run("counts", func(b *testing.B) {
		cpu0 := cputime.Self()
		for b.Loop() {
			if _, err := s.WatchCounts(ctx, nil); err != nil {
				b.Fatal(err)
			}
		}
		reportCPU(b, cpu0)
	})
	b.Run("counts-recipient", func(b *testing.B) {
		cpu0 := cputime.Self()
		for b.Loop() {
			if _, err := s.WatchCounts(ctx, []string{"agent-7"}); err != nil {
				b.Fatal(err)
			}
		}
		reportCPU(b, cpu0)
	})
}

// reportCPU reports the CPU time per op since cpu0.
func reportCPU(b *testing.B, cpu0 time.Duration) {
	b.ReportMetric(float64(cputime.Self()-cpu0)/float64(time.Millisecond)/float64(b.N), "cpu-ms/op")
}
