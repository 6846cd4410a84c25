package main

import (
	"context"
	"fmt"
	"time"
)

// restart: with n pending watches in the store, the time from exec of
// `vigil serve` until /readyz answers 200. /readyz answers 503 until
// daemon.Run has resumed the receipts left by the last run and primed the
// engine (engine.Prime: every pending row read and put on the heap), so
// ready means every pending watch is armed.
func restart(ctx context.Context, e *env, sizes []int) error {
	t := &table{
		title: fmt.Sprintf("restart: from exec until /readyz answers 200 — vigil serve, %s; median of %d restarts [range]", durability, e.cfg.runs),
		head:  []string{"pending", "made by", "listening", "ready", "target ≤ 5 s", "priming (ready − listening)", "RSS at ready", "peak VmHWM", "stop (SIGTERM → exit)", "in-process open", "in-process WatchListPending", "in-process Prime"},
	}
	for _, n := range sizes {
		f, err := e.pendingFixture(ctx, n)
		if err != nil {
			return err
		}
		progressf("restart: %d pending, %d restarts", n, e.cfg.runs)
		ss, err := e.samples(f.dataDir, 0)
		if err != nil {
			return err
		}
		openT, listT, primeT := "—", "—", "—"
		if e.cfg.inproc {
			r, err := primeInProcess(ctx, f.dataDir)
			if err != nil {
				return err
			}
			free()
			openT, listT, primeT = msec(r.open), msec(r.list), msec(r.prime)
		}
		ready := field(ss, func(s startSample) time.Duration { return s.ready })
		med, _, _ := median(ready)
		target := "—"
		if n >= 1_000_000 {
			target = verdict(med <= targetRestart)
		}
		t.add(count(int64(n)), f.method,
			withRange(field(ss, func(s startSample) time.Duration { return s.listening }), msec),
			withRange(ready, msec),
			target,
			withRange(field(ss, func(s startSample) time.Duration { return s.ready - s.listening }), msec),
			withRange(field(ss, func(s startSample) int64 { return s.rssReady }), mib),
			withRange(field(ss, func(s startSample) int64 { return s.hwm }), mib),
			withRange(field(ss, func(s startSample) time.Duration { return s.stopTook }), msec),
			openT, listT, primeT)
	}
	t.note("listening: exec until the daemon first answered /readyz at all (503 before it is primed): process start, store opened and migrated, port bound")
	t.note("ready: exec until /readyz answered 200, polled every 5 ms; the daemon sets ready only after engine.Prime has armed every pending watch (daemon/daemon.go)")
	t.note("the store's pages are in the OS page cache (warm): the fixture was just written and each restart reads it again; a cold start after a reboot reads the file from disk first")
	t.note("in-process: store/sqlite Open, then WatchListPending alone (reading every pending row), then engine.Prime (which reads them again and builds the scheduler's heap), in this process on the same store: what the daemon's priming is made of")
	t.print()
	return nil
}
