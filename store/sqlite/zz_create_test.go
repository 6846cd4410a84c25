package sqlite

import (
	"runtime"
	"sync/atomic"
	"testing"
)

func BenchmarkZZCreateCPU(b *testing.B) {
	s := benchStore(b)
	var n atomic.Int64
	b.SetParallelism(max(1, 32/runtime.GOMAXPROCS(0)))
	b.ResetTimer()
	cpu0 := processCPU()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if err := benchCreate(s, n.Add(1)); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.ReportMetric(float64(processCPU()-cpu0)/1e3/float64(b.N), "cpu-us/op")
}
