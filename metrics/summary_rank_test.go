package metrics_test

import (
	"testing"
	"time"

	"github.com/vigil-run/vigil"
	"github.com/vigil-run/vigil/metrics"
)

// TestProbesP99TakesTheSlowOne: of 2 probes, one 0.5ms late and one 20s
// late, p99 (and p90) must be in the 20s probe's bucket (30s), not 1ms:
// the rank of quantile q among n samples is ceil(q*n), not floor(q*n).
func TestProbesP99TakesTheSlowOne(t *testing.T) {
	m := metrics.New(metrics.Gauges{})
	m.Probed(vigil.KindHTTP, vigil.VerdictPending, 500*time.Microsecond, 0)
	m.Probed(vigil.KindHTTP, vigil.VerdictPending, 20*time.Second, 0)
	ps := m.Probes(0.5, 0.9, 0.99)
	if got := ps.Lateness[0.5]; got != time.Millisecond {
		t.Errorf("p50 = %v, want 1ms", got)
	}
	for _, q := range []float64{0.9, 0.99} {
		if got := ps.Lateness[q]; got != 30*time.Second {
			t.Errorf("p%g = %v, want 30s (the bucket of the 20s-late probe)", q*100, got)
		}
	}
}
