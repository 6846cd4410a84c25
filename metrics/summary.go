package metrics

import (
	"math"
	"sort"
	"time"
)

// ProbeSummary is what the panel's status page shows of the probes made
// since the start: how many, and percentiles of how late they started,
// estimated from the lateness histogram's buckets (the upper bound of the
// bucket the percentile falls in).
type ProbeSummary struct {
	Probes   uint64
	Lateness map[float64]time.Duration
}

// Probes returns the ProbeSummary for the quantiles qs (0.5, 0.99...).
func (m *Metrics) Probes(qs ...float64) ProbeSummary {
	out := ProbeSummary{Lateness: map[float64]time.Duration{}}
	fams, err := m.reg.Gather()
	if err != nil {
		return out
	}
	buckets := map[float64]uint64{} // upper bound -> cumulative count, summed over kinds
	for _, f := range fams {
		if f.GetName() != "vigil_probe_lateness_seconds" {
			continue
		}
		for _, mt := range f.GetMetric() {
			h := mt.GetHistogram()
			out.Probes += h.GetSampleCount()
			for _, b := range h.GetBucket() {
				buckets[b.GetUpperBound()] += b.GetCumulativeCount()
			}
		}
	}
	if out.Probes == 0 {
		return out
	}
	bounds := make([]float64, 0, len(buckets))
	for b := range buckets {
		bounds = append(bounds, b)
	}
	sort.Float64s(bounds)
	for _, q := range qs {
		// The rank of q among n samples is ceil(q·n): the p99 of two
		// probes is the later one. (The epsilon keeps 0.9·10 at 9.)
		rank := uint64(math.Ceil(q*float64(out.Probes) - 1e-9))
		v := bounds[len(bounds)-1]
		for _, b := range bounds {
			if buckets[b] >= max(rank, 1) {
				v = b
				break
			}
		}
		out.Lateness[q] = time.Duration(v * float64(time.Second))
	}
	return out
}
