package engine_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vigil-run/vigil"
	"github.com/vigil-run/vigil/engine"
	"github.com/vigil-run/vigil/scheduler"
	"github.com/vigil-run/vigil/store/memstore"
	"github.com/vigil-run/vigil/watcher"
	"github.com/vigil-run/vigil/watcher/timer"
)

var t0 = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

// clock is a fake clock the tests move by hand.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time  { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) Set(t time.Time) { c.mu.Lock(); c.t = t; c.mu.Unlock() }
func (c *clock) Add(d time.Duration) time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
	return c.t
}

// countingStore counts the writes that reach a store.
// pendingStreamer is the engine's interface of a store that hands its
// pending watches over in parts (store/sqlite's WatchListPendingFunc).
type pendingStreamer interface {
	WatchListPendingFunc(ctx context.Context, fn func(rows []vigil.ScheduleEntry, total int) error) error
}

// countingStreamStore is a countingStore over a store that is a
// pendingStreamer, and one itself.
type countingStreamStore struct {
	*countingStore
	parts pendingStreamer
}

func (s *countingStreamStore) WatchListPendingFunc(ctx context.Context, fn func(rows []vigil.ScheduleEntry, total int) error) error {
	return s.parts.WatchListPendingFunc(ctx, fn)
}

type countingStore struct {
	vigil.Store
	writes atomic.Int64
}

func (s *countingStore) WatchCreate(ctx context.Context, p vigil.WatchCreateParams) (*vigil.Watch, error) {
	s.writes.Add(1)
	return s.Store.WatchCreate(ctx, p)
}
func (s *countingStore) WatchObserve(ctx context.Context, p vigil.WatchObserveParams) (bool, error) {
	s.writes.Add(1)
	return s.Store.WatchObserve(ctx, p)
}
func (s *countingStore) WatchSettle(ctx context.Context, ps []vigil.WatchSettleParams) ([]bool, error) {
	s.writes.Add(1)
	return s.Store.WatchSettle(ctx, ps)
}
func (s *countingStore) WatchCancel(ctx context.Context, p vigil.WatchCancelParams) (*vigil.Watch, bool, error) {
	s.writes.Add(1)
	return s.Store.WatchCancel(ctx, p)
}
func (s *countingStore) MessageCreate(ctx context.Context, m *vigil.Message) (*vigil.Message, error) {
	s.writes.Add(1)
	return s.Store.MessageCreate(ctx, m)
}
func (s *countingStore) MessagesAck(ctx context.Context, p vigil.MessagesAckParams) error {
	s.writes.Add(1)
	return s.Store.MessagesAck(ctx, p)
}

type env struct {
	t     *testing.T
	clock *clock
	store *countingStore
	eng   *engine.Engine
	sched *scheduler.Scheduler
	ctx   context.Context
}

type envOpts struct {
	store    vigil.Store
	limits   *vigil.Limits
	watchers []watcher.Watcher
	jitter   func(time.Duration) time.Duration
	// deliver is the engine's DeliverFunc.
	deliver func(*vigil.Watch, *vigil.Message)
	// completionKey is the engine's CompletionKey.
	completionKey []byte
	// holds is the engine's HoldsFunc, and makes it Shared: a replica.
	holds func(id string) bool
	// logger is the engine's Logger.
	logger *slog.Logger
}

// newEnv builds an engine on a fake clock at t0 with the real timer watcher
// and the given fakes, primed.
func newEnv(t *testing.T, o envOpts) *env {
	t.Helper()
	return newEnvAt(t, o, t0)
}

// newEnvAt is newEnv with the clock at start: a restart on the same store.
func newEnvAt(t *testing.T, o envOpts, start time.Time) *env {
	t.Helper()
	c := &clock{t: start}
	st := o.store
	if st == nil {
		st = memstore.New()
	}
	cs := &countingStore{Store: st}
	var engineStore vigil.Store = cs
	if ps, ok := st.(pendingStreamer); ok {
		// The engine sees that it hands its pending watches over in parts.
		engineStore = &countingStreamStore{countingStore: cs, parts: ps}
	}
	reg := watcher.NewRegistry(timer.New(timer.Config{}))
	for _, w := range o.watchers {
		reg.Register(w)
	}
	sched := scheduler.New(scheduler.Config{NowFunc: c.Now})
	cfg := engine.Config{Store: engineStore, Watchers: reg, Scheduler: sched, NowFunc: c.Now, JitterFunc: o.jitter, DeliverFunc: o.deliver,
		CompletionKey: o.completionKey, HoldsFunc: o.holds, Shared: o.holds != nil, Logger: o.logger}
	if o.limits != nil {
		cfg.Limits = *o.limits
	}
	e := engine.New(cfg)
	// Ended with the test, so that what a test subscribed to stops with it.
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	if err := e.Prime(ctx); err != nil {
		t.Fatalf("Prime: %v", err)
	}
	return &env{t: t, clock: c, store: cs, eng: e, sched: sched, ctx: ctx}
}

// tick moves the clock to t and runs what is due.
func (v *env) tick(t time.Time) int {
	v.clock.Set(t)
	return v.eng.Tick(v.ctx, t)
}

// tickEach advances in steps of d up to end, ticking each step.
func (v *env) tickEach(d time.Duration, end time.Time) {
	for t := v.clock.Now().Add(d); !t.After(end); t = t.Add(d) {
		v.tick(t)
	}
}

func (v *env) register(r vigil.RegisterRequest) *vigil.Watch {
	v.t.Helper()
	if r.Recipient == "" {
		r.Recipient = "agent-1"
	}
	w, err := v.eng.Register(v.ctx, r)
	if err != nil {
		v.t.Fatalf("Register(%s): %v", r.Kind, err)
	}
	return w
}

func (v *env) get(id string) *vigil.Watch {
	v.t.Helper()
	w, err := v.eng.Watch(v.ctx, id)
	if err != nil {
		v.t.Fatalf("Watch(%s): %v", id, err)
	}
	return w
}

func (v *env) messages(recipient string) []*vigil.Message {
	v.t.Helper()
	zero := int64(0)
	p, err := v.eng.Messages(v.ctx, vigil.MessagesRequest{Recipient: recipient, After: &zero, Limit: 1000})
	if err != nil {
		v.t.Fatalf("Messages: %v", err)
	}
	return p.Messages
}

func obj(s string) json.RawMessage { return json.RawMessage(s) }
