package results

import (
	"slices"
	"testing"
)

func TestNewDist(t *testing.T) {
	var s []float64
	for i := range 10_000 {
		s = append(s, float64(9_999-i)) // descending: NewDist sorts
	}
	d := NewDist(s, 101)
	if d.N != 10_000 || len(d.Q) != 101 {
		t.Fatalf("N %d, %d points; want 10000, 101", d.N, len(d.Q))
	}
	if d.Q[0] != 0 || d.Q[100] != 9_999 || d.Q[50] != 5_000 {
		t.Fatalf("min %v, median %v, max %v; want 0, 5000, 9999", d.Q[0], d.Q[50], d.Q[100])
	}
	if c := d.Count(50); c != 5_000.5 {
		t.Fatalf("Count(50) = %v, want 5000.5", c)
	}
	small := NewDist([]float64{3, 1, 2}, 101)
	if !slices.Equal(small.Q, []float64{1, 2, 3}) || small.Count(2) != 3 {
		t.Fatalf("3 samples kept as %v (count of the last %v), want every sample", small.Q, small.Count(2))
	}
	if NewDist(nil, 101) != nil {
		t.Fatal("a distribution of no samples")
	}
}
