// Command scale runs the scale scenarios of issue #8 against the real vigil
// daemon (`vigil serve` built from this repository, on its default SQLite
// store with synchronous=FULL, WAL) and, where it helps to explain a
// figure, against vigil's engine in this process:
//
//   - memory: resident memory (VmRSS) and bytes on disk per pending watch at
//     100 000 and 1 000 000 pending timers, beside asynq on Redis and River
//     on PostgreSQL;
//   - restart: time from exec until /readyz answers 200 with 1 000 000
//     pending watches in the store;
//   - probe: 10 000 http watches every 5 s against a server in this process:
//     probes per second, CPU per probe, lateness against the watch's grid;
//   - scale (or idle and storm alone): idle cost (CPU, bytes written) and a
//     storm (every timer due at one instant) at 10 000, 100 000 and
//     1 000 000 watches.
//
// It prints one table per scenario. See README.md in this directory.
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

var allScenarios = []string{"memory", "restart", "probe", "scale", "idle", "storm"}

// config is the command line.
type config struct {
	scenarios   []string
	sizes       []int // nil: each scenario's default
	runs        int
	idle        time.Duration
	settle      time.Duration
	fill        string
	conc        int
	peers       []string
	pgURL       string
	redisAddr   string
	redisDB     int
	probeN      int
	probeEvery  time.Duration
	probeFor    time.Duration
	probeSpread bool
	probeWarmup time.Duration
	lead        time.Duration
	stormWatch  string
	inproc      bool
	dir         string
	keep        bool
}

func main() {
	var c config
	scenario := flag.String("scenario", "memory,restart,probe,scale", "scenarios to run, comma-separated: "+strings.Join(allScenarios, ", ")+" (scale is idle and storm)")
	sizes := flag.String("sizes", "", "pending watches, comma-separated (e.g. 10000,100000); empty: each scenario's default (memory 100000,1000000; restart 1000000; scale 10000,100000,1000000)")
	flag.IntVar(&c.runs, "runs", 3, "memory and restart: daemon starts per size (the median is printed with the range)")
	flag.DurationVar(&c.idle, "idle", time.Minute, "scale: idle window per size")
	flag.DurationVar(&c.settle, "settle", 10*time.Second, "memory: how long after /readyz the daemon's RSS is followed before it is read")
	flag.StringVar(&c.fill, "fill", "auto", "how pending watches are made: http (registered through the daemon's API), store (in-process through vigil's engine on the store, before the daemon starts), auto (http up to 100 000, store above)")
	flag.IntVar(&c.conc, "conc", 64, "goroutines that register")
	peers := flag.String("peers", "asynq,river", "memory: peers to measure beside vigil (asynq, river; empty for none)")
	flag.StringVar(&c.pgURL, "postgres", "postgres://postgres@127.0.0.1:5432/test?sslmode=disable", "PostgreSQL for River")
	flag.StringVar(&c.redisAddr, "redis", "127.0.0.1:6379", "Redis for asynq")
	flag.IntVar(&c.redisDB, "redis-db", 8, "Redis database for asynq, flushed before and after (bench/peers uses 7)")
	flag.IntVar(&c.probeN, "probe-n", 10_000, "probe: http watches")
	flag.DurationVar(&c.probeEvery, "probe-every", 5*time.Second, "probe: the watches' interval")
	flag.DurationVar(&c.probeFor, "probe-for", time.Minute, "probe: measurement window")
	flag.BoolVar(&c.probeSpread, "probe-spread", true, "probe: pace the registrations over one interval so the probes are spread evenly (false: register as fast as possible, each interval starts with a burst)")
	flag.DurationVar(&c.probeWarmup, "probe-warmup", 30*time.Second, "probe: after every watch has been probed once, how long before the window starts")
	flag.DurationVar(&c.lead, "lead", 0, "scale storm: how far ahead of the instant the timers are made (0: from the size)")
	flag.StringVar(&c.stormWatch, "storm-watch", "store", "scale storm: how the end is seen: store (the daemon's committed pending count, read from its database file every 10 ms) or api (GET /v1/watches?state=pending&limit=1 every 20 ms, as bench/peers does)")
	flag.BoolVar(&c.inproc, "inproc", true, "memory and restart: also measure vigil's engine in this process on the same store")
	flag.StringVar(&c.dir, "dir", "", "parent of the temporary directory (default $TMPDIR or /tmp); it must be on a real disk: synchronous=FULL on tmpfs measures nothing")
	flag.BoolVar(&c.keep, "keep", false, "keep the temporary directory (data dirs, daemon logs)")
	flag.Parse()
	log.SetFlags(0)
	log.SetPrefix("scale: ")

	for _, s := range strings.Split(*scenario, ",") {
		if s = strings.TrimSpace(s); s == "" {
			continue
		}
		if !slices.Contains(allScenarios, s) {
			log.Fatalf("unknown scenario %q (want %s)", s, strings.Join(allScenarios, ", "))
		}
		c.scenarios = append(c.scenarios, s)
	}
	if *sizes != "" {
		for _, s := range strings.Split(*sizes, ",") {
			n, err := strconv.Atoi(strings.ReplaceAll(strings.TrimSpace(s), "_", ""))
			if err != nil || n < 1 {
				log.Fatalf("-sizes: %q is not a positive whole number", s)
			}
			c.sizes = append(c.sizes, n)
		}
	}
	for _, p := range strings.Split(*peers, ",") {
		if p = strings.TrimSpace(p); p != "" {
			if p != "asynq" && p != "river" {
				log.Fatalf("-peers: unknown peer %q (want asynq, river)", p)
			}
			c.peers = append(c.peers, p)
		}
	}
	switch c.fill {
	case "auto", "http", "store":
	default:
		log.Fatalf("-fill %q: want auto, http or store", c.fill)
	}
	switch c.stormWatch {
	case "store", "api":
	default:
		log.Fatalf("-storm-watch %q: want store or api", c.stormWatch)
	}
	if c.runs < 1 || c.conc < 1 || c.probeN < 1 || c.probeEvery < time.Second || c.probeFor <= 0 {
		log.Fatal("-runs, -conc and -probe-n must be at least 1, -probe-every at least 1s (min_every), -probe-for positive")
	}

	e, err := newEnv(c)
	if err != nil {
		log.Fatal(err)
	}
	// Whatever ends this program, the daemons it started and its
	// temporary directory go with it (the daemons also get SIGKILL from
	// the kernel if this process dies: Pdeathsig).
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	go func() {
		s := <-sig
		log.Printf("%v: stopping the daemons and removing %s", s, e.root)
		e.cleanup()
		os.Exit(130)
	}()
	err = run(context.Background(), e)
	e.cleanup()
	if err != nil {
		log.Fatal(err)
	}
}

func run(ctx context.Context, e *env) error {
	fmt.Printf("vigil scale benchmarks: %s\n", e.describe())
	for _, sc := range e.cfg.scenarios {
		var err error
		switch sc {
		case "memory":
			err = memory(ctx, e, e.sizesOr(100_000, 1_000_000))
		case "restart":
			err = restart(ctx, e, e.sizesOr(1_000_000))
		case "probe":
			err = probe(ctx, e)
		case "scale":
			err = scale(ctx, e, e.sizesOr(10_000, 100_000, 1_000_000))
		case "idle":
			err = scaleIdle(ctx, e, e.sizesOr(10_000, 100_000, 1_000_000))
		case "storm":
			err = scaleStorm(ctx, e, e.sizesOr(10_000, 100_000, 1_000_000))
		}
		if err != nil {
			return fmt.Errorf("%s: %w", sc, err)
		}
	}
	return nil
}
