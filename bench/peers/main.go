// Command peers runs the same waiting scenarios against vigil and its
// peers, side by side: River (PostgreSQL), asynq (Redis), a goroutine with
// a timer per wait, a goroutine polling every second per wait, vigil's
// engine in-process and the real vigil daemon over HTTP. It prints one
// line per peer and scenario. See docs/BENCHMARKS.md.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/vigil-run/vigil"
	"github.com/vigil-run/vigil/bench/internal/results"
)

var allPeers = []string{"naive", "polling", "vigil", "vigild", "river", "asynq"}

func main() {
	scenario := flag.String("scenario", "storm", "storm | register | batch | idle | spread | pg-idle | pg-register | pg-storm (comma-separated; pg-*: see -pg-peers)")
	peers := flag.String("peers", strings.Join(allPeers, ","), "peers to run (comma-separated): "+strings.Join(allPeers, ", "))
	runs := flag.Int("runs", 1, "runs of each scenario per peer (the median is printed with the range)")
	n := flag.Int("n", 0, "waits (0: the scenario's default: storm 20 000, register 20 000 (2 000 at concurrency 1), idle 100 000, spread 1 000)")
	lead := flag.Duration("lead", 20*time.Second, "storm: how far ahead of the instant the waits are registered")
	batchSize := flag.Int("batch", vigil.MaxBatch, "batch: waits per call")
	idleFor := flag.Duration("idle", time.Minute, "idle: how long to measure")
	pgURL := flag.String("postgres", "postgres://postgres@127.0.0.1:5432/test?sslmode=disable", "PostgreSQL for River")
	redisAddr := flag.String("redis", "127.0.0.1:6379", "Redis for asynq")
	out := flag.String("out", "", "also write every run's results as JSON to this file, e.g. results/storm.json (charts: go run ./charts)")
	chartsTo := flag.String("charts", "", "with -out: at the end, draw the charts of every results file in -out's folder into this folder, e.g. ../docs/bench")
	flag.Parse()
	log.SetFlags(0)
	log.SetPrefix("peers: ")
	ctx := context.Background()

	bin, cleanup, err := buildVigil()
	if err != nil {
		log.Fatal(err)
	}
	defer cleanup()
	saved := newRunLog(*out)
	if *chartsTo != "" && *out == "" {
		log.Fatal("-charts needs -out")
	}
	open := func(name string, n int) (peer, error) {
		switch name {
		case "naive":
			return newNaive(n), nil
		case "polling":
			return newPolling(n), nil
		case "vigil":
			return newInproc(ctx, n)
		case "vigild":
			return newServed(ctx, n, bin)
		case "river":
			return newRiver(ctx, n, *pgURL)
		case "asynq":
			return newAsynq(n, *redisAddr)
		}
		return nil, fmt.Errorf("unknown peer %q", name)
	}
	for _, sc := range strings.Split(*scenario, ",") {
		pg := pgConfig{bin: bin, admin: *pgURL, runs: *runs, n: *n, lead: *lead, idle: *idleFor}
		if ok, err := runPG(ctx, sc, pg); ok {
			if err != nil {
				log.Fatal(err)
			}
			continue
		}
		for _, name := range strings.Split(*peers, ",") {
			var lines []result
			for run := range *runs {
				var res []result
				var err error
				switch sc {
				case "storm":
					res, err = storm(ctx, open, name, cmpOr(*n, 20_000), *lead)
				case "register":
					res, err = register(ctx, open, name, cmpOr(*n, 20_000))
				case "batch":
					res, err = batch(ctx, open, name, cmpOr(*n, 100_000), *batchSize)
				case "spread":
					res, err = spread(ctx, open, name, cmpOr(*n, 1000))
				case "idle":
					res, err = idle(ctx, open, name, cmpOr(*n, 100_000), *idleFor)
				default:
					err = fmt.Errorf("unknown scenario %q", sc)
				}
				if err != nil {
					log.Fatalf("%s %s: %v", sc, name, err)
				}
				lines = append(lines, res...)
				saved.add(sc, name, run+1, res)
			}
			report(sc, name, lines)
			if err := saved.flush(); err != nil {
				log.Fatal(err)
			}
		}
	}
	if err := saved.draw(*chartsTo); err != nil {
		log.Fatal(err)
	}
}

