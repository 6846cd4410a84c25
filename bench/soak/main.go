// Command soak runs the real vigil daemon under steady load for a long
// time and checks that it does not drift: it builds and starts `vigil
// serve` (bench/soak/vigild: cmd/vigil plus a sidecar listener for the
// live heap and pprof) on a loopback port with a temporary data directory,
// keeps -readers long-poll readers on as many mailboxes, and for -duration
// registers timer watches at -rate a second, each due -lead later, spread
// over the readers' recipients, so that settlements run at the same rate
// and every reader keeps receiving and re-polling.
//
// It samples the daemon's RSS (/proc/PID/status), goroutines (its
// /metrics) and live heap every few seconds, fits least-squares slopes
// after a warm-up, and checks at the end that every registered watch fired
// and its message reached its reader exactly once, that no request failed,
// that settlements kept up, that the goroutines came back to their idle
// level once the readers left, and (on runs long enough for it to mean
// something) that RSS did not grow. It prints everything, then exits 1 if
// a check failed. See README.md beside this file.
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"math"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"syscall"
	"time"

	"github.com/vigil-run/vigil"
	"github.com/vigil-run/vigil/client"
)

type config struct {
	duration, lead, wait, sampleEvery, ramp, progress time.Duration
	rate                                              float64
	readers, workers                                  int
	warmup                                            float64
	maxRSSSlope                                       float64 // MiB per minute
	rssGateWindow                                     time.Duration
	goroutineSlack                                    int
	settleGrace, maxLateness                          time.Duration
	plain, keep, verify                               bool
	profile                                           string
}

func main() {
	var c config
	flag.DurationVar(&c.duration, "duration", 30*time.Minute, "how long to register (the load phase)")
	flag.Float64Var(&c.rate, "rate", 500, "registrations a second (and, once the first are due, settlements)")
	flag.IntVar(&c.readers, "readers", 10_000, "standing long-poll readers, one per recipient")
	flag.DurationVar(&c.lead, "lead", 5*time.Second, "each timer is due this long after its registration slot")
	flag.DurationVar(&c.wait, "wait", 30*time.Second, "each long-poll's wait (the daemon clamps it to max_wait, 60 s)")
	flag.IntVar(&c.workers, "workers", 64, "registration workers the pacer hands slots to")
	flag.Float64Var(&c.warmup, "warmup", 0.2, "share of the run left out of the slopes and rates")
	flag.DurationVar(&c.sampleEvery, "sample", 0, "sampling interval (0: duration/60, from 1 s to 5 s)")
	flag.DurationVar(&c.ramp, "ramp", 0, "spread the readers' first polls over this long (0: 0.5 ms a reader)")
	flag.DurationVar(&c.progress, "progress", 0, "print a progress line this often (0: duration/6, at most 30 s)")
	flag.Float64Var(&c.maxRSSSlope, "max-rss-slope", 1, "fail when RSS grows faster than this many MiB a minute after the warm-up …")
	flag.DurationVar(&c.rssGateWindow, "rss-gate-window", 10*time.Minute, "… if the window after the warm-up is at least this long (shorter: reported only)")
	flag.IntVar(&c.goroutineSlack, "goroutine-slack", 50, "goroutines allowed above the idle level once the readers have left")
	flag.DurationVar(&c.maxLateness, "max-lateness", 10*time.Second, "fail when the p99 of settlement lateness (message created_at − instant) is over this")
	flag.DurationVar(&c.settleGrace, "settle-grace", time.Minute, "after the last instant, how long to wait for the last messages")
	flag.BoolVar(&c.plain, "plain", false, "run the stock cmd/vigil (no sidecar: goroutines only if the daemon serves /metrics)")
	flag.BoolVar(&c.verify, "verify", true, "list every watch at the end and check its state against the messages received")
	flag.BoolVar(&c.keep, "keep", false, "keep the temporary directory (data dir, daemon log) even when all is well")
	flag.StringVar(&c.profile, "profile", "", "save the daemon's CPU (30 s after the warm-up), heap and goroutine profiles in this directory")
	flag.Parse()
	log.SetFlags(0)
	log.SetPrefix("soak: ")
	if c.rate <= 0 || c.readers < 1 || c.workers < 1 || c.duration <= 0 || c.warmup < 0 || c.warmup >= 1 {
		log.Fatal("-rate, -readers, -workers and -duration must be positive, -warmup from 0 to 1")
	}
	if c.sampleEvery <= 0 {
		c.sampleEvery = min(max(c.duration/60, time.Second), 5*time.Second)
	}
	if c.ramp <= 0 {
		c.ramp = time.Duration(c.readers) * 500 * time.Microsecond
	}
	if c.progress <= 0 {
		c.progress = min(c.duration/6, 30*time.Second)
	}
	s := &soak{cfg: c}
	failed, err := s.run()
	if s.p != nil && s.p.dir != "" {
		if err != nil || failed || c.keep {
			fmt.Fprintf(os.Stderr, "soak: kept %s (daemon log: %s)\n", s.p.dir, filepath.Join(s.p.dir, "daemon.log"))
		} else {
			os.RemoveAll(s.p.dir)
		}
	}
	if err != nil {
		log.Fatal(err)
	}
	if failed {
		os.Exit(1)
	}
}

