// Command core measures the core engine on this machine: idle cost, memory
// per pending watch, a storm of timers due at one instant, and durable
// registration throughput. It runs vigil in-process on the embedded SQLite
// store (synchronous=FULL unless -sync says otherwise) and prints one line
// per figure. See bench/README.md.
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"os"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/vigil-run/vigil"
	"github.com/vigil-run/vigil/engine"
	"github.com/vigil-run/vigil/scheduler"
	"github.com/vigil-run/vigil/store/sqlite"
	"github.com/vigil-run/vigil/watcher"
	"github.com/vigil-run/vigil/watcher/timer"
	"github.com/vigil-run/vigil/watcher/watchertest"
)

func main() {
	scenario := flag.String("scenario", "all", "idle | memory | storm | register | all")
	n := flag.Int("n", 100_000, "watches")
	idleFor := flag.Duration("idle", time.Minute, "how long to measure idle cost")
	syncMode := flag.String("sync", "FULL", "SQLite synchronous mode (FULL is the default vigil runs with)")
	cpuprofile := flag.String("cpuprofile", "", "write a CPU profile of the whole run to this file")
	flag.Parse()
	ctx := context.Background()
	if *cpuprofile != "" {
		f, err := os.Create(*cpuprofile)
		if err != nil {
			log.Fatal(err)
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			log.Fatal(err)
		}
		defer pprof.StopCPUProfile()
	}
	run := func(name string, f func() error) {
		if *scenario != "all" && *scenario != name {
			return
		}
		if err := f(); err != nil {
			pprof.StopCPUProfile()
			log.Fatalf("%s: %v", name, err)
		}
	}
	run("memory", func() error { return memory(*n) })
	run("register", func() error { return register(ctx, *n, *syncMode) })
	run("storm", func() error { return storm(ctx, *n, *syncMode) })
	run("idle", func() error { return idle(ctx, *n, *idleFor, *syncMode) })
}

func limits() vigil.Limits {
	l := vigil.DefaultLimits()
	l.MaxActive, l.MaxActivePerRecipient = 10_000_000, 10_000_000
	return l
}

type rig struct {
	dir   string
	store *sqlite.Store
	eng   *engine.Engine
	sched *scheduler.Scheduler
}

func newRig(ctx context.Context, syncMode string, ws ...watcher.Watcher) (*rig, error) {
	dir, err := os.MkdirTemp("", "vigil-bench-")
	if err != nil {
		return nil, err
	}
	st, err := sqlite.Open(ctx, dir+"/vigil.db", &sqlite.Options{Synchronous: syncMode})
	if err != nil {
		return nil, err
	}
	reg := watcher.NewRegistry(append([]watcher.Watcher{timer.New(timer.Config{})}, ws...)...)
	sched := scheduler.New(scheduler.Config{})
	e := engine.New(engine.Config{Store: st, Watchers: reg, Scheduler: sched, Limits: limits()})
	if err := e.Prime(ctx); err != nil {
		return nil, err
	}
	return &rig{dir: dir, store: st, eng: e, sched: sched}, nil
}

func (r *rig) close() {
	r.store.Close()
	os.RemoveAll(r.dir)
}

// registerAll registers n requests from conc goroutines and returns the elapsed time.
func registerAll(ctx context.Context, e *engine.Engine, n, conc int, req func(i int) vigil.RegisterRequest) (time.Duration, error) {
	var next atomic.Int64
	var wg sync.WaitGroup
	var firstErr atomic.Value
	start := time.Now()
	for range conc {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				if _, err := e.Register(ctx, req(i)); err != nil {
					firstErr.CompareAndSwap(nil, err)
					return
				}
			}
		})
	}
	wg.Wait()
	if err, _ := firstErr.Load().(error); err != nil {
		return 0, err
	}
	return time.Since(start), nil
}

func timerReq(at time.Time, i int) vigil.RegisterRequest {
	return vigil.RegisterRequest{Kind: vigil.KindTimer, Recipient: "r" + strconv.Itoa(i%1000),
		Predicate: []byte(`{"at":"` + vigil.FormatTime(at) + `"}`), Note: strconv.Itoa(i)}
}

func register(ctx context.Context, n int, syncMode string) error {
	for _, conc := range []int{1, 32} {
		r, err := newRig(ctx, syncMode)
		if err != nil {
			return err
		}
		count := n
		if conc == 1 {
			count = min(n, 20_000)
		}
		at := time.Now().Add(time.Hour)
		el, err := registerAll(ctx, r.eng, count, conc, func(i int) vigil.RegisterRequest { return timerReq(at.Add(time.Duration(i)*time.Millisecond), i) })
		r.close()
		if err != nil {
			return err
		}
		fmt.Printf("register: %d durable registrations from %d goroutine(s) in %v = %.0f/s (synchronous=%s)\n",
			count, conc, el.Round(time.Millisecond), float64(count)/el.Seconds(), syncMode)
	}
	return nil
}

