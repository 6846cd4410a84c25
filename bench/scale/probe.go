package main

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/vigil-run/vigil"
)

// probe: -probe-n http watches with every -probe-every against a server in
// this process that always answers {"done":false}, so they stay pending
// and are probed on their grid. Over -probe-for it counts the requests at
// the server, the daemon's CPU, and each request's lateness against its
// watch's grid: a pending watch is due at created_at + k × every (the
// scheduler keeps a fixed cadence from its first due instant, skipping
// slots that passed: vigil.NextDue), so a request's lateness is its
// arrival minus the latest grid instant at or before it.
//
// Loopback targets: the daemon refuses them only with deny_private, which
// is off by default; link-local and metadata addresses are always refused
// (watcher/netguard.go). So the default daemon probes 127.0.0.1.
func probe(ctx context.Context, e *env) error {
	n, every, window := e.cfg.probeN, e.cfg.probeEvery, e.cfg.probeFor
	type log struct {
		mu sync.Mutex
		at []int64 // unix nanos of each request
	}
	logs := make([]log, n)
	var total atomic.Int64
	body := []byte(`{"done":false}`)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	srv := &http.Server{ReadHeaderTimeout: 10 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		now := time.Now().UnixNano()
		i, err := strconv.Atoi(strings.TrimPrefix(r.URL.Path, "/w/"))
		if err != nil || i < 0 || i >= n {
			http.NotFound(w, r)
			return
		}
		l := &logs[i]
		l.mu.Lock()
		l.at = append(l.at, now)
		l.mu.Unlock()
		total.Add(1)
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(body)
	})}
	go func() { _ = srv.Serve(ln) }()
	defer srv.Close()

	dir, err := e.dir("probe")
	if err != nil {
		return err
	}
	d, err := e.start(filepath.Join(dir, "data"))
	if err != nil {
		return err
	}
	defer d.stop(time.Minute)
	if _, _, err := d.ready(time.Minute); err != nil {
		return err
	}
	c, err := d.client(e.cfg.conc)
	if err != nil {
		return err
	}
	progressf("probe: registering %d http watches every %v", n, every)
	created := make([]int64, n)
	// Spread: watch i registered at i/n of an interval, so the grid slots
	// are spread evenly and the load is n/every probes a second all along;
	// without it they are registered as fast as they go, and each interval
	// starts with a burst of every watch's probe.
	t0 := time.Now()
	regTook, err := registerN(ctx, n, e.cfg.conc, func(ctx context.Context, i int) error {
		if e.cfg.probeSpread {
			time.Sleep(time.Until(t0.Add(time.Duration(int64(every) * int64(i) / int64(n)))))
		}
		w, err := c.Register(ctx, vigil.RegisterRequest{
			Kind:      vigil.KindHTTP,
			Recipient: "p" + strconv.Itoa(i%100),
			Every:     vigil.FormatDuration(every),
			Deadline:  "2h",
			Predicate: []byte(fmt.Sprintf(`{"url":"http://%s/w/%d","done":{"path":"done","equals":true}}`, ln.Addr(), i)),
		})
		if err != nil {
			return err
		}
		if w.State != vigil.StatePending || w.Existing {
			return fmt.Errorf("watch %d: %s (existing %t)", i, w.State, w.Existing)
		}
		created[i] = w.CreatedAt.UnixNano()
		return nil
	}, nil)
	if err != nil {
		return err
	}
	// Warm up: every watch probed once, then one more interval.
	giveUp := time.Now().Add(2*time.Minute + 2*every)
	for {
		seen := 0
		for i := range logs {
			logs[i].mu.Lock()
			if len(logs[i].at) > 0 {
				seen++
			}
			logs[i].mu.Unlock()
		}
		if seen == n {
			break
		}
		if time.Now().After(giveUp) {
			return fmt.Errorf("only %d of %d watches were probed within 2 minutes", seen, n)
		}
		time.Sleep(200 * time.Millisecond)
	}
	time.Sleep(e.cfg.probeWarmup)

	progressf("probe: measuring %v", window)
	u0, err := readUsage(d.pid())
	if err != nil {
		return err
	}
	self0, _ := readUsage(os.Getpid())
	ws, c0 := time.Now().UnixNano(), total.Load()
	time.Sleep(window)
	we, c1 := time.Now().UnixNano(), total.Load()
	u1, err := readUsage(d.pid())
	if err != nil {
		return err
	}
	self1, _ := readUsage(os.Getpid())

	var late, jitter, first, last []time.Duration
	got := 0
	for i := range logs {
		logs[i].mu.Lock()
		at := append([]int64(nil), logs[i].at...)
		logs[i].mu.Unlock()
		prev := int64(0)
		for _, a := range at {
			if a < ws || a >= we {
				prev = a
				continue
			}
			got++
			k := (a - created[i]) / int64(every)
			l := time.Duration(a - created[i] - k*int64(every))
			late = append(late, l)
			switch {
			case a < ws+int64(every):
				first = append(first, l)
			case a >= we-int64(every):
				last = append(last, l)
			}
			if prev >= ws {
				jitter = append(jitter, time.Duration(a-prev)-every)
			}
			prev = a
		}
	}
	// Still pending, every one? An answer the watch could not read would
	// have settled or backed it off.
	pending, polls, err := countPending(ctx, c)
	if err != nil {
		return err
	}
	w := time.Duration(we - ws)
	probes := c1 - c0
	cpu, run := u1.cpu-u0.cpu, u1.run-u0.run
	expected := float64(n) * w.Seconds() / every.Seconds()
	t := &table{
		title: fmt.Sprintf("probe: %s http watches, every %v, against a loopback server in this process — vigil serve, %s; window %v", count(int64(n)), every, durability, w.Round(time.Millisecond)),
		head:  []string{"probes/s (at the server)", "expected/s", "CPU/probe (ticks)", "CPU/probe (schedstat)", "daemon CPU", "lateness p50", "p99", "max", "p50/p99 first interval", "p50/p99 last interval", "gap − every p99", "written in window", "daemon RSS", "this process CPU"},
	}
	t.add(fmt.Sprintf("%.0f", float64(probes)/w.Seconds()), fmt.Sprintf("%.0f", expected/w.Seconds()),
		fmt.Sprintf("%.0f µs", float64(cpu)/float64(time.Microsecond)/float64(max(probes, 1))),
		fmt.Sprintf("%.0f µs", float64(run)/float64(time.Microsecond)/float64(max(probes, 1))),
		fmt.Sprintf("%.0f %% of a core", 100*cpu.Seconds()/w.Seconds()),
		msec(quantile(late, 0.5)), msec(quantile(late, 0.99)), msec(quantile(late, 1)),
		msec(quantile(first, 0.5))+" / "+msec(quantile(first, 0.99)), msec(quantile(last, 0.5))+" / "+msec(quantile(last, 0.99)),
		msec(quantile(jitter, 0.99)),
		count(u1.written-u0.written)+" B", mib(u1.rss),
		fmt.Sprintf("%.0f %% of a core", 100*(self1.cpu-self0.cpu).Seconds()/w.Seconds()))
	t.note("%d requests in the window for %s expected (%s watches × window / every); %s of %s watches still pending after it, %s probes counted by the daemon in all", got, count(int64(expected)), count(int64(n)), count(int64(pending)), count(int64(n)), count(int64(polls)))
	lo, hi := slices.Min(created), slices.Max(created)
	spread := "paced over one interval (-probe-spread), so the grid slots are spread evenly"
	if !e.cfg.probeSpread {
		spread = "as fast as they went (-probe-spread=false), so each interval starts with a burst"
	}
	t.note("registered over HTTP (admin token, recipients p0…p99, %d goroutines) in %v, %s: first probes (created_at) spread over %v; the first probe of each is at its registration; measured from one interval after every watch had been probed once",
		e.cfg.conc, regTook.Round(time.Millisecond), spread, time.Duration(hi-lo).Round(time.Millisecond))
	t.note("lateness: arrival at the server − (created_at + k × every), k the latest grid slot at or before the arrival (a slot the daemon fell a whole interval behind on is skipped, vigil.NextDue, and shows as fewer requests than expected); first/last interval: the requests of the window's first and last %v, equal when the daemon keeps up, growing when it falls behind, shrinking while it catches up; gap − every: between two requests for the same watch in the window", every)
	t.note("warm-up before the window: every watch probed once, then %v (-probe-warmup)", e.cfg.probeWarmup)
	t.note("CPU/probe: the daemon's utime+stime (/proc/PID/stat, 10 ms ticks) or its threads' run time (/proc/PID/task/*/schedstat) over the window, / requests counted at the server")
	t.note("the daemon's defaults: probe_workers 8, deny_private false (loopback probes allowed); the http watcher keeps connections alive between probes (since issue #18; before, every probe was a new TCP connection)")
	t.note("this process serves the requests and shares the machine's %d cores with the daemon", runtime.NumCPU())
	t.print()
	return nil
}

// countPending lists every watch through the API: how many are pending,
// and their polls in all.
func countPending(ctx context.Context, c vigil.Service) (pending, polls int, err error) {
	after := ""
	for {
		page, err := c.Watches(ctx, vigil.ListRequest{After: after, Limit: 1000})
		if err != nil {
			return 0, 0, err
		}
		for _, w := range page.Watches {
			if w.State == vigil.StatePending {
				pending++
			}
			polls += w.Polls
		}
		if page.Next == "" {
			return pending, polls, nil
		}
		after = page.Next
	}
}
