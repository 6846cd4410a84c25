package postgres

import (
	"fmt"
	"sync/atomic"
	"testing"
	"time"
)

// BenchmarkRateTake is what the registration rate limit adds to each
// registration of a scoped token on PostgreSQL: one take from one of 100
// buckets (tokens), from 8 goroutines, never refused (the bucket is
// large).
func BenchmarkRateTake(b *testing.B) {
	s := benchStore(b)
	var n atomic.Int64
	b.SetParallelism(4)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			i := n.Add(1)
			ok, _, err := s.RateTake(b.Context(), RateTakeParams{Key: fmt.Sprintf("tok_%d", i%100), Rate: 1, Burst: 1 << 30, N: 1,
				Now: benchAt.Add(time.Duration(i) * time.Millisecond)})
			if err != nil || !ok {
				b.Fatalf("RateTake = %v, %v", ok, err)
			}
		}
	})
}
