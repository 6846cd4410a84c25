package scheduler_test

import (
	"context"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/vigil-run/vigil"
	"github.com/vigil-run/vigil/internal/cputime"
	"github.com/vigil-run/vigil/scheduler"
)

// benchIDs are ids as a registration makes them: ULID-long, each its own
// string.
func benchIDs(prefix string, n int) []string {
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("01J%s%019d", prefix, i) // 26 bytes, as a ULID
	}
	return ids
}

// pending returns a scheduler holding n timers due in hours, added as
// registrations add them.
func pending(n int) *scheduler.Scheduler {
	s := scheduler.New(scheduler.Config{})
	at := time.Now().Add(2 * time.Hour)
	es := make([]*scheduler.Entry, 0, 4096)
	for i, id := range benchIDs("PEND", n) {
		e := scheduler.NewEntry(id, vigil.KindTimer, 0, time.Time{}, true)
		e.SetDue(at.Add(time.Duration(i) * time.Millisecond))
		if es = append(es, e); len(es) == cap(es) {
			s.AddMany(es)
			es = es[:0]
		}
	}
	s.AddMany(es)
	return s
}

// BenchmarkGCMarkAtMillion is one garbage collection of a process whose
// heap is a scheduler holding 1 000 000 pending watches: what the
// runtime's forced collection, at least every two minutes, costs an idle
// daemon. An op is one runtime.GC; B/watch is the live heap the scheduler
// holds per watch.
func BenchmarkGCMarkAtMillion(b *testing.B) {
	const n = 1_000_000
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	s := pending(n)
	runtime.GC()
	runtime.ReadMemStats(&after)
	if s.Len() != n {
		b.Fatalf("holds %d watches, want %d", s.Len(), n)
	}
	cpu := cputime.Self()
	for b.Loop() {
		runtime.GC()
	}
	reportCPU(b, cpu, 1)
	b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/n, "B/watch")
	runtime.KeepAlive(s)
}

// BenchmarkGCMarkMapAtMillion is the same collection over a
// map[string]int32 of a million ids, each its own string: what an index
// from id to slot would cost if it were a Go map (the scheduler's own is
// a table without pointers). For comparison only.
func BenchmarkGCMarkMapAtMillion(b *testing.B) {
	const n = 1_000_000
	m := make(map[string]int32, n)
	for i, id := range benchIDs("MAPX", n) {
		m[id] = int32(i)
	}
	runtime.GC()
	cpu := cputime.Self()
	for b.Loop() {
		runtime.GC()
	}
	reportCPU(b, cpu, 1)
	runtime.KeepAlive(m)
}

// BenchmarkAddRemove is one registration armed and cancelled, beside a
// million pending watches.
func BenchmarkAddRemove(b *testing.B) {
	s := pending(1_000_000)
	ids := benchIDs("ADDR", 1<<16)
	due := time.Now().Add(time.Hour)
	i := 0
	cpu := cputime.Self()
	for b.Loop() {
		id := ids[i&(len(ids)-1)]
		i++
		e := scheduler.NewEntry(id, vigil.KindHTTP, time.Minute, time.Time{}, false)
		e.SetDue(due)
		if !s.Add(e) {
			b.Fatal("Add refused a new watch")
		}
		s.Remove(id)
	}
	reportCPU(b, cpu, 1)
}

// dropper settles every instant entry at once.
type dropper struct{ s *scheduler.Scheduler }

func (d dropper) Probe(context.Context, *scheduler.Entry, time.Time, func(string) bool) {}
func (d dropper) Instant(_ context.Context, es []*scheduler.Entry, _ time.Time) {
	for _, e := range es {
		d.s.Drop(e)
	}
}
func (d dropper) Prune(context.Context, time.Time) time.Time { return time.Time{} }

// BenchmarkTimerLife is a timer's whole life in the scheduler, beside a
// million pending watches: added (1 024 at once, as a batch registration
// adds them), popped when due, handed to the prober in a batch, dropped.
// An op is one timer.
func BenchmarkTimerLife(b *testing.B) {
	s := pending(1_000_000)
	ids := benchIDs("LIFE", 1024)
	now := time.Now()
	es := make([]*scheduler.Entry, len(ids))
	p := dropper{s}
	cpu := cputime.Self()
	for b.Loop() {
		for i, id := range ids {
			es[i] = scheduler.NewEntry(id, vigil.KindTimer, 0, time.Time{}, true)
			es[i].SetDue(now)
		}
		s.AddMany(es)
		if got := s.Tick(context.Background(), p, now); got != len(ids) {
			b.Fatalf("Tick settled %d, want %d", got, len(ids))
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(ids)), "ns/timer")
	reportCPU(b, cpu, len(ids))
}

// reportCPU reports the process's CPU time since cpu per op, and per
// watch when an op is many.
func reportCPU(b *testing.B, cpu time.Duration, per int) {
	used := float64((cputime.Self() - cpu).Nanoseconds())
	b.ReportMetric(used/float64(b.N), "cpu-ns/op")
	if per > 1 {
		b.ReportMetric(used/float64(b.N*per), "cpu-ns/timer")
	}
}
