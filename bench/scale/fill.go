package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/vigil-run/vigil"
	"github.com/vigil-run/vigil/daemon"
	"github.com/vigil-run/vigil/engine"
	"github.com/vigil-run/vigil/store/sqlite"
	"github.com/vigil-run/vigil/watcher"
	"github.com/vigil-run/vigil/watcher/timer"
)

// timerPlan is one timer to register.
type timerPlan struct {
	recipient string
	at        time.Time
}

func (p timerPlan) request() vigil.RegisterRequest {
	return vigil.RegisterRequest{Kind: vigil.KindTimer, Recipient: p.recipient,
		Predicate: []byte(`{"at":"` + vigil.FormatTime(p.at) + `"}`)}
}

// Fill methods, as the tables name them.
const (
	fillHTTP  = "http"
	fillStore = "store"
)

// fillMethod says how n pending watches are made under -fill.
func (e *env) fillMethod(n int) string {
	switch e.cfg.fill {
	case fillHTTP, fillStore:
		return e.cfg.fill
	}
	if n <= 100_000 {
		return fillHTTP
	}
	return fillStore
}

// fillTimers makes n pending timers, timer i as plan(i), in dataDir (new,
// no daemon on it), one of two ways:
//
//   - http: it starts the daemon and registers them through the Go client
//     from -conc goroutines with the admin token;
//   - store: it registers them in this process through vigil's engine
//     (engine.Register: the same validation, canonical predicate, identity
//     and row as the daemon's) on the SQLite store in dataDir, opened with
//     the daemon's defaults (synchronous=FULL), then closes the store. No
//     daemon runs meanwhile.
//
// If keep, it returns the daemon running on dataDir (for store, started
// after the fill; the caller waits for it to be ready); else it leaves no
// daemon running. check, when set, is called every second with the
// progress; its error aborts the fill.
func (e *env) fillTimers(ctx context.Context, dataDir string, n int, plan func(int) timerPlan, check func(done int, elapsed time.Duration) error, keep bool) (string, time.Duration, *proc, error) {
	method := e.fillMethod(n)
	if method == fillStore {
		took, err := fillInProcess(ctx, dataDir, n, 4*e.cfg.conc, plan, check)
		if err != nil || !keep {
			return method, took, nil, err
		}
		d, err := e.start(dataDir)
		return method, took, d, err
	}
	d, err := e.start(dataDir)
	if err != nil {
		return method, 0, nil, err
	}
	took, err := func() (time.Duration, error) {
		if _, _, err := d.ready(time.Minute); err != nil {
			return 0, err
		}
		c, err := d.client(e.cfg.conc)
		if err != nil {
			return 0, err
		}
		return registerN(ctx, n, e.cfg.conc, func(ctx context.Context, i int) error {
			w, err := c.Register(ctx, plan(i).request())
			if err == nil && w.Existing {
				err = fmt.Errorf("timer %d is an existing watch: two plans share an identity", i)
			}
			return err
		}, check)
	}()
	if err != nil || !keep {
		_, serr := d.stop(time.Minute)
		return method, took, nil, errors.Join(err, serr)
	}
	return method, took, d, nil
}

// fillInProcess is the store method of fillTimers.
func fillInProcess(ctx context.Context, dataDir string, n, conc int, plan func(int) timerPlan, check func(int, time.Duration) error) (time.Duration, error) {
	if err := os.MkdirAll(dataDir, 0o700); err != nil {
		return 0, err
	}
	st, err := sqlite.Open(ctx, filepath.Join(dataDir, daemon.DatabaseFile), nil) // the defaults: synchronous=FULL
	if err != nil {
		return 0, err
	}
	l := vigil.DefaultLimits()
	l.MaxActive, l.MaxActivePerRecipient = 100_000_000, 100_000_000
	eng := engine.New(engine.Config{Store: st, Watchers: watcher.NewRegistry(timer.New(timer.Config{})), Limits: l})
	took, err := registerN(ctx, n, conc, func(ctx context.Context, i int) error {
		w, err := eng.Register(ctx, plan(i).request())
		if err == nil && w.Existing {
			err = fmt.Errorf("timer %d is an existing watch: two plans share an identity", i)
		}
		return err
	}, check)
	err = errors.Join(err, st.Close())
	// The engine's scheduler held every watch in memory: let it go.
	eng = nil
	_ = eng
	runtime.GC()
	debug.FreeOSMemory()
	return took, err
}

// registerN calls reg for i in [0, n) from conc goroutines and stops at
// the first error. Every second it calls check (if set) with the progress;
// every 15 s it reports progress on stderr.
func registerN(ctx context.Context, n, conc int, reg func(ctx context.Context, i int) error, check func(done int, elapsed time.Duration) error) (time.Duration, error) {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var next, done atomic.Int64
	start := time.Now()
	var wg sync.WaitGroup
	for range min(conc, n) {
		wg.Go(func() {
			for ctx.Err() == nil {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				if err := reg(ctx, i); err != nil {
					cancel(fmt.Errorf("registering %d: %w", i, err))
					return
				}
				done.Add(1)
			}
		})
	}
	stop := make(chan struct{})
	var mon sync.WaitGroup
	mon.Go(func() {
		t := time.NewTicker(time.Second)
		defer t.Stop()
		last := start
		for {
			select {
			case <-stop:
				return
			case <-t.C:
			}
			d, el := int(done.Load()), time.Since(start)
			if check != nil {
				if err := check(d, el); err != nil {
					cancel(err)
					return
				}
			}
			if time.Since(last) >= 15*time.Second {
				progressf("  %d of %d registered (%.0f/s)", d, n, float64(d)/el.Seconds())
				last = time.Now()
			}
		}
	})
	wg.Wait()
	close(stop)
	mon.Wait()
	if err := context.Cause(ctx); err != nil {
		return 0, err
	}
	return time.Since(start), nil
}