func cmpOr(a, b int) int {
	if a != 0 {
		return a
	}
	return b
}

// result is one run's figures: name -> value, with units in the name.
type result struct {
	label  string
	values map[string]float64
	// lateness is each wait's, bounded (-out); nil where there is none.
	lateness *results.Dist
}

// report prints, per label, each figure's median over the runs and its range.
func report(sc, peer string, rs []result) {
	byLabel := map[string][]result{}
	var order []string
	for _, r := range rs {
		if _, ok := byLabel[r.label]; !ok {
			order = append(order, r.label)
		}
		byLabel[r.label] = append(byLabel[r.label], r)
	}
	for _, label := range order {
		runs := byLabel[label]
		var keys []string
		for k := range runs[0].values {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		var parts []string
		for _, k := range keys {
			var vs []float64
			for _, r := range runs {
				vs = append(vs, r.values[k])
			}
			slices.Sort(vs)
			med := vs[len(vs)/2]
			if len(vs) > 1 {
				parts = append(parts, fmt.Sprintf("%s=%s [%s–%s]", k, num(med), num(vs[0]), num(vs[len(vs)-1])))
			} else {
				parts = append(parts, fmt.Sprintf("%s=%s", k, num(med)))
			}
		}
		fmt.Printf("%-8s %-8s %-14s runs=%d %s\n", sc, peer, label, len(runs), strings.Join(parts, " "))
	}
}

func num(v float64) string {
	switch {
	case v == 0:
		return "0"
	case v >= 100 || v <= -100:
		return strconv.FormatFloat(v, 'f', 0, 64)
	default:
		return strconv.FormatFloat(v, 'f', 3, 64)
	}
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// registerAll registers waits [0, n) from conc goroutines, waits i due at
// at(i); it returns the latency of every call.
func registerAll(ctx context.Context, p peer, n, conc int, at func(i int) time.Time) ([]time.Duration, time.Duration, error) {
	lat := make([]time.Duration, n)
	var next atomic.Int64
	var wg sync.WaitGroup
	var first atomic.Pointer[error]
	start := time.Now()
	for range conc {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= n || first.Load() != nil {
					return
				}
				t := time.Now()
				if err := p.Register(ctx, i, at(i)); err != nil {
					first.CompareAndSwap(nil, &err)
					return
				}
				lat[i] = time.Since(t)
			}
		})
	}
	wg.Wait()
	if e := first.Load(); e != nil {
		return nil, 0, *e
	}
	return lat, time.Since(start), nil
}

