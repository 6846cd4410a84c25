package engine_test

import (
	"context"
	"testing"
	"time"

	"github.com/vigil-run/vigil"
	"github.com/vigil-run/vigil/store/memstore"
	"github.com/vigil-run/vigil/watcher"
	"github.com/vigil-run/vigil/watcher/watchertest"
)

// TestAnswerSettlesOnce: an answer from outside a probe settles a watch
// through the same rules and the store's compare-and-set: a second answer
// made from a stale copy loses, and an answer that settles nothing leaves
// the watch scheduled.
func TestAnswerSettlesOnce(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	st := memstore.New()
	s := newSched(schedConfig{Store: st, Watchers: watcher.NewRegistry(watchertest.NeverSettles(vigil.KindHTTP)),
		NowFunc: func() time.Time { return t0 }})
	ctx := context.Background()
	if err := s.Prime(ctx); err != nil {
		t.Fatal(err)
	}
	w := newWatch("w1", time.Minute, t0)
	create(t, st, w)
	s.Add(w, nil)
	stale := *w
	if won, err := s.Answer(ctx, w, vigil.Observation{Verdict: vigil.VerdictPending}); won || err != nil {
		t.Fatalf("a pending answer: %v, %v; want nothing settled", won, err)
	}
	if _, _, ok := s.Info("w1"); !ok {
		t.Fatal("a pending answer unscheduled the watch")
	}
	if won, err := s.Answer(ctx, w, vigil.Observation{Verdict: vigil.VerdictSatisfied, Summary: "done"}); !won || err != nil {
		t.Fatalf("first answer: %v, %v; want it to win", won, err)
	}
	if _, _, ok := s.Info("w1"); ok {
		t.Fatal("a settled watch is still scheduled")
	}
	if won, err := s.Answer(ctx, &stale, vigil.Observation{Verdict: vigil.VerdictFailed}); won || err != nil {
		t.Fatalf("second answer from a stale copy: %v, %v; want it to lose", won, err)
	}
	got, _ := st.WatchGet(ctx, "w1")
	zero := int64(0)
	page, _ := st.MessagesRead(ctx, vigil.MessagesReadParams{Recipient: "r", After: &zero})
	if got.State != vigil.StateFired || len(page.Messages) != 1 {
		t.Fatalf("watch %s with %d messages, want fired with one", got.State, len(page.Messages))
	}
}
