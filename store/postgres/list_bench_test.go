package postgres

import (
	"context"
	"testing"

	"github.com/vigil-run/vigil"
)

// BenchmarkWatchListFilters is store/sqlite's: the first page (50
// watches) of 100 000 under each one filter the panel offers, and the
// counts by state above the list. An op is one page; the time is the
// client's wall time, PostgreSQL's own work included (it runs in its own
// processes). Run it with
//
//	VIGIL_TEST_POSTGRES=postgres://… go test ./store/postgres -run '^$' -bench WatchListFilters -benchtime 10x
func BenchmarkWatchListFilters(b *testing.B) {
	const n = 100_000
	s := benchStore(b)
	bulkInsert(b, s, n)
	ctx := context.Background()
	if _, err := s.pool.Exec(ctx, "ANALYZE watches, watch_text"); err != nil {
		b.Fatal(err)
	}
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
			for b.Loop() {
				if _, err := s.WatchList(ctx, tc.p); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
	b.Run("counts", func(b *testing.B) {
		for b.Loop() {
			if _, err := s.WatchCounts(ctx, nil); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("counts-recipient", func(b *testing.B) {
		for b.Loop() {
			if _, err := s.WatchCounts(ctx, []string{"agent-7"}); err != nil {
				b.Fatal(err)
			}
		}
	})
}