// waitSettled polls the peer until every wait has settled or giveUp passes.
func waitSettled(ctx context.Context, p peer, n int, giveUp time.Time) ([]time.Time, error) {
	for {
		got, err := p.Settled(ctx)
		if err != nil {
			return nil, err
		}
		done := 0
		for _, t := range got {
			if !t.IsZero() {
				done++
			}
		}
		if done == n {
			return got, nil
		}
		if time.Now().After(giveUp) {
			return nil, fmt.Errorf("%d of %d settled by the time limit", done, n)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func quantile(s []time.Duration, q float64) time.Duration {
	if len(s) == 0 {
		return 0
	}
	s = slices.Clone(s)
	slices.Sort(s)
	return s[min(len(s)-1, int(q*float64(len(s))))]
}

// completer is a peer that knows when its last wait settled better than
// its per-wait instants say.
type completer interface{ Completed() time.Time }

// completedCPU is a peer that also knows its processes' CPU (usage) at
// that moment, before it lists every wait.
type completedCPU interface{ CompletedCPU() time.Duration }

// storm: n waits due at one instant T; how long after T until every one
// has settled, and each one's lateness.
func storm(ctx context.Context, open func(string, int) (peer, error), name string, n int, lead time.Duration) ([]result, error) {
	p, err := open(name, n)
	if err != nil {
		return nil, err
	}
	defer p.Close()
	at := time.Now().Add(lead).Truncate(time.Millisecond)
	if _, _, err := registerAll(ctx, p, n, 32, func(int) time.Time { return at }); err != nil {
		return nil, err
	}
	if time.Until(at) < time.Second {
		return nil, fmt.Errorf("registration ended %v before the instant: raise -lead", time.Until(at))
	}
	// The peer's CPU from just before the instant: what the storm costs
	// it, which a loaded machine disturbs less than how long it takes.
	time.Sleep(time.Until(at.Add(-100 * time.Millisecond)))
	cpu0, _ := usage(p.Pids())
	got, err := waitSettled(ctx, p, n, at.Add(3*time.Minute))
	if err != nil {
		return nil, err
	}
	late := make([]time.Duration, n)
	for i, t := range got {
		late[i] = t.Sub(at)
	}
	all := slices.Max(late)
	if c, ok := p.(completer); ok {
		all = c.Completed().Sub(at)
	}
	values := map[string]float64{
		"all_settled_ms": ms(all),
		"late_p50_ms":    ms(quantile(late, 0.5)),
		"late_p99_ms":    ms(quantile(late, 0.99)),
		"late_min_ms":    ms(slices.Min(late)),
	}
	if c, ok := p.(completedCPU); ok {
		// The daemon's, from 100 ms before the instant until the first
		// poll that found nothing pending (10 ms ticks).
		values["server_cpu_ms"] = ms(c.CompletedCPU() - cpu0)
	}
	return []result{{label: fmt.Sprintf("n=%d", n), values: values, lateness: lateDist(late)}}, nil
}

// register: durable registrations (as far as the peer is durable) from 32
// goroutines and from 1, due an hour from now.
func register(ctx context.Context, open func(string, int) (peer, error), name string, n int) ([]result, error) {
	var out []result
	for _, conc := range []int{32, 1} {
		count := n
		if conc == 1 {
			count = min(n, 2000)
		}
		p, err := open(name, count)
		if err != nil {
			return nil, err
		}
		at := time.Now().Add(time.Hour)
		server0, _ := usage(p.Pids())
		self0 := selfCPU()
		lat, el, err := registerAll(ctx, p, count, conc, func(i int) time.Time { return at.Add(time.Duration(i) * time.Millisecond) })
		self1 := selfCPU()
		server1, _ := usage(p.Pids())
		p.Close()
		if err != nil {
			return nil, err
		}
		out = append(out, result{label: fmt.Sprintf("conc=%d n=%d", conc, count), values: map[string]float64{
			"per_s":  float64(count) / el.Seconds(),
			"p50_ms": ms(quantile(lat, 0.5)),
			"p99_ms": ms(quantile(lat, 0.99)),
			// The peer's own processes (the daemon; PostgreSQL's), per
			// registration; 0 for a peer in this process.
			"server_cpu_us": float64(server1-server0) / float64(time.Microsecond) / float64(count),
			// This process's CPU per registration: the client's work, and
			// for vigil in-process the engine's and the store's too, which
			// the machine's load disturbs less than the rate.
			"this_cpu_us": float64(self1-self0) / float64(time.Microsecond) / float64(count),
		}})
	}
	return out, nil
}

// spread: n waits at random instants over the next minute; lateness of
// each, including the earliest (negative: settled before its instant).
func spread(ctx context.Context, open func(string, int) (peer, error), name string, n int) ([]result, error) {
	p, err := open(name, n)
	if err != nil {
		return nil, err
	}
	defer p.Close()
	base := time.Now().Add(5 * time.Second)
	ats := make([]time.Time, n)
	for i := range ats {
		ats[i] = base.Add(time.Duration(rand.Int64N(int64(time.Minute)))).Truncate(time.Millisecond)
	}
	if _, _, err := registerAll(ctx, p, n, 32, func(i int) time.Time { return ats[i] }); err != nil {
		return nil, err
	}
	got, err := waitSettled(ctx, p, n, base.Add(4*time.Minute))
	if err != nil {
		return nil, err
	}
	late := make([]time.Duration, n)
	for i, t := range got {
		late[i] = t.Sub(ats[i])
	}
	return []result{{label: fmt.Sprintf("n=%d", n), values: map[string]float64{
		"late_p50_ms": ms(quantile(late, 0.5)),
		"late_p99_ms": ms(quantile(late, 0.99)),
		"late_max_ms": ms(slices.Max(late)),
		"late_min_ms": ms(slices.Min(late)),
	}, lateness: lateDist(late)}}, nil
}

// idle: n waits due in an hour; CPU (user+sys) and bytes written by every
// process involved over d.
func idle(ctx context.Context, open func(string, int) (peer, error), name string, n int, d time.Duration) ([]result, error) {
	p, err := open(name, n)
	if err != nil {
		return nil, err
	}
	defer p.Close()
	at := time.Now().Add(time.Hour)
	if _, _, err := registerAll(ctx, p, n, 32, func(i int) time.Time { return at.Add(time.Duration(i) * time.Millisecond) }); err != nil {
		return nil, err
	}
	time.Sleep(5 * time.Second) // let the registration's aftermath settle
	pids := append([]int{os.Getpid()}, p.Pids()...)
	cpu0, io0 := usage(pids)
	sched0 := schedCPU(pids)
	time.Sleep(d)
	cpu1, io1 := usage(pids)
	sched1 := schedCPU(pids)
	return []result{{label: fmt.Sprintf("n=%d", n), values: map[string]float64{
		"cpu_ms_per_min":     ms(time.Duration(float64(cpu1-cpu0) * float64(time.Minute) / float64(d))),
		"written_kib":        float64(io1-io0) / 1024,
		"processes_measured": float64(len(pids)),
		// the threads' run time (ns resolution) where ticks say 0
		"cpu_ms_per_min_schedstat": ms(time.Duration(float64(sched1-sched0) * float64(time.Minute) / float64(d))),
	}}}, nil
}

// usage sums utime+stime (/proc/PID/stat) and write_bytes (/proc/PID/io)
// over pids; a process that has gone is skipped.
func usage(pids []int) (time.Duration, int64) {
	const tick = 100 // USER_HZ
	var cpu time.Duration
	var wr int64
	for _, pid := range pids {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			continue
		}
		s := string(b)
		f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
		// fields after ")": state is [0]; utime is field 14 of stat, [11] here.
		u, _ := strconv.ParseInt(f[11], 10, 64)
		sy, _ := strconv.ParseInt(f[12], 10, 64)
		cpu += time.Duration(u+sy) * time.Second / tick
		io, err := os.ReadFile(fmt.Sprintf("/proc/%d/io", pid))
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(io), "\n") {
			if v, ok := strings.CutPrefix(line, "write_bytes: "); ok {
				x, _ := strconv.ParseInt(v, 10, 64)
				wr += x
			}
		}
	}
	return cpu, wr
}

// buildVigil builds the real vigil binary from the repository this module
// replaces vigil with, unless -vigil-bin names one.
func buildVigil() (string, func(), error) {
	if *vigilBin != "" {
		return *vigilBin, func() {}, nil
	}
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "github.com/vigil-run/vigil").Output()
	if err != nil {
		return "", nil, fmt.Errorf("go list: %w", err)
	}
	dir, err := os.MkdirTemp("", "vigil-peers-bin-")
	if err != nil {
		return "", nil, err
	}
	bin := filepath.Join(dir, "vigil")
	cmd := exec.Command("go", "build", "-o", bin, "./cmd/vigil")
	cmd.Dir = strings.TrimSpace(string(out))
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", nil, errors.Join(fmt.Errorf("go build: %w", err), errors.New(string(out)))
	}
	return bin, func() { os.RemoveAll(dir) }, nil
}
