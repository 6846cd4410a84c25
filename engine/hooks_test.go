package engine_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/vigil-run/vigil"
	"github.com/vigil-run/vigil/engine"
	"github.com/vigil-run/vigil/store/memstore"
	"github.com/vigil-run/vigil/watcher"
	"github.com/vigil-run/vigil/watcher/timer"
	"github.com/vigil-run/vigil/watcher/watchertest"
)

func TestDeliverAndCheckHooks(t *testing.T) {
	t.Parallel()
	c := &clock{t: t0}
	var mu sync.Mutex
	var delivered []string
	fake := watchertest.NeverSettles(vigil.KindHTTP)
	e := engine.New(engine.Config{
		Store: memstore.New(), Watchers: watcher.NewRegistry(timer.New(timer.Config{}), fake), NowFunc: c.Now,
		DeliverFunc: func(w *vigil.Watch, m *vigil.Message) {
			mu.Lock()
			defer mu.Unlock()
			if m == nil || m.Seq == 0 || w.State != vigil.StateFired {
				t.Errorf("delivered %+v with message %+v: want a fired watch with its committed message", w, m)
			}
			delivered = append(delivered, w.ID)
		},
		CheckFunc: func(ctx context.Context, w *vigil.Watch) error {
			if w.Labels["token"] == "revoked" {
				return &vigil.StopError{Reason: "revoked", Sentence: "The token that made this watch was revoked."}
			}
			return nil
		},
	})
	ctx := context.Background()
	if err := e.Prime(ctx); err != nil {
		t.Fatal(err)
	}
	tm, err := e.Register(ctx, vigil.RegisterRequest{Kind: vigil.KindTimer, Recipient: "r", Predicate: obj(`{"in":"1m"}`)})
	if err != nil {
		t.Fatal(err)
	}
	rv, err := e.Register(ctx, vigil.RegisterRequest{Kind: vigil.KindHTTP, Recipient: "r", Predicate: obj(`{}`), Labels: map[string]string{"token": "revoked"}})
	if err != nil {
		t.Fatal(err)
	}
	c.Set(t0.Add(time.Minute))
	e.Tick(ctx, t0.Add(time.Minute))
	if len(delivered) != 1 || delivered[0] != tm.ID {
		t.Fatalf("delivered %v, want only the timer %s", delivered, tm.ID)
	}
	got, _ := e.Watch(ctx, rv.ID)
	if got.State != vigil.StateCancelled || got.Outcome.Reason != "revoked" || fake.Probes(rv.ID) != 0 {
		t.Fatalf("revoked watch: %s %+v after %d probes; want cancelled before any probe", got.State, got.Outcome, fake.Probes(rv.ID))
	}
	p, _ := e.Messages(ctx, vigil.MessagesRequest{Recipient: "r"})
	if len(p.Messages) != 1 {
		t.Fatalf("mailbox %+v: a revocation must be silent", p.Messages)
	}
}

// stopper is a watcher that never settles and records the watches it was
// asked to stop.
type stopper struct {
	watcher.Watcher
	mu      sync.Mutex
	stopped []string
}

func (s *stopper) Stop(_ context.Context, id string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stopped = append(s.stopped, id)
	return nil
}

func (s *stopper) got() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.stopped...)
}

// TestCancelStopsWhatTheWatchStarted: a watcher that implements
// watcher.Stopper hears of each of its watches cancelled by its caller, by
// its recipient closing and by revocation — and of nothing else.
func TestCancelStopsWhatTheWatchStarted(t *testing.T) {
	t.Parallel()
	c := &clock{t: t0}
	st := &stopper{Watcher: watchertest.NeverSettles(vigil.KindHTTP)}
	e := engine.New(engine.Config{
		Store: memstore.New(), Watchers: watcher.NewRegistry(timer.New(timer.Config{}), st), NowFunc: c.Now,
		CheckFunc: func(ctx context.Context, w *vigil.Watch) error {
			if w.Labels["token"] == "revoked" {
				return &vigil.StopError{Reason: "revoked", Sentence: "The token that made this watch was revoked."}
			}
			return nil
		},
	})
	ctx := context.Background()
	if err := e.Prime(ctx); err != nil {
		t.Fatal(err)
	}
	reg := func(recipient, kind, pred string, labels map[string]string) string {
		t.Helper()
		w, err := e.Register(ctx, vigil.RegisterRequest{Kind: vigil.Kind(kind), Recipient: recipient, Predicate: obj(pred), Labels: labels})
		if err != nil {
			t.Fatal(err)
		}
		return w.ID
	}
	cancelled := reg("a", "http", `{"n":1}`, nil)
	closed := reg("b", "http", `{"n":2}`, nil)
	revoked := reg("a", "http", `{"n":3}`, map[string]string{"token": "revoked"})
	untouched := reg("a", "http", `{"n":4}`, nil)
	timerCancelled := reg("a", "timer", `{"in":"1h"}`, nil)

	if _, err := e.Cancel(ctx, cancelled); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Cancel(ctx, cancelled); err != nil { // settled already: nothing more to stop
		t.Fatal(err)
	}
	if _, err := e.Cancel(ctx, timerCancelled); err != nil {
		t.Fatal(err)
	}
	if _, err := e.CloseRecipient(ctx, "b"); err != nil {
		t.Fatal(err)
	}
	c.Set(t0.Add(time.Second))
	e.Tick(ctx, t0.Add(time.Second))

	want := map[string]bool{cancelled: true, closed: true, revoked: true}
	got := st.got()
	if len(got) != len(want) {
		t.Fatalf("stopped %v, want exactly %v", got, want)
	}
	for _, id := range got {
		if !want[id] {
			t.Errorf("stopped %s, which was not cancelled (untouched %s, timer %s)", id, untouched, timerCancelled)
		}
	}
}

