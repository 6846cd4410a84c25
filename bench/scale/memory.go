package main

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"slices"
	"strings"
	"time"

	"github.com/vigil-run/vigil"
	"github.com/vigil-run/vigil/daemon"
	"github.com/vigil-run/vigil/engine"
	"github.com/vigil-run/vigil/store/sqlite" // also registers the "sqlite" database/sql driver (modernc.org/sqlite)
	"github.com/vigil-run/vigil/watcher"
	"github.com/vigil-run/vigil/watcher/timer"
)

// Targets of issue #8.
const (
	targetRSSPerWatch  = 512 // bytes, at 1 000 000 pending
	targetDiskPerWatch = 400 // bytes
	targetRestart      = 5 * time.Second
)

// startSample is one start of the daemon on a data directory.
type startSample struct {
	listening, ready time.Duration // from exec
	rssReady         int64         // VmRSS when /readyz first said 200
	rssSettled       int64         // VmRSS settle later
	hwm              int64         // VmHWM then
	stopTook         time.Duration // SIGTERM to exit
}

// startAndSample starts the daemon on dataDir, waits until /readyz answers
// 200, reads its RSS then and again settle later, and stops it.
func (e *env) startAndSample(dataDir string, settle time.Duration) (startSample, error) {
	var s startSample
	d, err := e.start(dataDir)
	if err != nil {
		return s, err
	}
	s.listening, s.ready, err = d.ready(5 * time.Minute)
	if err == nil {
		var u usage
		if u, err = readUsage(d.pid()); err == nil {
			s.rssReady = u.rss
			time.Sleep(settle)
			if u, err = readUsage(d.pid()); err == nil {
				s.rssSettled, s.hwm = u.rss, u.hwm
			}
		}
	}
	took, serr := d.stop(time.Minute)
	s.stopTook = took
	if err == nil {
		err = serr
	}
	return s, err
}

// samples starts the daemon runs times on dataDir.
func (e *env) samples(dataDir string, settle time.Duration) ([]startSample, error) {
	var out []startSample
	for range e.cfg.runs {
		s, err := e.startAndSample(dataDir, settle)
		if err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, nil
}

func field[T any](ss []startSample, f func(startSample) T) []T {
	out := make([]T, len(ss))
	for i, s := range ss {
		out[i] = f(s)
	}
	return out
}

// diskUse is what a store takes on disk with no daemon running on it.
type diskUse struct {
	files  int64            // vigil.db and vigil.db-wal
	used   int64            // (page_count - freelist_count) * page_size
	tables map[string]int64 // bytes per table and index (dbstat), if the build has it
}

func diskUsage(ctx context.Context, dataDir string) (diskUse, error) {
	path := filepath.Join(dataDir, daemon.DatabaseFile)
	d := diskUse{files: fileSize(path) + fileSize(path+"-wal")}
	db, err := sql.Open("sqlite", path+"?_pragma=query_only(1)&_pragma=busy_timeout(10000)")
	if err != nil {
		return d, err
	}
	defer db.Close()
	var size, pages, free int64
	for q, dst := range map[string]*int64{"PRAGMA page_size": &size, "PRAGMA page_count": &pages, "PRAGMA freelist_count": &free} {
		if err := db.QueryRowContext(ctx, q).Scan(dst); err != nil {
			return d, fmt.Errorf("%s: %w", q, err)
		}
	}
	d.used = (pages - free) * size
	rows, err := db.QueryContext(ctx, "SELECT name, SUM(pgsize) FROM dbstat GROUP BY name")
	if err != nil {
		return d, nil // no dbstat in this build: no breakdown
	}
	defer rows.Close()
	d.tables = map[string]int64{}
	for rows.Next() {
		var name string
		var b int64
		if err := rows.Scan(&name, &b); err != nil {
			return d, err
		}
		d.tables[name] = b
	}
	return d, rows.Err()
}

// breakdown lists the largest tables and indexes, per watch.
func (d diskUse) breakdown(empty diskUse, n int) string {
	type tb struct {
		name string
		b    int64
	}
	var ts []tb
	for name, b := range d.tables {
		ts = append(ts, tb{name, b - empty.tables[name]})
	}
	slices.SortFunc(ts, func(a, b tb) int { return int(b.b - a.b) })
	var parts []string
	for _, t := range ts {
		if t.b*100 < d.used-empty.used { // under 1 %
			continue
		}
		parts = append(parts, fmt.Sprintf("%s %s", t.name, perWatch(t.b, n)))
	}
	return strings.Join(parts, ", ")
}

// inproc is vigil's engine primed in this process on a store.
type inproc struct {
	open, list, prime time.Duration // list: WatchListPending alone, which Prime also calls
	heap              int64         // Go heap held after Prime, after a GC, beyond what the open store held
}

// primeInProcess opens the store in dataDir (no daemon on it) as the daemon
// does, primes an engine on it, and measures the time and the Go heap the
// scheduler keeps. The store is closed again; nothing is run.
func primeInProcess(ctx context.Context, dataDir string) (inproc, error) {
	var r inproc
	var ms runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&ms)
	base := int64(ms.HeapAlloc)
	t := time.Now()
	st, err := sqlite.Open(ctx, filepath.Join(dataDir, daemon.DatabaseFile), nil)
	if err != nil {
		return r, err
	}
	defer st.Close()
	r.open = time.Since(t)
	runtime.GC()
	runtime.ReadMemStats(&ms)
	base = max(base, int64(ms.HeapAlloc))
	t = time.Now()
	if _, err := st.WatchListPending(ctx); err != nil {
		return r, err
	}
	r.list = time.Since(t)
	runtime.GC()
	eng := engine.New(engine.Config{Store: st, Watchers: watcher.NewRegistry(timer.New(timer.Config{})), Limits: vigil.DefaultLimits()})
	t = time.Now()
	if err := eng.Prime(ctx); err != nil {
		return r, err
	}
	r.prime = time.Since(t)
	runtime.GC()
	runtime.ReadMemStats(&ms)
	r.heap = int64(ms.HeapAlloc) - base
	runtime.KeepAlive(eng)
	return r, nil
}