// soak is one run.
type soak struct {
	cfg  config
	p    *proc
	c    *client.Client
	tr   *http.Transport
	w    *watches
	gen  *generator
	rs   *readers
	smp  samples
	fail []string
}

// failf records a failed check; the report goes on.
func (s *soak) failf(format string, args ...any) {
	s.fail = append(s.fail, fmt.Sprintf(format, args...))
}

func (s *soak) run() (failed bool, err error) {
	c := s.cfg
	// Every reader holds a connection, on both sides: check the limit on
	// open files (Go raised the soft limit to the hard one at start-up;
	// the daemon, a Go program too, does the same).
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
		return false, err
	}
	need := uint64(c.readers + c.workers + 256)
	if rl.Cur < need {
		return false, fmt.Errorf("open files: the limit is %d (hard %d) and %d readers need about %d; raise ulimit -Hn", rl.Cur, rl.Max, c.readers, need)
	}
	pending := c.rate * c.lead.Seconds() / float64(c.readers)
	if lim := vigil.DefaultLimits().MaxActivePerRecipient; pending > float64(lim)*0.8 {
		return false, fmt.Errorf("about %.0f pending watches per recipient (rate × lead / readers) is too close to max_active_per_recipient (%d): use more readers or a shorter lead", pending, lim)
	}

	s.p = &proc{plain: c.plain}
	if s.p.dir, err = os.MkdirTemp("", "vigil-soak-"); err != nil {
		return false, err
	}
	if err := s.p.build(); err != nil {
		return false, err
	}
	if err := s.p.start(); err != nil {
		return false, err
	}
	defer s.p.kill()
	ctx := context.Background()
	token, err := s.p.ready(ctx)
	if err != nil {
		return false, err
	}
	// One connection per reader plus the workers' own: the transport
	// must keep them all, or every long-poll answered would close one
	// and dial anew.
	conns := c.readers + c.workers + 16
	s.tr = &http.Transport{
		DialContext:         (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConns:        conns,
		MaxIdleConnsPerHost: conns,
		MaxConnsPerHost:     conns,
		IdleConnTimeout:     90 * time.Second,
		ReadBufferSize:      8 << 10,
		WriteBufferSize:     4 << 10,
	}
	if s.c, err = client.New(s.p.addr, token, &client.Options{HTTPClient: &http.Client{Transport: s.tr,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}); err != nil {
		return false, err
	}

	what := "bench/soak/vigild (cmd/vigil's code plus a sidecar listener: live heap, goroutines, pprof)"
	if c.plain {
		what = "the stock cmd/vigil"
	}
	fmt.Printf("soak: vigil serve pid %d at %s, %s; data %s\n", s.p.pid(), s.p.addr, what, s.p.dataDir)
	fmt.Printf("soak: %d readers (wait %v, ack=true), %.0f registrations/s for %v, timers due %v after their slot, %d workers; the admin token, which no register_rate limits; open files %d (hard %d)\n",
		c.readers, c.wait, c.rate, c.duration, c.lead, c.workers, rl.Cur, rl.Max)
	switch {
	case s.p.metricsOwn:
		fmt.Printf("soak: goroutines, pending watches and open long-polls from the daemon's own %s\n", s.p.metricsURL)
	case s.p.metricsURL != "":
		fmt.Printf("soak: the daemon serves no /metrics (SPEC §7 lists one): goroutines from the sidecar %s\n", s.p.metricsURL)
	default:
		fmt.Printf("soak: the daemon serves no /metrics and -plain has no sidecar: goroutines are NOT checked\n")
	}

	// The idle level: nothing registered, nobody reading.
	time.Sleep(2 * time.Second)
	idleG := s.goroutinesSettled(3)
	idleRSS, _ := rss(s.p.pid())

	n := int(math.Ceil(c.rate*c.duration.Seconds())) + 1
	s.w = newWatches(n)
	s.gen = &generator{c: s.c, w: s.w, rate: c.rate, lead: c.lead, readers: c.readers, workers: c.workers}
	s.rs = &readers{c: s.c, w: s.w, n: c.readers, wait: c.wait}

	sampleCtx, stopSampling := context.WithCancel(ctx)
	defer stopSampling()
	sampled := make(chan struct{})
	go func() { defer close(sampled); s.sample(sampleCtx) }()

	readCtx, stopReaders := context.WithCancel(ctx)
	defer stopReaders()
	readersDone := make(chan struct{})
	go func() { defer close(readersDone); s.rs.run(readCtx, c.ramp) }()
	rampDeadline := time.Now().Add(c.ramp + 30*time.Second)
	for s.rs.started.Load() < int64(c.readers) && time.Now().Before(rampDeadline) {
		time.Sleep(100 * time.Millisecond)
	}
	time.Sleep(2 * time.Second) // the last polls reach the daemon
	readG := s.goroutinesSettled(3)
	fmt.Printf("soak: idle: %s goroutines, RSS %s; %d readers polling: %s goroutines\n",
		fmtG(idleG), mib(idleRSS), s.rs.started.Load(), fmtG(readG))

	// The load.
	t0 := time.Now()
	warmEnd := t0.Add(time.Duration(c.warmup * float64(c.duration)))
	loadEnd := t0.Add(c.duration)
	progressCtx, stopProgress := context.WithCancel(ctx)
	go s.progressLines(progressCtx, t0)
	if c.profile != "" {
		go s.cpuProfile(warmEnd, loadEnd)
	}
	s.gen.run(ctx, t0, c.duration)
	loadEnd = time.Now() // the workers' last answers are in
	stopProgress()
	if c.profile != "" {
		s.saveProfile("/debug/pprof/goroutine?debug=1", "goroutines-load.txt")
		s.saveProfile("/debug/pprof/heap", "heap-load.pprof")
	}

	// The last instants pass; wait for their messages.
	lastDue := time.UnixMilli(s.gen.lastDueMs.Load())
	settleDeadline := lastDue.Add(c.settleGrace)
	for time.Now().Before(settleDeadline) {
		if time.Now().After(lastDue) && s.uniqueReceived() >= s.gen.ok.Load() {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	drained := time.Now()

	// The readers leave; their connections close; the daemon's goroutines
	// should come back to the idle level.
	stopReaders()
	<-readersDone
	s.tr.CloseIdleConnections()
	var afterG float64 = -1
	var afterIn time.Duration
	if idleG >= 0 {
		// Until the count is back within the slack and has stopped
		// falling (three reads in a row, 250 ms apart), at most 30 s.
		t := time.Now()
		var last []float64
		for {
			g := s.p.goroutines()
			last = append(last, g)
			if n := len(last); g >= 0 && g <= idleG+float64(c.goroutineSlack) && n >= 3 && last[n-3] <= g && last[n-2] <= g {
				break
			}
			if time.Since(t) > 30*time.Second {
				break
			}
			time.Sleep(250 * time.Millisecond)
		}
		afterG = last[len(last)-1]
		afterIn = time.Since(t)
		if afterG > idleG+float64(c.goroutineSlack) || afterG < 0 {
			s.saveProfileTo(filepath.Join(s.p.dir, "goroutines-after.txt"), "/debug/pprof/goroutine?debug=1")
		}
	}
	if c.profile != "" {
		s.saveProfile("/debug/pprof/goroutine?debug=1", "goroutines-after.txt")
	}
	stopSampling()
	<-sampled

	// What the daemon says happened to every watch.
	var v *verdict
	if c.verify {
		if v, err = s.list(ctx); err != nil {
			return false, err
		}
	}
	stopIn, stopErr := s.p.stop()

	s.report(reportIn{t0: t0, warmEnd: warmEnd, loadEnd: loadEnd, lastDue: lastDue, drained: drained,
		idleG: idleG, readG: readG, afterG: afterG, afterIn: afterIn, idleRSS: idleRSS,
		v: v, stopIn: stopIn, stopErr: stopErr})
	return len(s.fail) > 0, nil
}

// goroutinesSettled is the median of k reads of the daemon's goroutines
// 200 ms apart, or -1.
func (s *soak) goroutinesSettled(k int) float64 {
	var v []float64
	for i := range k {
		if i > 0 {
			time.Sleep(200 * time.Millisecond)
		}
		if g := s.p.goroutines(); g >= 0 {
			v = append(v, g)
		}
	}
	if len(v) == 0 {
		return -1
	}
	return series{v: v}.median(0, 1)
}

func (s *soak) uniqueReceived() int64 {
	return s.rs.received.Load() - s.rs.duplicates.Load() - s.rs.phantom.Load()
}

// sample reads the daemon's figures every sampleEvery until ctx ends.
func (s *soak) sample(ctx context.Context) {
	tick := time.NewTicker(s.cfg.sampleEvery)
	defer tick.Stop()
	for {
		x := sample{t: time.Now(), goroutines: -1, heapLive: -1, rss: -1, pending: -1, longCalls: -1}
		if v, err := rss(s.p.pid()); err == nil {
			x.rss = v
		}
		x.cpu, _ = cpuTime(s.p.pid())
		var ru syscall.Rusage
		if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) == nil {
			x.selfCPU = time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
		}
		if s.p.metricsURL != "" {
			if m, err := s.p.fetchMetrics(s.p.metricsURL); err == nil {
				x.goroutines = m["go_goroutines"]
				if v, ok := m["vigil_watches_pending"]; ok {
					x.pending = v
				}
				if v, ok := m["vigil_long_calls"]; ok {
					x.longCalls = v
				}
			}
		}
		if s.p.sidecarURL != "" {
			if m, err := s.p.fetchMetrics(s.p.sidecarURL + "/metrics"); err == nil {
				x.heapLive = m["go_heap_live_bytes"]
			}
		}
		x.registered, x.received, x.polls = s.gen.ok.Load(), s.uniqueReceived(), s.rs.polls.Load()
		s.smp.add(x)
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// progressLines prints a line every cfg.progress while the load runs.
func (s *soak) progressLines(ctx context.Context, t0 time.Time) {
	tick := time.NewTicker(s.cfg.progress)
	defer tick.Stop()
	var prev sample
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		all := s.smp.all()
		if len(all) == 0 {
			continue
		}
		x := all[len(all)-1]
		if !x.t.After(prev.t) {
			continue // no new sample since the last line
		}
		rate := func(a, b int64) string {
			if prev.t.IsZero() {
				return "-"
			}
			return strconv.FormatFloat(float64(a-b)/x.t.Sub(prev.t).Seconds(), 'f', 0, 64)
		}
		fmt.Printf("soak: %6s  RSS %s, goroutines %s, heap %s, pending %s, long-polls %s, registered %d (%s/s), received %d (%s/s), polls %d, errors %d\n",
			x.t.Sub(t0).Round(time.Second), mib(x.rss), fmtG(x.goroutines), mib(x.heapLive), fmtG(x.pending), fmtG(x.longCalls),
			x.registered, rate(x.registered, prev.registered), x.received, rate(x.received, prev.received), x.polls,
			s.gen.errs.total()+s.rs.errs.total())
		prev = x
	}
}

func (s *soak) cpuProfile(warmEnd, loadEnd time.Time) {
	if time.Until(loadEnd) < time.Until(warmEnd)+30*time.Second {
		return
	}
	time.Sleep(time.Until(warmEnd))
	s.saveProfile("/debug/pprof/profile?seconds=30", "cpu.pprof")
}

func (s *soak) saveProfile(path, name string) {
	if err := os.MkdirAll(s.cfg.profile, 0o755); err != nil {
		log.Printf("profile: %v", err)
		return
	}
	s.saveProfileTo(filepath.Join(s.cfg.profile, name), path)
}

func (s *soak) saveProfileTo(file, path string) {
	if err := s.p.fetch(path, file); err != nil {
		log.Printf("profile %s: %v", path, err)
		return
	}
	fmt.Printf("soak: saved %s\n", file)
}

// verdict is what the listing of every watch says.
type verdict struct {
	listed      int
	states      map[vigil.State]int
	listedTwice int      // a note (index) listed by two watches
	unknown     int      // a watch whose note is no index the soak sent
	hash        []uint64 // by index: the listed watch's id hash
	state       []vigil.State
	took        time.Duration
}

// list reads every watch through the API.
func (s *soak) list(ctx context.Context) (*verdict, error) {
	t := time.Now()
	v := &verdict{states: map[vigil.State]int{}, hash: make([]uint64, s.w.n), state: make([]vigil.State, s.w.n)}
	after := ""
	for {
		page, err := s.c.Watches(ctx, vigil.ListRequest{After: after, Limit: 1000})
		if err != nil {
			return nil, fmt.Errorf("list: %w", err)
		}
		for _, w := range page.Watches {
			v.listed++
			v.states[w.State]++
			i, err := strconv.Atoi(w.Note)
			if err != nil || i < 0 || i >= s.w.n || s.w.due[i].Load() == 0 {
				v.unknown++
				continue
			}
			if v.hash[i] != 0 {
				v.listedTwice++
				continue
			}
			v.hash[i], v.state[i] = idHash(w.ID), w.State
		}
		if page.Next == "" {
			break
		}
		after = page.Next
	}
	v.took = time.Since(t)
	return v, nil
}

type reportIn struct {
	t0, warmEnd, loadEnd, lastDue, drained time.Time
	idleG, readG, afterG                   float64
	afterIn                                time.Duration
	idleRSS                                float64
	v                                      *verdict
	stopIn                                 time.Duration
	stopErr                                error
}

func (s *soak) report(in reportIn) {
	c := s.cfg
	w := s.w
	all := s.smp.all()
	win := between(all, in.warmEnd, in.loadEnd)
	winLen := in.loadEnd.Sub(in.warmEnd)
	sent := int(s.gen.sent.Load())
	fmt.Println()

	// Load: what the generator achieved.
	regRate := math.NaN()
	if len(win) >= 2 {
		a, b := win[0], win[len(win)-1]
		regRate = float64(b.registered-a.registered) / b.t.Sub(a.t).Seconds()
	}
	sentIdx := func(i int) bool { return i < sent }
	late100, late1s := 0, 0
	for i := range sent {
		if w.lagMs[i] > 100 {
			late100++
		}
		if w.lagMs[i] > 1000 {
			late1s++
		}
	}
	target := c.rate * in.loadEnd.Sub(in.t0).Seconds()
	fmt.Printf("load:        %d registered of %d sent (%.0f planned) in %v; %.1f/s after the warm-up (target %.0f/s)\n",
		s.gen.ok.Load(), sent, target, in.loadEnd.Sub(in.t0).Round(time.Millisecond), regRate, c.rate)
	fmt.Printf("pacer:       woke late for its slots by %s (the generator's own lag, over the slots it slept until)\n",
		quantilesOf(w.wakeMs, func(i int) bool { return i < sent && w.wakeMs[i] >= 0 }))
	fmt.Printf("pacer:       slots taken up by a worker late by %s; %d more than 100 ms late, %d more than 1 s; %v waiting for a free worker (all %d awaiting the daemon)\n",
		quantilesOf(w.lagMs, sentIdx), late100, late1s, time.Duration(s.gen.blocked.Load()).Round(time.Millisecond), c.workers)
	fmt.Printf("register:    round trip %s\n", quantilesOf(w.regLatMs, func(i int) bool { return i < sent && w.regState[i].Load() == regOK }))
	if sent < int(target*0.99) || late1s > 0 {
		fmt.Printf("pacer:       FELL BEHIND: %d sent of %.0f planned, %d sends more than 1 s late\n", sent, target, late1s)
	}
	if regRate < 0.5*c.rate || math.IsNaN(regRate) {
		s.failf("the load was not achieved: %.1f registrations/s after the warm-up, target %.0f/s (not a soak)", regRate, c.rate)
	} else if regRate < 0.95*c.rate {
		fmt.Printf("load:        WARNING: %.1f registrations/s is under 95%% of the target\n", regRate)
	}

	// Settlements and messages.
	got := func(i int) bool { return i < sent && w.recv[i].Load() > 0 }
	settledInWin := 0
	for i := range sent {
		if got(i) {
			created := w.due[i].Load() + int64(w.lateMs[i])
			if created >= in.warmEnd.Add(c.lead).UnixMilli() && created <= in.loadEnd.Add(c.lead).UnixMilli() {
				settledInWin++
			}
		}
	}
	lateQ := quantilesOf(w.lateMs, got)
	fmt.Printf("settle:      %.1f/s after the warm-up (messages created in the window shifted by the lead); lateness (message created_at − instant) %s\n",
		float64(settledInWin)/winLen.Seconds(), lateQ)
	if lateQ.n > 0 && time.Duration(lateQ.p99)*time.Millisecond > c.maxLateness {
		s.failf("settlements did not keep up: lateness p99 %s is over -max-lateness %v", ms(lateQ.p99), c.maxLateness)
	}
	fmt.Printf("deliver:     received − created_at %s\n", quantilesOf(w.delivMs, got))
	e2e := make([]int32, sent)
	for i := range sent {
		e2e[i] = w.lateMs[i] + w.delivMs[i]
	}
	fmt.Printf("end to end:  received − instant %s\n", quantilesOf(e2e, got))
	rs := s.rs
	uniq := s.uniqueReceived()
	fmt.Printf("readers:     %d readers, %d polls answered (%d empty: the wait ran out), %d messages received (%d distinct watches), duplicates %d, phantom %d, out of order %d\n",
		c.readers, rs.polls.Load(), rs.empty.Load(), rs.received.Load(), uniq, rs.duplicates.Load(), rs.phantom.Load(), rs.disorder.Load())
	for _, e := range rs.phExamples {
		fmt.Printf("             phantom: %s\n", e)
	}
	fmt.Printf("errors:      register %v, readers %v, existing/answered at creation %d\n", &s.gen.errs, &rs.errs, s.gen.existing.Load())
	for _, e := range append(s.gen.errs.examples, rs.errs.examples...) {
		fmt.Printf("             e.g. %s\n", e)
	}
	if n := s.gen.errs.total() + rs.errs.total(); n > 0 {
		s.failf("%d requests failed (register %v, readers %v)", n, &s.gen.errs, &rs.errs)
	}
	if n := s.gen.existing.Load(); n > 0 {
		s.failf("%d registrations answered existing or answered at creation", n)
	}
	if n := rs.duplicates.Load() + rs.phantom.Load() + rs.disorder.Load(); n > 0 {
		s.failf("messages: %d duplicates, %d phantom, %d out of order", rs.duplicates.Load(), rs.phantom.Load(), rs.disorder.Load())
	}

	// Exactly once, against the daemon's own list.
	if v := in.v; v != nil {
		var lost, notListed, notSettled, notFired, mismatch, badType, ambiguous int
		settled := 0
		for i := range sent {
			listed := v.hash[i] != 0
			if !listed {
				if w.regState[i].Load() == regOK {
					notListed++
				}
				if w.recv[i].Load() > 0 {
					mismatch++
				}
				continue
			}
			if w.regState[i].Load() != regOK {
				ambiguous++ // registered although the client saw an error
			} else if w.regHash[i].Load() != v.hash[i] {
				mismatch++
			}
			if !v.state[i].Terminal() {
				notSettled++
				continue
			}
			settled++
			if v.state[i] != vigil.StateFired {
				notFired++
			}
			switch {
			case w.recv[i].Load() == 0:
				lost++
			case w.recvHash[i].Load() != v.hash[i]:
				mismatch++
			case w.badType[i].Load() > 0:
				badType++
			}
		}
		fmt.Printf("verify:      %d watches listed in %v, states %v; %d settled, %d received: lost %d, not listed %d, still pending %d, not fired %d, wrong watch %d, wrong type %d, listed twice %d, unknown %d, registered despite an error %d\n",
			v.listed, v.took.Round(time.Millisecond), v.states, settled, uniq, lost, notListed, notSettled, notFired, mismatch, badType, v.listedTwice, v.unknown, ambiguous)
		if lost+notListed+notSettled+notFired+mismatch+badType+v.listedTwice+v.unknown > 0 || int64(settled) != uniq {
			s.failf("exactly-once: %d settled but %d received (lost %d, not listed %d, still pending %d, not fired %d, wrong watch %d, wrong type %d, listed twice %d, unknown %d)",
				settled, uniq, lost, notListed, notSettled, notFired, mismatch, badType, v.listedTwice, v.unknown)
		}
	} else if uniq != s.gen.ok.Load() {
		s.failf("exactly-once: %d registered but %d received (-verify=false: not checked against the daemon's list)", s.gen.ok.Load(), uniq)
	}
	if late := in.drained.Sub(in.lastDue); in.drained.After(in.lastDue.Add(c.settleGrace - time.Second)) {
		fmt.Printf("settle:      the last messages had not all arrived %v after the last instant\n", late.Round(time.Millisecond))
	}

	// Drift: RSS, goroutines, live heap after the warm-up.
	rssS := seriesOf(win, func(x sample) float64 { return x.rss })
	gS := seriesOf(win, func(x sample) float64 { return x.goroutines })
	hS := seriesOf(win, func(x sample) float64 { return x.heapLive })
	allRSS := seriesOf(all, func(x sample) float64 { return x.rss })
	fmt.Printf("window:      %v after a %v warm-up, %d samples every %v\n", winLen.Round(time.Second), in.warmEnd.Sub(in.t0).Round(time.Second), len(win), c.sampleEvery)
	rssSlope := rssS.slope() / (1 << 20)
	fmt.Printf("rss:         idle %s; window start %s, end %s, max %s (whole run max %s); slope %+.3f MiB/min\n",
		mib(in.idleRSS), mib(rssS.first()), mib(rssS.last()), mib(rssS.max()), mib(allRSS.max()), rssSlope)
	if pS := seriesOf(win, func(x sample) float64 { return x.pending }); len(pS.v) > 0 {
		lS := seriesOf(win, func(x sample) float64 { return x.longCalls })
		fmt.Printf("pending:     watches pending (vigil_watches_pending) window start %s, end %s, max %s, slope %+.1f/min; open long-polls (vigil_long_calls) start %s, end %s, max %s\n",
			fmtG(pS.first()), fmtG(pS.last()), fmtG(pS.max()), pS.slope(), fmtG(lS.first()), fmtG(lS.last()), fmtG(lS.max()))
	}
	if len(hS.v) > 0 {
		fmt.Printf("heap live:   window start %s, end %s, max %s; slope %+.3f MiB/min\n", mib(hS.first()), mib(hS.last()), mib(hS.max()), hS.slope()/(1<<20))
	}
	switch {
	case math.IsNaN(rssSlope):
		s.failf("rss: too few samples after the warm-up for a slope")
	case winLen < c.rssGateWindow:
		fmt.Printf("rss:         slope reported only: the window (%v) is shorter than -rss-gate-window (%v)\n", winLen.Round(time.Second), c.rssGateWindow)
	case rssSlope >= c.maxRSSSlope:
		s.failf("rss grows %+.3f MiB/min after the warm-up (limit %.3f)", rssSlope, c.maxRSSSlope)
	}
	if len(gS.v) > 0 {
		steady := gS.median(0, 0.25)
		end := gS.median(0.9, 1)
		// In flight at one look: up to every worker's request (a
		// connection's goroutine and its background read each).
		bound := math.Max(float64(2*c.workers+64), 0.02*steady)
		fmt.Printf("goroutines:  idle %s, readers polling %s; window start %s, steady %s (median of its first quarter), end %s (median of its last tenth), max %s; slope %+.1f/min\n",
			fmtG(in.idleG), fmtG(in.readG), fmtG(gS.first()), fmtG(steady), fmtG(end), fmtG(gS.max()), gS.slope())
		fmt.Printf("goroutines:  %s %v after the readers left (idle %s + slack %d)\n", fmtG(in.afterG), in.afterIn.Round(time.Millisecond), fmtG(in.idleG), c.goroutineSlack)
		if end-steady > bound {
			s.failf("goroutines: %s at the end of the load against a steady %s (bound %+.0f)", fmtG(end), fmtG(steady), bound)
		}
		if in.afterG < 0 || in.afterG > in.idleG+float64(c.goroutineSlack) {
			s.failf("goroutines: %s 30 s after the readers left, idle was %s (slack %d): see goroutines-after.txt", fmtG(in.afterG), fmtG(in.idleG), c.goroutineSlack)
		}
	} else {
		fmt.Printf("goroutines:  not known (no /metrics): NOT checked\n")
	}
	if len(win) >= 2 {
		a, b := win[0], win[len(win)-1]
		el := b.t.Sub(a.t).Seconds()
		fmt.Printf("cpu:         after the warm-up the daemon used %.0f%% of one core, the soak itself %.0f%% (%d cores)\n",
			100*(b.cpu-a.cpu).Seconds()/el, 100*(b.selfCPU-a.selfCPU).Seconds()/el, runtime.NumCPU())
	}
	if in.stopErr != nil {
		s.failf("shutdown: %v after %v", in.stopErr, in.stopIn.Round(time.Millisecond))
	} else {
		fmt.Printf("shutdown:    SIGTERM: exited 0 in %v\n", in.stopIn.Round(time.Millisecond))
	}

	fmt.Println()
	if len(s.fail) == 0 {
		fmt.Printf("PASS: %d watches registered, settled and received exactly once; no errors; goroutines back to idle; rss slope %+.3f MiB/min%s\n",
			uniq, rssSlope, map[bool]string{true: " (reported only)", false: ""}[winLen < c.rssGateWindow])
		return
	}
	for _, f := range s.fail {
		fmt.Printf("FAIL: %s\n", f)
	}
}

func mib(b float64) string {
	if b < 0 || math.IsNaN(b) {
		return "n/a"
	}
	return strconv.FormatFloat(b/(1<<20), 'f', 1, 64) + " MiB"
}

func fmtG(g float64) string {
	if g < 0 || math.IsNaN(g) {
		return "n/a"
	}
	return strconv.FormatFloat(g, 'f', 0, 64)
}