// TestSettledElsewhereStopsWhatTheWatchStarted: a watch cancelled, or
// whose recipient closed, by another (a replica on the same database,
// whose word this engine did not hear) has what its probes started
// stopped when its next turn finds it settled.
func TestSettledElsewhereStopsWhatTheWatchStarted(t *testing.T) {
	t.Parallel()
	c := &clock{t: t0}
	store := memstore.New()
	st := &stopper{Watcher: watchertest.NeverSettles(vigil.KindHTTP)}
	e := engine.New(engine.Config{Store: store, Watchers: watcher.NewRegistry(timer.New(timer.Config{}), st), NowFunc: c.Now})
	ctx := context.Background()
	if err := e.Prime(ctx); err != nil {
		t.Fatal(err)
	}
	reg := func(recipient, pred string) string {
		t.Helper()
		w, err := e.Register(ctx, vigil.RegisterRequest{Kind: vigil.KindHTTP, Recipient: recipient, Predicate: obj(pred), Every: "30s"})
		if err != nil {
			t.Fatal(err)
		}
		return w.ID
	}
	cancelled, closed, untouched := reg("a", `{"n":1}`), reg("b", `{"n":2}`), reg("a", `{"n":3}`)
	// Elsewhere: the store, not this engine.
	if _, ok, err := store.WatchCancel(ctx, vigil.WatchCancelParams{ID: cancelled, SettledAt: t0}); err != nil || !ok {
		t.Fatalf("WatchCancel = %v, %v", ok, err)
	}
	if _, err := store.RecipientClose(ctx, vigil.RecipientCloseParams{Recipient: "b", SettledAt: t0}); err != nil {
		t.Fatal(err)
	}
	if got := st.got(); len(got) != 0 {
		t.Fatalf("stopped %v before any probe", got)
	}
	c.Set(t0.Add(time.Minute))
	e.Tick(ctx, t0.Add(time.Minute))
	got := st.got()
	slices.Sort(got)
	want := []string{cancelled, closed}
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("stopped %v, want %v (not %s, still pending)", got, want, untouched)
	}
}

// recMetrics records what the scheduler reports.
type recMetrics struct {
	mu      sync.Mutex
	probed  []string
	settled []string
}

func (m *recMetrics) Probed(k vigil.Kind, v vigil.Verdict, late, _ time.Duration) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.probed = append(m.probed, string(k)+" "+string(v)+" "+late.String())
}

func (m *recMetrics) Settled(k vigil.Kind, s vigil.State, late time.Duration) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.settled = append(m.settled, string(k)+" "+string(s)+" "+late.String())
}

// TestMetricsHook: the scheduler reports each probe and each settlement
// with how late after its due instant it ran.
func TestMetricsHook(t *testing.T) {
	t.Parallel()
	c := &clock{t: t0}
	m := &recMetrics{}
	e := engine.New(engine.Config{
		Store: memstore.New(), Watchers: watcher.NewRegistry(timer.New(timer.Config{}), watchertest.NeverSettles(vigil.KindHTTP)),
		NowFunc: c.Now, Metrics: m,
	})
	ctx := context.Background()
	if err := e.Prime(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Register(ctx, vigil.RegisterRequest{Kind: vigil.KindTimer, Recipient: "r", Predicate: obj(`{"in":"1m"}`)}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Register(ctx, vigil.RegisterRequest{Kind: vigil.KindHTTP, Recipient: "r", Predicate: obj(`{}`)}); err != nil {
		t.Fatal(err)
	}
	late := t0.Add(time.Minute + 250*time.Millisecond)
	c.Set(late)
	e.Tick(ctx, late)
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.settled) != 1 || m.settled[0] != "timer fired 250ms" {
		t.Errorf("settled %q, want [timer fired 250ms]", m.settled)
	}
	// The http watch was due at its registration, t0.
	if len(m.probed) != 1 || m.probed[0] != "http pending 1m0.25s" {
		t.Errorf("probed %q, want [http pending 1m0.25s]", m.probed)
	}
}
