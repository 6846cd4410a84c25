package engine_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vigil-run/vigil"
	"github.com/vigil-run/vigil/store/sqlite"
)

// crashingStore dies right after the first settlement commits: the process
// is gone between commit and anything that would tell the world.
type crashingStore struct {
	vigil.Store
	crashed atomic.Bool
}

var errCrash = errors.New("simulated crash after commit")

func (s *crashingStore) WatchSettle(ctx context.Context, ps []vigil.WatchSettleParams) ([]bool, error) {
	if s.crashed.Load() {
		return nil, errCrash
	}
	won, err := s.Store.WatchSettle(ctx, ps)
	if err == nil {
		s.crashed.Store(true)
		_ = s.Store.Close()
		return nil, errCrash
	}
	return won, err
}

func TestOutcomePersistedBeforeDelivery(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "vigil.db")
	ctx := context.Background()
	st, err := sqlite.Open(ctx, path, nil)
	if err != nil {
		t.Fatal(err)
	}
	cs := &crashingStore{Store: st}
	v := newEnv(t, envOpts{store: cs})
	var ids []string
	for i := range 30 {
		// 20 due within the first minute (settled in the batch that
		// crashes), 10 in the second.
		in := fmt.Sprintf("%dms", 50_000+i)
		if i >= 20 {
			in = fmt.Sprintf("%dms", 110_000+i)
		}
		ids = append(ids, v.register(vigil.RegisterRequest{Kind: vigil.KindTimer, Predicate: obj(fmt.Sprintf(`{"in":%q}`, in)), Note: fmt.Sprint(i)}).ID)
	}
	var events atomic.Int64
	evs, _ := v.eng.Subscribe(ctx, vigil.EventFilter{})
	v.tick(t0.Add(time.Minute))
	if !cs.crashed.Load() {
		t.Fatal("the settlement never committed")
	}
	select {
	case <-evs:
		events.Add(1)
	default:
	}
	if events.Load() != 0 {
		t.Fatal("a settlement that died before returning was announced")
	}

	// Restart on the same file: the committed outcomes and their messages
	// are there, once; the rest fire once after the restart.
	st2, err := sqlite.Open(ctx, path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st2.Close()
	v2 := newEnvAt(t, envOpts{store: st2}, t0.Add(time.Minute+time.Second))
	for i, id := range ids[:20] {
		if w := v2.get(id); w.State != vigil.StateFired {
			t.Fatalf("watch %d committed before the crash is %s after reopening, want fired", i, w.State)
		}
	}
	if n := len(v2.messages("agent-1")); n != 20 {
		t.Fatalf("%d messages after reopening, want exactly 20 (one per settled watch)", n)
	}
	v2.tick(t0.Add(2 * time.Minute))
	v2.tick(t0.Add(3 * time.Minute))
	msgs := v2.messages("agent-1")
	perWatch := map[string]int{}
	for _, m := range msgs {
		perWatch[m.WatchID]++
	}
	for _, id := range ids {
		if perWatch[id] != 1 || v2.get(id).State != vigil.StateFired {
			t.Fatalf("watch %s: %d messages, state %s; want exactly one message and fired", id, perWatch[id], v2.get(id).State)
		}
	}
}
