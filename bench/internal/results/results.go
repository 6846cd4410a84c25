// Package results is the JSON form of a benchmark run's results: what
// bench/peers writes with -out and bench/charts reads to draw its SVG
// charts. A file holds every run of every scenario and peer of one
// invocation, each with its figures and, where the scenario keeps them,
// its per-wait lateness as a bounded set of quantiles.
package results

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"time"
)

// Format names this file layout; Read refuses any other.
const Format = "vigil-bench-results/1"

// Bounds on what Read accepts.
const (
	MaxFileBytes = 64 << 20 // one file
	MaxPoints    = 10_001   // quantiles in one Dist
	MaxRuns      = 100_000  // runs in one file
	MaxValues    = 64       // figures in one run
	maxName      = 200      // scenario, peer, label, a figure's name
)

// File is one invocation of a harness.
type File struct {
	Format  string   `json:"format"`
	Harness string   `json:"harness"` // "peers"
	Command []string `json:"command"` // the harness's arguments
	// Commit is the vigil checkout's `git describe --always`, with
	// "-dirty" when files outside bench/ differ from it; empty when it
	// could not be read.
	Commit    string    `json:"commit,omitempty"`
	GoVersion string    `json:"go"`
	CPUs      int       `json:"cpus"`
	Started   time.Time `json:"started"`
	Updated   time.Time `json:"updated"`
	// Load1 is the host's 1-minute load average when the invocation started.
	Load1 float64 `json:"load1"`
	Runs  []Run   `json:"runs"`
}

// Run is one run of one scenario against one peer.
type Run struct {
	Scenario string    `json:"scenario"` // storm, register, spread, idle, batch, …
	Peer     string    `json:"peer"`     // vigil, vigild, river, asynq, naive, polling, …
	Label    string    `json:"label"`    // the run's parameters, e.g. "conc=32 n=20000"
	Run      int       `json:"run"`      // 1, 2, … among the runs of this scenario and peer
	At       time.Time `json:"at"`       // when the run ended
	Load1    float64   `json:"load1"`    // the host's 1-minute load average then
	// Values are the run's figures, units in the names (per_s, p99_ms, …).
	Values map[string]float64 `json:"values"`
	// Lateness is each wait's settlement instant minus its own instant,
	// in milliseconds (storm, spread); nil where the scenario has none.
	Lateness *Dist `json:"lateness,omitempty"`
}

// Dist is a distribution of N samples kept as len(Q) evenly spaced order
// statistics: Q[i] is the sample of rank i·(N−1)/(len(Q)−1) (rounded) in
// ascending order, so Q[0] is the minimum and Q[len(Q)−1] the maximum,
// and about 1 + i·(N−1)/(len(Q)−1) samples are ≤ Q[i]. With N ≤ the
// points asked for, Q holds every sample.
type Dist struct {
	N int       `json:"n"`
	Q []float64 `json:"q"`
}

// NewDist keeps at most points (≥ 2) order statistics of samples; it
// sorts a copy. Nil for no samples.
func NewDist(samples []float64, points int) *Dist {
	if len(samples) == 0 {
		return nil
	}
	s := slices.Clone(samples)
	slices.Sort(s)
	points = max(2, min(points, MaxPoints))
	if len(s) <= points {
		points = len(s)
	}
	q := make([]float64, points)
	for i := range q {
		q[i] = micro(s[int(math.Round(float64(i)*float64(len(s)-1)/float64(max(1, points-1))))])
	}
	return &Dist{N: len(s), Q: q}
}

// micro rounds to 0.001: a microsecond when the unit is milliseconds,
// finer than any clock the harness reads a settlement from.
func micro(v float64) float64 { return math.Round(v*1000) / 1000 }

// Count is how many of the N samples are at most Q[i] (as far as the
// kept points tell).
func (d *Dist) Count(i int) float64 {
	if len(d.Q) < 2 {
		return float64(d.N)
	}
	return 1 + float64(i)*float64(d.N-1)/float64(len(d.Q)-1)
}

// Write stores f at path as JSON, whole or not at all (a temporary file
// renamed over it).
func Write(path string, f *File) error {
	b, err := json.Marshal(f)
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".results-*.json")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(append(b, '\n')); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Chmod(tmp.Name(), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

// Read loads and checks one results file.
func Read(path string) (*File, error) {
	fh, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer fh.Close()
	b, err := io.ReadAll(io.LimitReader(fh, MaxFileBytes+1))
	if err != nil {
		return nil, err
	}
	if len(b) > MaxFileBytes {
		return nil, fmt.Errorf("%s: larger than %d bytes", path, MaxFileBytes)
	}
	var f File
	if err := json.Unmarshal(b, &f); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if err := f.Check(); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return &f, nil
}

// Check reports the first thing in f that a chart could not trust.
func (f *File) Check() error {
	if f.Format != Format {
		return fmt.Errorf("format %q, want %q", f.Format, Format)
	}
	if len(f.Runs) > MaxRuns {
		return fmt.Errorf("%d runs, at most %d", len(f.Runs), MaxRuns)
	}
	for i, r := range f.Runs {
		if err := r.check(); err != nil {
			return fmt.Errorf("run %d (%s %s): %w", i, r.Scenario, r.Peer, err)
		}
	}
	return nil
}

func (r *Run) check() error {
	for _, s := range []string{r.Scenario, r.Peer, r.Label} {
		if s == "" || len(s) > maxName {
			return fmt.Errorf("scenario, peer and label must be 1 to %d bytes", maxName)
		}
	}
	if len(r.Values) > MaxValues {
		return fmt.Errorf("%d values, at most %d", len(r.Values), MaxValues)
	}
	for k, v := range r.Values {
		if k == "" || len(k) > maxName {
			return errors.New("a value's name must be 1 to 200 bytes")
		}
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return fmt.Errorf("value %s is not a finite number", k)
		}
	}
	if d := r.Lateness; d != nil {
		if len(d.Q) == 0 || len(d.Q) > MaxPoints {
			return fmt.Errorf("lateness: %d points, want 1 to %d", len(d.Q), MaxPoints)
		}
		if d.N < len(d.Q) {
			return fmt.Errorf("lateness: %d points of %d samples", len(d.Q), d.N)
		}
		for i, q := range d.Q {
			if math.IsNaN(q) || math.IsInf(q, 0) {
				return errors.New("lateness: a point is not a finite number")
			}
			if i > 0 && q < d.Q[i-1] {
				return errors.New("lateness: points not in ascending order")
			}
		}
	}
	return nil
}
