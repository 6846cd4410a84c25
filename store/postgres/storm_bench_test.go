package postgres

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/vigil-run/vigil"
	"github.com/vigil-run/vigil/internal/cputime"
)

// BenchmarkSettleStorm settles timers as a replica does in a storm (bench
// peers -scenario pg-storm): a store that notifies and is fenced on the
// leases of every shard, 512 watches per call, each of its own recipient,
// each with its outcome message. Besides the rate, it reports the CPU per
// settlement of this process and of the pool's PostgreSQL backends, which
// hold on a loaded machine where the rate does not.
func BenchmarkSettleStorm(b *testing.B) {
	const batch = 512
	ctx := context.Background()
	s, err := Open(ctx, benchSchema(b), &Options{MaxConns: 4, Notify: true, Replica: "bench"})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	if _, err := s.Heartbeat(ctx, HeartbeatParams{Replica: "bench", Live: time.Hour, Lease: time.Hour}); err != nil {
		b.Fatal(err)
	}
	held, err := s.Acquire(ctx, "bench", 64, time.Hour, 0)
	if err != nil || len(held) != 64 {
		b.Fatalf("acquire: %d shards, %v", len(held), err)
	}
	s.SetFence("bench", held)
	mk := func(i int64) *vigil.Watch {
		w := benchWatch(i)
		w.Kind, w.Recipient = vigil.KindTimer, "r"+strconv.FormatInt(i, 10)
		w.Predicate = []byte(`{"at":"2026-03-04T06:06:07Z"}`)
		w.Identity = vigil.Identity(w.Recipient, w.Kind, w.Mode, w.Predicate)
		return w
	}
	bulkInsertOf(b, s, int64(b.N), mk)
	all := make([]vigil.WatchSettleParams, b.N)
	for n := range all {
		w := mk(int64(n))
		out := &vigil.Outcome{State: vigil.StateFired, Sentence: "The timer set for 06:06 went off.", Reason: "satisfied",
			Observation: &vigil.Observation{Verdict: vigil.VerdictSatisfied, At: benchAt.Add(time.Hour), Summary: "06:06 passed"}}
		all[n] = vigil.WatchSettleParams{ID: w.ID, State: vigil.StateFired, Outcome: out, SettledAt: benchAt.Add(time.Hour), Polls: 1,
			Message: &vigil.Message{ID: fmt.Sprintf("01JMSG%020d", n), Recipient: w.Recipient, WatchID: w.ID,
				Type: vigil.MessageFired, Text: out.Sentence, CreatedAt: benchAt.Add(time.Hour)}}
	}
	// Three replicas listen, as in a cluster: each hears every message's
	// notification.
	lctx, stopListen := context.WithCancel(ctx)
	var listeners []int
	var wg sync.WaitGroup
	for range 3 {
		conn, err := pgx.Connect(ctx, s.pool.Config().ConnConfig.ConnString())
		if err != nil {
			b.Fatal(err)
		}
		if _, err := conn.Exec(ctx, `LISTEN "`+s.Channel()+`"`); err != nil {
			b.Fatal(err)
		}
		listeners = append(listeners, int(conn.PgConn().PID()))
		wg.Go(func() {
			defer conn.Close(context.Background())
			for {
				if _, err := conn.WaitForNotification(lctx); err != nil {
					return
				}
			}
		})
	}
	defer func() { stopListen(); wg.Wait() }()
	l0 := pidsCPU(listeners)
	pg0, self0 := s.backendsCPU(b), cputime.Self()
	b.ReportAllocs()
	b.ResetTimer()
	for start := 0; start < b.N; start += batch {
		ps := all[start:min(start+batch, b.N)]
		won, err := s.WatchSettle(ctx, ps)
		if err != nil {
			b.Fatal(err)
		}
		if !won[0] || !won[len(ps)-1] {
			b.Fatal("a settlement lost")
		}
	}
	b.StopTimer()
	pg1, self1 := s.backendsCPU(b), cputime.Self()
	l1 := pidsCPU(listeners)
	var pg time.Duration
	for pid, run := range pg1 {
		pg += run - pg0[pid]
	}
	lis := l1 - l0
	per := func(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) / float64(b.N) }
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "settles/s")
	b.ReportMetric(per(self1-self0), "client-cpu-µs/settle")
	b.ReportMetric(per(pg), "pg-cpu-µs/settle")
	b.ReportMetric(per(lis), "listen-cpu-µs/settle")
}

// backendsCPU is the run time of the pool's PostgreSQL backends
// (/proc/PID/schedstat; the server on this machine), by pid.
func (s *Store) backendsCPU(b *testing.B) map[uint32]time.Duration {
	out := map[uint32]time.Duration{}
	for _, c := range s.pool.AcquireAllIdle(context.Background()) {
		pid := c.Conn().PgConn().PID()
		c.Release()
		raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/schedstat", pid))
		if err != nil {
			b.Skipf("the backends' CPU cannot be read (%v): is PostgreSQL on this machine?", err)
		}
		ns, _ := strconv.ParseInt(strings.Fields(string(raw))[0], 10, 64)
		out[pid] = time.Duration(ns)
	}
	return out
}
