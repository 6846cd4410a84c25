package engine

import (
	"context"
	"sync"
	"time"

	"github.com/vigil-run/vigil"
)

// A settlement's commit can fail without saying whether it was written:
// PostgreSQL's answer to COMMIT lost with its connection, a context ended
// while the commit was on its way. commit then reschedules the watch as if
// nothing was written; when something was, the next look at the watch
// finds it settled and drops it, and the settlement's push deliveries (a
// webhook, a command, an email, a resume) and its events were never handed
// on: the deliveries waited for the next start's resume, however far off.
//
// So each settlement whose commit failed is remembered here (a doubt)
// until the watch is next seen. Seen pending, the commit was not written
// and the settlement made then goes through commit as any other. Seen
// settled with the doubt's state at the doubt's instant, it was this
// process's own settlement, written after all: it is told now as commit
// would have told it (settledAfterAll). Handing a delivery on twice sends
// nothing twice (the dispatcher's receipt claim), so a doubt resolved on
// two paths at once is harmless.

// maxDoubts bounds the doubts kept; past it the oldest is forgotten (the
// next start's resume delivers what it owed).
const maxDoubts = 4096

// doubt is a settlement whose commit failed.
type doubt struct {
	state     vigil.State
	settledAt time.Time
	// due is when the watch was due (zero for one settled off the
	// schedule), for the lateness metric.
	due time.Time
	// msg is the outcome message it would have written: for a
	// settlement answered at creation, written only if the watch was
	// joined, which the watch found says (not answered at creation).
	msg *vigil.Message
	// final, when set, is the answer of the watch's final probe (at or
	// past its deadline): a watch seen pending again has it written
	// again, never probed again (Prober.Probe), since a final probe runs
	// once (a command watch's program ran twice, and a condition that came
	// true after the deadline decided).
	final *finalAnswer
}

// finalAnswer is what a final probe's settlement wrote, or tried to.
type finalAnswer struct {
	out                 *vigil.Outcome
	polls               int
	errors, consecutive int
	checkedAt           time.Time
}

// doubts are the settlements in doubt, by watch id, oldest first.
type doubts struct {
	mu    sync.Mutex
	m     map[string]doubt
	order []string
}

func (d *doubts) put(id string, x doubt) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.m == nil {
		d.m = make(map[string]doubt)
	}
	if _, ok := d.m[id]; !ok {
		d.order = append(d.order, id)
	}
	d.m[id] = x
	for len(d.m) > maxDoubts && len(d.order) > 0 {
		delete(d.m, d.order[0])
		d.order = d.order[1:]
	}
	if len(d.order) > 2*maxDoubts {
		// Drop the ids already taken, so that order stays bounded.
		kept := d.order[:0]
		for _, id := range d.order {
			if _, ok := d.m[id]; ok {
				kept = append(kept, id)
			}
		}
		d.order = kept
	}
}

// has reports whether a settlement of watch id is in doubt.
func (d *doubts) has(id string) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	_, ok := d.m[id]
	return ok
}

// take forgets and returns the doubt of watch id.
func (d *doubts) take(id string) (doubt, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	x, ok := d.m[id]
	if ok {
		delete(d.m, id)
		if len(d.m) == 0 {
			d.order = d.order[:0]
		}
	}
	return x, ok
}

// final returns the final probe's answer in doubt for watch id, if any.
func (d *doubts) final(id string) (*finalAnswer, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	x, ok := d.m[id]
	return x.final, ok && x.final != nil
}

// forget drops the doubt of watch id: a settlement of it was written here
// since, so the one in doubt was not.
func (d *doubts) forget(id string) { d.take(id) }

// seenSettled is told of w, a watch about to be settled here that was
// found settled already. If the settlement found is the one this process
// had in doubt, it is told now.
func (s *prober) seenSettled(w *vigil.Watch) {
	if w == nil || w.State == vigil.StatePending {
		return
	}
	d, ok := s.doubts.take(w.ID)
	if !ok {
		return
	}
	if w.State != d.state || w.SettledAt.UnixMilli() != d.settledAt.UnixMilli() {
		// Another settlement (a cancel, another replica's): whoever made
		// it told it.
		return
	}
	s.settledAfterAll(w, d)
}

// recheck reads watch id again, bounded, after commit found it settled
// by another while a settlement of it was in doubt here. A failed read
// leaves the deliveries to the next start's resume.
func (s *prober) recheck(ctx context.Context, id string) {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), recheckWait)
	defer cancel()
	w, err := s.cfg.Store.WatchGet(rctx, id)
	if err != nil {
		s.log.Warn("reading a watch whose settlement was in doubt; its deliveries wait for the next start", "watch_id", id, "err", err)
		s.doubts.forget(id)
		return
	}
	s.seenSettled(w)
}

// recheckWait bounds recheck's read.
const recheckWait = 5 * time.Second

// settledAfterAll tells of w, settled by a commit of this process that
// failed without saying it was written (d): what commit tells of a
// settlement that won. The outcome message's sequence number is not
// known here (0).
func (s *prober) settledAfterAll(w *vigil.Watch, d doubt) {
	s.log.Info("a settlement whose commit failed was written after all: handing it on", "watch_id", w.ID, "state", w.State)
	if w.AnsweredAtCreation {
		d.msg = nil // nothing was mailed
	}
	if m := s.cfg.Metrics; m != nil {
		var late time.Duration
		if d.due.UnixNano() > 0 {
			late = w.SettledAt.Sub(d.due)
		}
		m.Settled(w.Kind, w.State, late)
	}
	if s.cfg.DeliverFunc != nil {
		s.cfg.DeliverFunc(w, d.msg)
	}
	text := ""
	if w.Outcome != nil {
		text = w.Outcome.Sentence
	}
	s.cfg.EventFunc(vigil.Event{Type: vigil.EventWatchSettled, WatchID: w.ID, Recipient: w.Recipient, State: w.State,
		Polls: w.Polls, Text: text, Done: true, At: w.SettledAt})
	if m := d.msg; m != nil {
		s.cfg.EventFunc(vigil.Event{Type: vigil.EventMessage, WatchID: w.ID, Recipient: w.Recipient, State: w.State, Text: m.Text, At: w.SettledAt})
	}
	s.sched.ArmPrune(w.SettledAt.Add(min(s.cfg.Limits.RetentionWatches, s.cfg.Limits.RetentionMessages)))
}
