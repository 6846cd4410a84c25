package postgres

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/vigil-run/vigil"
)

// BenchmarkRegisterCPU registers watches as the bench harness's
// pg-register does (each with its own recipient, far below the caps),
// one per call from 32 goroutines and in batches of 200, and reports the
// CPU the store's PostgreSQL backends ran per watch (their threads' run
// time, /proc/PID/task/*/schedstat: it needs the server on this machine
// and the right to read its processes), the figure that bounds how many
// registrations a few cores sustain, whatever else shares them:
//
//	VIGIL_TEST_POSTGRES=postgres://… go test ./store/postgres -run XXX -bench RegisterCPU -benchtime 3000x
func BenchmarkRegisterCPU(b *testing.B) {
	reg := func(i int64) vigil.WatchCreateParams {
		w := benchWatch(i)
		w.Recipient = "r" + strconv.FormatInt(i, 10)
		w.Identity = vigil.Identity(w.Recipient, w.Kind, w.Mode, w.Predicate)
		return vigil.WatchCreateParams{Watch: w, MaxActive: 10_000_000, MaxActivePerRecipient: 10_000_000}
	}
	b.Run("one", func(b *testing.B) {
		s := internalStore(b, 32)
		pids := backendPIDs(b, s.pool, 32)
		var n atomic.Int64
		cpu0 := pidsCPU(pids)
		b.ResetTimer()
		var wg sync.WaitGroup
		for range 32 {
			wg.Go(func() {
				for {
					i := n.Add(1) - 1
					if i >= int64(b.N) {
						return
					}
					if _, err := s.WatchCreate(context.Background(), reg(i)); err != nil {
						b.Error(err)
						return
					}
				}
			})
		}
		wg.Wait()
		b.StopTimer()
		b.ReportMetric(float64(pidsCPU(pids)-cpu0)/float64(time.Microsecond)/float64(b.N), "pg-cpu-µs/watch")
	})
	b.Run("batch200", func(b *testing.B) {
		s := internalStore(b, 4)
		pids := backendPIDs(b, s.pool, 4)
		cpu0 := pidsCPU(pids)
		b.ResetTimer()
		for start := 0; start < b.N; start += 200 {
			ps := make([]vigil.WatchCreateParams, 0, 200)
			for i := start; i < min(start+200, b.N); i++ {
				ps = append(ps, reg(int64(i)))
			}
			res, err := s.WatchCreateMany(context.Background(), ps)
			if err != nil {
				b.Fatal(err)
			}
			for _, r := range res {
				if r.Err != nil {
					b.Fatal(r.Err)
				}
			}
		}
		b.StopTimer()
		b.ReportMetric(float64(pidsCPU(pids)-cpu0)/float64(time.Microsecond)/float64(b.N), "pg-cpu-µs/watch")
	})
}

// backendPIDs opens all n connections of pool and returns their backends'
// process ids.
func backendPIDs(b *testing.B, pool *pgxpool.Pool, n int) []int {
	b.Helper()
	var pids []int
	var conns []*pgxpool.Conn
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for range n {
		c, err := pool.Acquire(ctx)
		if err != nil {
			b.Fatalf("open the pool's %d connections: %v", n, err)
		}
		conns = append(conns, c)
		var pid int
		if err := c.QueryRow(context.Background(), `SELECT pg_backend_pid()`).Scan(&pid); err != nil {
			b.Fatal(err)
		}
		pids = append(pids, pid)
	}
	for _, c := range conns {
		c.Release()
	}
	return pids
}

// pidsCPU is the run time of pids' threads so far.
func pidsCPU(pids []int) time.Duration {
	var sum time.Duration
	for _, pid := range pids {
		tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/schedstat", pid))
		for _, t := range tasks {
			raw, err := os.ReadFile(t)
			if err != nil {
				continue
			}
			f := strings.Fields(string(raw))
			if len(f) > 0 {
				ns, _ := strconv.ParseInt(f[0], 10, 64)
				sum += time.Duration(ns)
			}
		}
	}
	return sum
}