func storm(ctx context.Context, n int, syncMode string) error {
	r, err := newRig(ctx, syncMode)
	if err != nil {
		return err
	}
	defer r.close()
	at := time.Now().Add(time.Minute).Truncate(time.Second)
	// Same instant, so each timer needs its own recipient to be its own watch.
	if _, err := registerAll(ctx, r.eng, n, 32, func(i int) vigil.RegisterRequest {
		req := timerReq(at, i)
		req.Recipient = "r" + strconv.Itoa(i)
		return req
	}); err != nil {
		return err
	}
	if got := r.sched.Len(); got != n {
		return fmt.Errorf("%d timers scheduled, want %d", got, n)
	}
	if time.Until(at) < 2*time.Second {
		return fmt.Errorf("registration took too long to leave a quiet lead-in before the storm")
	}
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error)
	go func() { done <- r.eng.Run(runCtx) }()
	// A watch leaves the scheduler only once its settlement has committed.
	giveUp := at.Add(60 * time.Second)
	for r.sched.Len() > 0 {
		if time.Now().After(giveUp) {
			cancel()
			<-done
			return fmt.Errorf("%d of %d still pending a minute after the instant", r.sched.Len(), n)
		}
		time.Sleep(time.Millisecond)
	}
	last := time.Now()
	cancel()
	<-done
	// Count committed messages from the store, not the events.
	var msgs int
	for i := range n {
		var after int64
		for {
			p, err := r.store.MessagesRead(ctx, vigil.MessagesReadParams{Recipient: "r" + strconv.Itoa(i), After: &after, Limit: 1000})
			if err != nil {
				return err
			}
			msgs += len(p.Messages)
			if len(p.Messages) < 1000 {
				break
			}
			after = p.Messages[len(p.Messages)-1].Seq
		}
	}
	fmt.Printf("storm: %d timers due at one instant settled in %v after it, %d mailbox messages committed (synchronous=%s)\n",
		n, last.Sub(at).Round(time.Millisecond), msgs, syncMode)
	return nil
}

func memory(n int) error {
	s := scheduler.New(scheduler.Config{})
	ws := make([]*vigil.Watch, n)
	now := time.Now()
	for i := range ws {
		ws[i] = &vigil.Watch{ID: fmt.Sprintf("01JDQ7W5ZP%016d", i), Kind: vigil.KindHTTP, Every: time.Hour, Deadline: now.Add(2 * time.Hour), CreatedAt: now.Add(time.Hour)}
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for _, w := range ws {
		// What the engine arms for a registered http watch.
		e := scheduler.NewEntry(w.ID, w.Kind, w.Every, w.Deadline, false)
		e.SetDue(w.CreatedAt)
		s.Add(e)
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	// The ids are the store's strings; the scheduler holds a reference to
	// them. Count their bytes too, since a primed scheduler owns its copies.
	idBytes := uint64(len(ws[0].ID))
	per := float64(after.HeapAlloc-before.HeapAlloc)/float64(n) + float64(idBytes)
	runtime.KeepAlive(ws)
	fmt.Printf("memory: %.0f B of Go heap per pending watch held by the scheduler (%d watches, id bytes included)\n", per, n)
	runtime.KeepAlive(s)
	return nil
}

func idle(ctx context.Context, n int, d time.Duration, syncMode string) error {
	fake := watchertest.NeverSettles(vigil.KindHTTP)
	r, err := newRig(ctx, syncMode, fake)
	if err != nil {
		return err
	}
	defer r.close()
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error)
	go func() { done <- r.eng.Run(runCtx) }()
	stop := func() { cancel(); <-done }
	if _, err := registerAll(ctx, r.eng, n, 32, func(i int) vigil.RegisterRequest {
		return vigil.RegisterRequest{Kind: vigil.KindHTTP, Recipient: "r" + strconv.Itoa(i%1000), Every: "1h", Deadline: "6h",
			Predicate: []byte(`{"n":` + strconv.Itoa(i) + `}`)}
	}); err != nil {
		stop()
		return err
	}
	// Let every first probe finish and its observation commit.
	for fake.Total() < n {
		time.Sleep(100 * time.Millisecond)
	}
	time.Sleep(2 * time.Second)
	runtime.GC()
	cpu0, io0 := cpuTime(), writeBytes()
	time.Sleep(d)
	cpu1, io1 := cpuTime(), writeBytes()
	cancel()
	<-done
	perMin := time.Duration(float64(cpu1-cpu0) * float64(time.Minute) / float64(d))
	fmt.Printf("idle: %d pending watches (1 h interval): %v CPU per minute (user+sys, getrusage), %d bytes written (/proc/self/io write_bytes) over %v\n",
		n, perMin, io1-io0, d)
	return nil
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func writeBytes() int64 {
	b, err := os.ReadFile("/proc/self/io")
	if err != nil {
		return -1
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "write_bytes: "); ok {
			n, _ := strconv.ParseInt(v, 10, 64)
			return n
		}
	}
	return -1
}
