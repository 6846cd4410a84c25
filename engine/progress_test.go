package engine_test

import (
	"context"
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/vigil-run/vigil"
	"github.com/vigil-run/vigil/store/memstore"
	"github.com/vigil-run/vigil/watcher"
	"github.com/vigil-run/vigil/watcher/watchertest"
)

// TestProgressEvents: a watch with progress: true publishes
// watch.progress after each probe that leaves it pending; nothing is
// stored or mailed for it; a watch without the flag publishes none.
func TestProgressEvents(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	st := memstore.New()
	var (
		mu     sync.Mutex
		events []vigil.Event
	)
	s := newSched(schedConfig{Store: st, Watchers: watcher.NewRegistry(watchertest.NeverSettles(vigil.KindHTTP)),
		NowFunc: func() time.Time { return now },
		EventFunc: func(ev vigil.Event) {
			mu.Lock()
			events = append(events, ev)
			mu.Unlock()
		}})
	with := newWatch("with", 10*time.Second, now)
	with.Deliver = json.RawMessage(`{"progress":true}`)
	without := newWatch("without", 10*time.Second, now)
	without.Deliver = json.RawMessage(`{"webhook":{"url":"https://hooks.example/x"}}`)
	create(t, st, with)
	create(t, st, without)
	ctx := context.Background()
	if err := s.Prime(ctx); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		now = now.Add(time.Duration(i+1) * 30 * time.Second)
		s.Tick(ctx, now)
	}
	mu.Lock()
	defer mu.Unlock()
	var polls []int
	for _, ev := range events {
		if ev.Type != vigil.EventWatchProgress {
			continue
		}
		if ev.WatchID != "with" || ev.State != vigil.StatePending || ev.Recipient != "r" {
			t.Errorf("progress event %+v, want only for the watch that asked", ev)
		}
		polls = append(polls, ev.Polls)
	}
	if len(polls) != 3 || polls[0] != 1 || polls[2] != 3 {
		t.Errorf("progress polls = %v, want [1 2 3]", polls)
	}
	zero := int64(0)
	page, _ := st.MessagesRead(ctx, vigil.MessagesReadParams{Recipient: "r", After: &zero})
	if len(page.Messages) != 0 {
		t.Errorf("mailbox holds %d messages, want none: progress is never mailed", len(page.Messages))
	}
}
