// Command folder measures standing folder watches on this machine: the
// idle cost of many watches on quiet folders, the cost of one round of
// their safety re-checks, and how long after an edit its report is
// committed. It runs vigil in-process on the embedded SQLite store with
// the real file system notifier, as the daemon wires them. See
// bench/README.md.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/vigil-run/vigil"
	"github.com/vigil-run/vigil/engine"
	"github.com/vigil-run/vigil/scheduler"
	"github.com/vigil-run/vigil/store/sqlite"
	"github.com/vigil-run/vigil/watcher"
	"github.com/vigil-run/vigil/watcher/folder"
	"github.com/vigil-run/vigil/watcher/fsevent"
)

func main() {
	n := flag.Int("n", 1000, "standing folder watches, one folder each")
	files := flag.Int("files", 5, "small files per folder")
	idleFor := flag.Duration("idle", time.Minute, "how long to measure idle cost")
	settle := flag.Duration("settle", 20*time.Second, "the watches' settle window")
	edits := flag.Int("edits", 3, "edits whose report latency is measured, one after another")
	poll := flag.Bool("poll", false, "turn file system events off: every watch polls every 10s (the fallback)")
	cpuprofile := flag.String("cpuprofile", "", "write a CPU profile of the re-check rounds to this file")
	flag.Parse()
	if err := run(*n, *files, *idleFor, *settle, *edits, *poll, *cpuprofile); err != nil {
		log.Fatal(err)
	}
}

