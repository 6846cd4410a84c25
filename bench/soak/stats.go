package main

import (
	"math"
	"slices"
	"sync"
	"time"
)

// sample is one look at the daemon and the load.
type sample struct {
	t          time.Time
	rss        float64       // bytes
	goroutines float64       // -1: not known
	heapLive   float64       // bytes; -1: not known
	pending    float64       // vigil_watches_pending; -1: not known
	longCalls  float64       // vigil_long_calls; -1: not known
	cpu        time.Duration // the daemon's
	selfCPU    time.Duration // the soak's own
	registered int64
	received   int64
	polls      int64
}

// samples is the run's time series.
type samples struct {
	mu sync.Mutex
	s  []sample
}

func (ss *samples) add(s sample) {
	ss.mu.Lock()
	ss.s = append(ss.s, s)
	ss.mu.Unlock()
}

func (ss *samples) all() []sample {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	return slices.Clone(ss.s)
}

// between returns the samples taken in [from, to].
func between(s []sample, from, to time.Time) []sample {
	var out []sample
	for _, x := range s {
		if !x.t.Before(from) && !x.t.After(to) {
			out = append(out, x)
		}
	}
	return out
}

// series is one figure over the samples it is known in.
type series struct {
	t []float64 // minutes since the first sample of the window
	v []float64
}

func seriesOf(s []sample, f func(sample) float64) series {
	var out series
	if len(s) == 0 {
		return out
	}
	t0 := s[0].t
	for _, x := range s {
		v := f(x)
		if v < 0 || math.IsNaN(v) {
			continue
		}
		out.t = append(out.t, x.t.Sub(t0).Minutes())
		out.v = append(out.v, v)
	}
	return out
}

// slope fits v = a + b·t by least squares and returns b (per minute), or
// NaN with fewer than three points.
func (s series) slope() float64 {
	n := float64(len(s.t))
	if n < 3 {
		return math.NaN()
	}
	var mt, mv float64
	for i := range s.t {
		mt += s.t[i]
		mv += s.v[i]
	}
	mt /= n
	mv /= n
	var num, den float64
	for i := range s.t {
		num += (s.t[i] - mt) * (s.v[i] - mv)
		den += (s.t[i] - mt) * (s.t[i] - mt)
	}
	if den == 0 {
		return math.NaN()
	}
	return num / den
}

func (s series) first() float64 { return at(s.v, 0) }
func (s series) last() float64  { return at(s.v, len(s.v)-1) }
func (s series) max() float64 {
	if len(s.v) == 0 {
		return math.NaN()
	}
	return slices.Max(s.v)
}

// median of the values in the part [from, to) of the series, as fractions
// of its length.
func (s series) median(from, to float64) float64 {
	n := len(s.v)
	a, b := int(math.Floor(from*float64(n))), int(math.Ceil(to*float64(n)))
	a, b = max(0, min(a, n)), max(0, min(b, n))
	if a >= b {
		return math.NaN()
	}
	v := slices.Clone(s.v[a:b])
	slices.Sort(v)
	return v[len(v)/2]
}

func at(v []float64, i int) float64 {
	if i < 0 || i >= len(v) {
		return math.NaN()
	}
	return v[i]
}

// quantiles of the values of xs at the indexes keep selects.
type quantiles struct {
	n                  int
	p50, p99, p999, mx int32
}

func quantilesOf(xs []int32, keep func(i int) bool) quantiles {
	var v []int32
	for i, x := range xs {
		if keep(i) {
			v = append(v, x)
		}
	}
	if len(v) == 0 {
		return quantiles{}
	}
	slices.Sort(v)
	q := func(p float64) int32 { return v[min(len(v)-1, int(math.Ceil(p*float64(len(v))))-1)] }
	return quantiles{n: len(v), p50: q(0.50), p99: q(0.99), p999: q(0.999), mx: v[len(v)-1]}
}

func (q quantiles) String() string {
	if q.n == 0 {
		return "n/a"
	}
	return ms(q.p50) + " p50, " + ms(q.p99) + " p99, " + ms(q.p999) + " p99.9, " + ms(q.mx) + " max"
}

func ms(v int32) string { return (time.Duration(v) * time.Millisecond).String() }
