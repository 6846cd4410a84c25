package engine_test

import (
	"context"
	"time"

	"github.com/vigil-run/vigil"
	"github.com/vigil-run/vigil/engine"
	"github.com/vigil-run/vigil/scheduler"
	"github.com/vigil-run/vigil/watcher"
)

// schedConfig configures a schedRig: the scheduler and the engine that
// probes for it, on one store, registry and clock.
type schedConfig struct {
	Store    vigil.Store
	Watchers *watcher.Registry
	NowFunc  func() time.Time
	Workers  int
	// JitterFunc spreads a restart's re-arms (see engine.Config).
	JitterFunc func(time.Duration) time.Duration
	// EventFunc hears every event the probes publish, as they publish it.
	EventFunc func(vigil.Event)
	// HoldsFunc says which watches this engine schedules (a replica's
	// shards; see engine.Config).
	HoldsFunc func(id string) bool
}

// schedRig is a scheduler with the engine as its prober, driven the way
// the daemon drives them: Prime, then Run (or Tick with a fake clock), Add
// for a watch written straight to the store.
type schedRig struct {
	*scheduler.Scheduler
	eng *engine.Engine
}

func newSched(cfg schedConfig) *schedRig {
	s := scheduler.New(scheduler.Config{NowFunc: cfg.NowFunc, Workers: cfg.Workers})
	e := engine.New(engine.Config{Store: cfg.Store, Watchers: cfg.Watchers, Scheduler: s, NowFunc: cfg.NowFunc,
		JitterFunc: cfg.JitterFunc, HoldsFunc: cfg.HoldsFunc})
	if cfg.EventFunc != nil {
		e.HookEvents(cfg.EventFunc)
	}
	return &schedRig{Scheduler: s, eng: e}
}

func (r *schedRig) Prime(ctx context.Context) error { return r.eng.Prime(ctx) }

func (r *schedRig) Tick(ctx context.Context, now time.Time) int { return r.eng.Tick(ctx, now) }

func (r *schedRig) Run(ctx context.Context) error { return r.eng.Run(ctx) }

func (r *schedRig) Add(w *vigil.Watch, o *scheduler.Observer) { r.eng.Arm(w, o) }

func (r *schedRig) Answer(ctx context.Context, w *vigil.Watch, obs vigil.Observation) (bool, error) {
	return r.eng.AnswerWatch(ctx, w, obs)
}