func memory(ctx context.Context, e *env, sizes []int) error {
	t := &table{
		title: fmt.Sprintf("memory: RSS and disk per pending watch — vigil serve, %s; pending timers due in 2 h; RSS = VmRSS of the daemon %v after /readyz, median of %d starts [range]", durability, e.cfg.settle, e.cfg.runs),
		head:  []string{"pending", "made by", "RSS empty store", "RSS at ready", "RSS settled", "peak VmHWM", "RSS/watch", "target ≤ 512 B", "db live pages", "disk/watch", "target ≤ 400 B", "in-process heap/watch"},
	}
	progressf("memory: the daemon on an empty store")
	emptyDir, err := e.dir("empty")
	if err != nil {
		return err
	}
	emptyData := filepath.Join(emptyDir, "data")
	empty, err := e.samples(emptyData, e.cfg.settle)
	if err != nil {
		return err
	}
	rss0, _, _ := median(field(empty, func(s startSample) int64 { return s.rssSettled }))
	rss0ready, _, _ := median(field(empty, func(s startSample) int64 { return s.rssReady }))
	disk0, err := diskUsage(ctx, emptyData)
	if err != nil {
		return err
	}
	t.add("0", "—", mib(rss0), mib(rss0ready), mib(rss0), mib(empty[0].hwm), "—", "—", mib(disk0.used), "—", "—", "—")
	var peerRows [][]string
	var notes []string
	for _, n := range sizes {
		f, err := e.pendingFixture(ctx, n)
		if err != nil {
			return err
		}
		progressf("memory: %d pending, %d starts", n, e.cfg.runs)
		ss, err := e.samples(f.dataDir, e.cfg.settle)
		if err != nil {
			return err
		}
		d, err := diskUsage(ctx, f.dataDir)
		if err != nil {
			return err
		}
		heap := "—"
		if e.cfg.inproc {
			r, err := primeInProcess(ctx, f.dataDir)
			if err != nil {
				return err
			}
			heap = perWatch(r.heap, n)
		}
		settled := field(ss, func(s startSample) int64 { return s.rssSettled })
		per := field(ss, func(s startSample) float64 { return float64(s.rssSettled-rss0) / float64(n) })
		perReady := field(ss, func(s startSample) float64 { return float64(s.rssReady-rss0ready) / float64(n) })
		medPer, _, _ := median(per)
		diskPer := float64(d.used-disk0.used) / float64(n)
		target := "—"
		if n >= 1_000_000 {
			target = verdict(medPer <= targetRSSPerWatch)
		}
		t.add(count(int64(n)), f.method,
			mib(rss0),
			withRange(field(ss, func(s startSample) int64 { return s.rssReady }), mib),
			withRange(settled, mib),
			withRange(field(ss, func(s startSample) int64 { return s.hwm }), mib),
			withRange(per, func(v float64) string { return fmt.Sprintf("%.0f B", v) }),
			target,
			mib(d.used),
			fmt.Sprintf("%.0f B", diskPer),
			verdict(diskPer <= targetDiskPerWatch),
			heap)
		medReady, _, _ := median(perReady)
		notes = append(notes, fmt.Sprintf("%s pending: RSS per watch at the moment /readyz said 200 (before the garbage of priming is returned): %.0f B; db files %s (%s per watch); by table and index: %s",
			count(int64(n)), medReady, mib(d.files), perWatch(d.files-disk0.files, n), d.breakdown(disk0, n)))
		for _, p := range e.cfg.peers {
			row, err := peerMemory(ctx, e, p, n)
			if err != nil {
				row = []string{p, count(int64(n)), "skipped: " + err.Error(), "", ""}
			}
			peerRows = append(peerRows, row)
		}
	}
	t.note("RSS/watch = (RSS settled with N pending − RSS settled on an empty store) / N; the same binary and flags, a fresh process each start")
	t.note("disk/watch = (live pages with N pending − live pages of the empty store) / N, read with PRAGMA page_count, freelist_count and page_size after the daemon stopped (its WAL checkpointed)")
	t.note("made by: http = registered through the daemon's API (client/, admin token), then the daemon stopped; store = registered in-process through engine.Register on store/sqlite (synchronous=FULL) before any daemon ran. Either way the daemon measured is a fresh process started on the finished store")
	t.note("in-process heap/watch: vigil's engine primed in this process on the same store: Go heap after Prime and a GC, less the open store's")
	for _, n := range notes {
		t.note("%s", n)
	}
	t.print()
	if len(peerRows) > 0 {
		pt := &table{
			title: "memory: peers — the same number of jobs scheduled 2 h ahead, none run",
			head:  []string{"peer", "pending", "memory/job", "disk/job", "how"},
			rows:  peerRows,
		}
		pt.note("asynq: Redis's INFO used_memory after minus before, over N (server-wide: anything else using that Redis counts too); this Redis runs with persistence off, so nothing is on disk")
		pt.note("river: pg_total_relation_size of river_job (heap, indexes, TOAST) after minus before, over N; PostgreSQL keeps it in shared buffers, not in a per-job process memory")
		pt.print()
	}
	return nil
}

// free returns the bench process's garbage to the OS between phases.
func free() {
	runtime.GC()
	debug.FreeOSMemory()
}
