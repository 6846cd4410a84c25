package engine_test

import (
	"context"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/vigil-run/vigil"
	"github.com/vigil-run/vigil/watcher"
	"github.com/vigil-run/vigil/watcher/timer"
)

// listStore answers WatchListPending with rows made as a store's scan makes
// them (every string its own allocation) and holds nothing else, so that the
// heap is the scheduler's alone.
type listStore struct {
	vigil.Store
	rows []vigil.ScheduleEntry
}

func (s *listStore) WatchListPending(context.Context) ([]vigil.ScheduleEntry, error) {
	out := s.rows
	s.rows = nil // let the caller own them, as a scan's rows are
	return out, nil
}

func (s *listStore) Prune(context.Context, vigil.PruneParams) (vigil.PruneResult, error) {
	return vigil.PruneResult{}, nil
}

// BenchmarkGCWithPendingWatches is one garbage collection of a process
// whose heap is a scheduler primed with 100 000 pending timers: what the
// runtime's forced collection, at least every two minutes, costs an idle
// daemon. An op is one collection.
func BenchmarkGCWithPendingWatches(b *testing.B) {
	const n = 100_000
	at := time.Now().Add(time.Hour)
	st := &listStore{rows: make([]vigil.ScheduleEntry, n)}
	for i := range st.rows {
		st.rows[i] = vigil.ScheduleEntry{ID: fmt.Sprintf("01JBENCH%018d", i), Kind: vigil.Kind(string([]byte("timer"))),
			StartAt: at, CreatedAt: at.Add(-time.Hour)}
	}
	s := newSched(schedConfig{Store: st, Watchers: watcher.NewRegistry(timer.New(timer.Config{}))})
	if err := s.Prime(context.Background()); err != nil {
		b.Fatal(err)
	}
	if s.Len() != n {
		b.Fatalf("primed %d watches, want %d", s.Len(), n)
	}
	runtime.GC()
	for b.Loop() {
		runtime.GC()
	}
	runtime.KeepAlive(s)
}