func run(n, files int, idleFor, settle time.Duration, edits int, poll bool, cpuprofile string) error {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "vigil-bench-folder-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	root := filepath.Join(dir, "root")
	for i := range n {
		for j := range files {
			p := filepath.Join(root, "f"+strconv.Itoa(i), "file"+strconv.Itoa(j)+".txt")
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				return err
			}
			if err := os.WriteFile(p, []byte(strings.Repeat("line of text\n", 20+j)), 0o644); err != nil {
				return err
			}
		}
	}
	st, err := sqlite.Open(ctx, filepath.Join(dir, "vigil.db"), nil)
	if err != nil {
		return err
	}
	defer st.Close()

	sched := scheduler.New(scheduler.Config{})
	notifier := fsevent.New(fsevent.Config{
		PokeFunc:   sched.Poke,
		ActiveFunc: func(id string) bool { _, _, ok := sched.Info(id); return ok },
		Disabled:   poll,
	})
	fw := folder.New(folder.Config{Roots: []string{root}, Waker: notifier, BlobDir: filepath.Join(dir, "folder")})
	l := vigil.DefaultLimits()
	l.MaxActivePerRecipient = max(l.MaxActivePerRecipient, n)
	eng := engine.New(engine.Config{Store: st, Watchers: watcher.NewRegistry(fw), Scheduler: sched, Limits: l})
	if err := eng.Prime(ctx); err != nil {
		return err
	}
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() { _ = eng.Run(runCtx) }()
	go func() { _ = notifier.Run(runCtx) }()

	start := time.Now()
	ids := make([]string, n)
	for i := range n {
		pred, _ := json.Marshal(map[string]any{"path": filepath.Join(root, "f"+strconv.Itoa(i)), "standing": true,
			"settle": vigil.FormatDuration(settle)})
		w, err := eng.Register(ctx, vigil.RegisterRequest{Kind: vigil.KindFolder, Recipient: "bench", Predicate: pred})
		if err != nil {
			return err
		}
		ids[i] = w.ID
	}
	// Wait for every baseline to be written.
	for _, id := range ids {
		for {
			w, err := eng.Watch(ctx, id)
			if err != nil {
				return err
			}
			if w.LastObservation != nil {
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	w0, _ := eng.Watch(ctx, ids[0])
	watches, dirs := notifier.Len()
	fmt.Printf("setup: %d standing folder watches (%d files each) registered and baselined in %v; wake: %v; notifier: %d watches, %d directories; every %v\n",
		n, files, time.Since(start).Round(time.Millisecond), w0.LastObservation.Facts["wake"], watches, dirs, w0.Every)

	time.Sleep(2 * time.Second)
	runtime.GC()
	polls := func() (total int) {
		for _, id := range ids {
			_, p, _ := sched.Info(id)
			total += p
		}
		return total
	}
	observedAt := func() map[string]time.Time {
		m := make(map[string]time.Time, len(ids))
		for _, id := range ids {
			if w, err := eng.Watch(ctx, id); err == nil && w.LastObservation != nil {
				m[id] = w.LastObservation.At
			}
		}
		return m
	}
	before := observedAt()
	polls0 := polls()
	cpu0, io0 := cpuTime(), writeBytes()
	time.Sleep(idleFor)
	cpu1, io1 := cpuTime(), writeBytes()
	probes := polls() - polls0
	written := 0
	for id, at := range observedAt() {
		if !at.Equal(before[id]) {
			written++
		}
	}
	perMin := time.Duration(float64(cpu1-cpu0) * float64(time.Minute) / float64(idleFor))
	fmt.Printf("idle: %v CPU per minute (user+sys, getrusage), %d bytes written (/proc/self/io write_bytes) over %v, no folder changing; %d probes, %d observations written\n",
		perMin, io1-io0, idleFor, probes, written)

	if !poll {
		// Rounds of safety re-checks (each watch's interval), forced: every
		// watch probed once with nothing changed. The first round after the
		// baseline also tidies each watch's kept contents once.
		if cpuprofile != "" {
			f, err := os.Create(cpuprofile)
			if err != nil {
				return err
			}
			if err := pprof.StartCPUProfile(f); err != nil {
				return err
			}
			defer pprof.StopCPUProfile()
		}
		for round := 1; round <= 2; round++ {
			runtime.GC()
			cpu0 = cpuTime()
			t0 := time.Now()
			for _, id := range ids {
				sched.Poke(id)
			}
			for _, id := range ids {
				for {
					_, polls, _ := sched.Info(id)
					if polls >= 1+round {
						break
					}
					time.Sleep(5 * time.Millisecond)
				}
			}
			cost := cpuTime() - cpu0
			fmt.Printf("re-check round %d: %d watches probed once, nothing changed: %v CPU (%v wall); amortized over the %v interval: %v per minute\n",
				round, n, cost.Round(time.Millisecond), time.Since(t0).Round(time.Millisecond), w0.Every,
				time.Duration(float64(cost)*float64(time.Minute)/float64(w0.Every)).Round(10*time.Microsecond))
		}
		pprof.StopCPUProfile()
	}

	after := int64(0)
	for e := range edits {
		page, err := eng.Messages(ctx, vigil.MessagesRequest{Recipient: "bench", After: &after, Limit: 1000})
		if err != nil {
			return err
		}
		if m := page.Messages; len(m) > 0 {
			after = m[len(m)-1].Seq
		}
		i := (e * 7919) % n
		p := filepath.Join(root, "f"+strconv.Itoa(i), "file0.txt")
		edited := time.Now()
		if err := os.WriteFile(p, []byte("edited "+strconv.Itoa(e)+"\n"), 0o644); err != nil {
			return err
		}
		deadline := edited.Add(settle + 60*time.Second)
		var got *vigil.Message
		for got == nil && time.Now().Before(deadline) {
			page, err := eng.Messages(ctx, vigil.MessagesRequest{Recipient: "bench", After: &after, Wait: 30 * time.Second})
			if err != nil {
				return err
			}
			for _, m := range page.Messages {
				if m.WatchID == ids[i] && m.Type == vigil.MessageChanged {
					got = m
				}
			}
			if m := page.Messages; len(m) > 0 {
				after = m[len(m)-1].Seq
			}
		}
		if got == nil {
			return fmt.Errorf("edit %d: no report within settle + 60s", e)
		}
		lat := got.CreatedAt.Sub(edited)
		fmt.Printf("edit %d: report committed %v after the edit (settle %v, so %v past it): %q\n",
			e, lat.Round(time.Millisecond), settle, (lat - settle).Round(time.Millisecond), got.Text[strings.LastIndex(got.Text, ":")+2:])
	}
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
