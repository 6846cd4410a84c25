package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/vigil-run/vigil/bench/internal/charts"
	"github.com/vigil-run/vigil/bench/internal/results"
)

// latenessPoints bounds the lateness kept per run for -out, whatever n.
const latenessPoints = 1001

// lateDist is a run's per-wait lateness as a bounded distribution in ms.
func lateDist(late []time.Duration) *results.Dist {
	ms := make([]float64, len(late))
	for i, d := range late {
		ms[i] = float64(d) / float64(time.Millisecond)
	}
	return results.NewDist(ms, latenessPoints)
}

// runLog collects every run for -out and rewrites the file after each
// peer, so a run cut short keeps what it measured.
type runLog struct {
	path string
	f    results.File
}

func newRunLog(path string) *runLog {
	l := &runLog{path: path, f: results.File{
		Format: results.Format, Harness: "peers", Command: os.Args[1:],
		Commit: vigilCommit(), GoVersion: runtime.Version(), CPUs: runtime.NumCPU(),
		Started: time.Now().UTC(), Load1: load1(),
	}}
	return l
}

// add records one run's results (several for a scenario with several
// labels, such as register's two concurrencies).
func (l *runLog) add(sc, peer string, run int, rs []result) {
	now, ld := time.Now().UTC(), load1()
	for _, r := range rs {
		l.f.Runs = append(l.f.Runs, results.Run{Scenario: sc, Peer: peer, Label: r.label, Run: run,
			At: now, Load1: ld, Values: r.values, Lateness: r.lateness})
	}
}

// flush writes the file if -out asked for one.
func (l *runLog) flush() error {
	if l.path == "" {
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(l.path), 0o755); err != nil {
		return err
	}
	l.f.Updated = time.Now().UTC()
	if err := results.Write(l.path, &l.f); err != nil {
		return fmt.Errorf("-out: %w", err)
	}
	return nil
}

// draw renders the charts of every results file beside -out into dir
// (nothing when dir is empty).
func (l *runLog) draw(dir string) error {
	if dir == "" {
		return nil
	}
	written, err := charts.Render(filepath.Dir(l.path), dir)
	if err != nil {
		return fmt.Errorf("-charts: %w", err)
	}
	for _, w := range written {
		fmt.Println("chart", w)
	}
	return nil
}

// load1 is the host's 1-minute load average (0 if unreadable).
func load1() float64 {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 0
	}
	v, _ := strconv.ParseFloat(f[0], 64)
	return v
}

// vigilCommit describes the vigil checkout being measured: its commit,
// "-dirty" when files outside bench/ differ from it.
func vigilCommit() string {
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "github.com/vigil-run/vigil").Output()
	if err != nil {
		return ""
	}
	dir := strings.TrimSpace(string(out))
	git := func(args ...string) string {
		cmd := exec.Command("git", args...)
		cmd.Dir = dir
		b, err := cmd.Output()
		if err != nil {
			return ""
		}
		return strings.TrimSpace(string(b))
	}
	c := git("describe", "--always")
	// Edits under bench/ change the harness, not what it measures.
	if c != "" && git("status", "--porcelain", "--untracked-files=no", "--", ".", ":(exclude)bench") != "" {
		c += "-dirty"
	}
	return c
}

// schedCPU sums the run time of every thread of pids
// (/proc/PID/task/*/schedstat, nanoseconds): finer than the 10 ms ticks
// of usage, which round an idle minute to 0.
func schedCPU(pids []int) time.Duration {
	var total time.Duration
	for _, pid := range pids {
		tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/schedstat", pid))
		for _, t := range tasks {
			b, err := os.ReadFile(t)
			if err != nil {
				continue
			}
			f := strings.Fields(string(b))
			if len(f) == 0 {
				continue
			}
			ns, _ := strconv.ParseInt(f[0], 10, 64)
			total += time.Duration(ns)
		}
	}
	return total
}
