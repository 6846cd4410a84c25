package engine

import (
	"context"

	"github.com/vigil-run/vigil"
	"github.com/vigil-run/vigil/scheduler"
)

// Arm schedules w as a registration does once its row is written; o, when
// non-nil, hears its first observation.
func (e *Engine) Arm(w *vigil.Watch, o *scheduler.Observer) { e.probes.add(w, o) }

// AnswerWatch settles w on an observation from outside a probe (see
// Complete).
func (e *Engine) AnswerWatch(ctx context.Context, w *vigil.Watch, obs vigil.Observation) (bool, error) {
	return e.probes.answer(ctx, w, obs)
}

// HookEvents makes f hear every event the probes publish, as they
// publish it.
func (e *Engine) HookEvents(f func(vigil.Event)) {
	prev := e.probes.cfg.EventFunc
	e.probes.cfg.EventFunc = func(ev vigil.Event) { prev(ev); f(ev) }
}

// CheckWaiters is how many Checks of watch id wait for its next probe.
func (e *Engine) CheckWaiters(id string) int {
	e.recent.mu.Lock()
	defer e.recent.mu.Unlock()
	return len(e.recent.waiters[id])
}

// WaitedWatches is how many watches have a Check waiting, as the probe
// log holds them.
func (e *Engine) WaitedWatches() int {
	e.recent.mu.Lock()
	defer e.recent.mu.Unlock()
	return len(e.recent.waiters)
}

// BeforeCheckWait makes f run in each Check once it found its watch
// pending and live, before it listens for the watch's settlement.
func (e *Engine) BeforeCheckWait(f func(id string)) { e.beforeCheckWait = f }
