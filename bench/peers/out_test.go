package main

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/vigil-run/vigil/bench/internal/results"
)

// A run's lateness is kept as at most latenessPoints order statistics
// whatever n, and -out's file reads back as written.
func TestRunLogWritesBoundedLateness(t *testing.T) {
	late := make([]time.Duration, 100_000)
	for i := range late {
		late[i] = time.Duration(len(late)-i) * time.Microsecond // 0.001 – 100 ms, descending
	}
	path := filepath.Join(t.TempDir(), "results", "storm.json")
	l := newRunLog(path)
	l.add("storm", "vigild", 1, []result{{label: "n=100000", values: map[string]float64{"all_settled_ms": 100},
		lateness: lateDist(late)}})
	if err := l.flush(); err != nil {
		t.Fatal(err)
	}
	f, err := results.Read(path)
	if err != nil {
		t.Fatal(err)
	}
	if f.Harness != "peers" || len(f.Runs) != 1 {
		t.Fatalf("harness %q, %d runs; want peers, 1", f.Harness, len(f.Runs))
	}
	r := f.Runs[0]
	if r.Scenario != "storm" || r.Peer != "vigild" || r.Run != 1 || r.Values["all_settled_ms"] != 100 {
		t.Fatalf("run read back as %+v", r)
	}
	d := r.Lateness
	if d == nil {
		t.Fatal("no lateness read back")
	}
	if d.N != 100_000 || len(d.Q) != latenessPoints {
		t.Fatalf("lateness of n %d in %d points; want n 100000 in %d", d.N, len(d.Q), latenessPoints)
	}
	if d.Q[0] != 0.001 || d.Q[len(d.Q)-1] != 100 {
		t.Fatalf("lateness from %v to %v ms; want 0.001 to 100", d.Q[0], d.Q[len(d.Q)-1])
	}
}
