package scheduler

import (
	"container/heap"
	"context"
	"errors"
	"time"

	"github.com/vigil-run/vigil"
)

// errNotSettled is Answer's error when the store could not settle.
var errNotSettled = errors.New("scheduler: the store could not settle the watch")

// Answer settles the pending watch w on an observation that arrived from
// outside a probe (a token watch's completion), exactly as a probe's answer
// would: decided by the same rules, persisted with its outcome message in
// one transaction, then delivered. It reports whether this call settled
// the watch: false, with no error, when the watch was already settled
// (the store's compare-and-set lost) or when obs does not settle it.
func (s *Scheduler) Answer(ctx context.Context, w *vigil.Watch, obs vigil.Observation) (bool, error) {
	now := s.now()
	if obs.At.IsZero() {
		obs.At = now
	}
	s.mu.Lock()
	e, mine := s.byID[w.ID]
	if mine && e.flags&flagInflight == 0 && e.index >= 0 {
		heap.Remove(&s.h, int(e.index))
		e.flags |= flagInflight
	} else {
		// Not held here, or its probe is in flight: settle through a
		// stand-in that is never put on the heap; the store's
		// compare-and-set decides who wins.
		e = &entry{id: w.ID, every: w.Every, index: -1, flags: flagInflight | flagRemoved}
		mine = false
	}
	s.mu.Unlock()
	prog := e.prog.unpack().Advance(obs.Verdict, now)
	d := vigil.Decide(w, &obs, prog, now, false)
	if d.Settle {
		w.Errors, w.ConsecutiveErrors, w.CheckedAt = prog.Errors, prog.Consecutive, now
	}
	if !d.Settle {
		s.reschedule(e, time.Unix(0, e.due), e.prog)
		return false, nil
	}
	out := &vigil.Outcome{State: d.State, Reason: d.Reason, Held: d.Held, Attention: d.Attention, Observation: &obs}
	won, err := s.commit(ctx, []settlement{{e: e, w: w, out: out, polls: prog.Polls}}, now)
	if err != nil {
		return false, errNotSettled
	}
	if won[0] && !mine {
		s.Remove(w.ID)
	}
	return won[0], nil
}
