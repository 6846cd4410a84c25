package postgres

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
)

// BenchmarkHeartbeat is an idle replica's lease step: the heartbeat of a
// replica holding 21 of the 64 shards (two others hold the rest), with the repair scan, over a table
// of pending watches in those shards. Besides the client's time it reports
// the CPU the server's backends spent per heartbeat (backend-us/op, from
// /proc/PID/schedstat of the lease pool's backends: run it on the
// database's machine) and the WAL the server wrote per heartbeat
// (wal-B/op: every database's, so an upper bound on a shared server):
// 3 idle replicas make 36 heartbeats a minute.
//
//	VIGIL_TEST_POSTGRES=postgres://… go test ./store/postgres -run XXX -bench Heartbeat -benchtime 2000x
//
// Its sub-benchmarks are the two kinds of lease: "session" (schema 13, a
// server with idle_session_timeout), where the heartbeat runs on the
// replica's lease session and writes nothing, and "rows", where it
// renews the replica's row; and "quick", the heartbeat on a lease session
// with nothing changed since the last (HeartbeatParams.Quick), most of an
// idle replica's steps.
func BenchmarkHeartbeat(b *testing.B) {
	b.Run("session", func(b *testing.B) { benchHeartbeat(b, true, false) })
	b.Run("quick", func(b *testing.B) { benchHeartbeat(b, true, true) })
	b.Run("rows", func(b *testing.B) { benchHeartbeat(b, false, false) })
}

func benchHeartbeat(b *testing.B, session, quick bool) {
	ctx := context.Background()
	s := internalStore(b, 4)
	if session && !s.sessionLeases {
		b.Skip("the server has no idle_session_timeout")
	}
	s.sessionLeases = session
	hp := HeartbeatParams{Replica: "bench", Live: 13 * time.Second, Lease: 15 * time.Second}
	// A daemon records its signing keys' fingerprints before its first
	// heartbeat; a replica without them is unchecked at every heartbeat.
	if err := s.RecordKeys(ctx, "bench", KeyPrints{Webhook: []string{"0123456789abcdef"}, Link: "fedcba9876543210"}, time.Minute,
		func([]PeerKeys) error { return nil }); err != nil {
		b.Fatal(err)
	}
	if _, err := s.Heartbeat(ctx, hp); err != nil {
		b.Fatal(err)
	}
	held, err := s.Acquire(ctx, "bench", 21, 15*time.Second, 0)
	if err != nil || len(held) != 21 {
		b.Fatalf("acquire: %d shards, %v", len(held), err)
	}
	// The other two replicas (their own sessions) hold the rest.
	for _, r := range []string{"other1", "other2"} {
		op := HeartbeatParams{Replica: r, Live: hp.Live, Lease: hp.Lease}
		if _, err := s.Heartbeat(ctx, op); err != nil {
			b.Fatal(err)
		}
		if _, err := s.Acquire(ctx, r, 22, 15*time.Second, 0); err != nil {
			b.Fatal(err)
		}
	}
	if _, err := s.pool.Exec(ctx, `INSERT INTO watches (id, recipient, kind, state, identity, created_at)
		SELECT 'w' || g, 'r', 'timer', 'pending', 'i' || g, g FROM generate_series(1, 10000) AS g`); err != nil {
		b.Logf("no watches inserted (%v): the scan reads an empty index", err)
	}
	hp.Held = held
	p, err := s.Heartbeat(ctx, hp)
	if err != nil {
		b.Fatal(err)
	}
	hp.PendingSince = p.Now
	hp.Quick = quick
	// Warm both connections of the lease pool, then note their backends.
	for range 10 {
		if _, err := s.Heartbeat(ctx, hp); err != nil {
			b.Fatal(err)
		}
	}
	var pids []int
	for _, c := range s.leasePool.AcquireAllIdle(ctx) {
		var pid int
		if err := c.QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&pid); err == nil {
			pids = append(pids, pid)
		}
		c.Release()
	}
	if se := s.sessions.get("bench", 0); se.conn != nil {
		var pid int
		if err := se.conn.QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&pid); err == nil {
			pids = append(pids, pid)
		}
	}
	cpu := func() time.Duration {
		var d time.Duration
		for _, pid := range pids {
			bs, err := os.ReadFile(fmt.Sprintf("/proc/%d/schedstat", pid))
			if err != nil {
				return -1
			}
			ns, _ := strconv.ParseInt(strings.Fields(string(bs))[0], 10, 64)
			d += time.Duration(ns)
		}
		return d
	}
	lsn := func() int64 {
		var n int64
		if err := s.pool.QueryRow(ctx, `SELECT pg_current_wal_insert_lsn() - '0/0'`).Scan(&n); err != nil {
			b.Fatal(err)
		}
		return n
	}
	w0, c0 := lsn(), cpu()
	b.ResetTimer()
	for range b.N {
		if p, err := s.Heartbeat(ctx, hp); err != nil || len(p.Renewed) != 21 || p.Quick != quick {
			b.Fatalf("heartbeat: %d renewed, quick %t, %v", len(p.Renewed), p.Quick, err)
		}
	}
	b.StopTimer()
	// The server's WAL, whoever wrote it: an upper bound on a shared
	// server.
	b.ReportMetric(float64(lsn()-w0)/float64(b.N), "wal-B/op")
	if c1 := cpu(); c0 >= 0 && c1 >= 0 {
		b.ReportMetric(float64(c1-c0)/float64(time.Microsecond)/float64(b.N), "backend-us/op")
	}
}
