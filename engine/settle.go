package engine

import (
	"context"
	"encoding/json"
	"time"

	"github.com/vigil-run/vigil"
	"github.com/vigil-run/vigil/internal/jsonw"
	"github.com/vigil-run/vigil/scheduler"
	"github.com/vigil-run/vigil/wording"
)

// settlement is one decided outcome on its way to the store.
type settlement struct {
	e     *scheduler.Entry
	w     *vigil.Watch
	out   *vigil.Outcome
	polls int
	quiet bool
	// answered: the outcome came from outside a probe (Complete), and
	// any replica may settle it (vigil.WatchSettleParams.Answered).
	answered bool
	// final: the outcome is the final probe's answer, which a retry of a
	// failed commit writes again rather than probing again (doubt.final).
	final bool
	// probed, when set, is called once the settlement is written (or
	// failed to be), before anyone hears of it (see prober.Probe).
	probed func()
}

// messageData is the machine-readable part of an outcome message.
type messageData struct {
	Kind    vigil.Kind     `json:"kind"`
	State   vigil.State    `json:"state"`
	Outcome *vigil.Outcome `json:"outcome,omitempty"`
	// Observation is a standing watch's change.
	Observation *vigil.Observation `json:"observation,omitempty"`
	Note        string             `json:"note,omitempty"`
	Labels      map[string]string  `json:"labels,omitempty"`
	Predicate   json.RawMessage    `json:"predicate"`
}

// marshal returns d as json.Marshal writes it, byte for byte
// (TestMessageDataMarshal), without reflection and without parsing the
// outcome's JSON once more, as json.Marshal does a Marshaler's: every
// outcome message is written so, a storm's thousands at once. Like
// json.Marshal's, its answer is nil when d cannot be written (a predicate
// that is not JSON).
func (d *messageData) marshal() json.RawMessage {
	b := make([]byte, 0, 384+len(d.Predicate))
	b = jsonw.KeyString(b, `{"kind":`, string(d.Kind))
	b = jsonw.KeyString(b, `,"state":`, string(d.State))
	var err error
	if d.Outcome != nil {
		if b, err = d.Outcome.AppendJSON(append(b, `,"outcome":`...)); err != nil {
			return nil
		}
	}
	if d.Observation != nil {
		if b, err = d.Observation.AppendJSON(append(b, `,"observation":`...)); err != nil {
			return nil
		}
	}
	b = jsonw.OptString(b, `,"note":`, d.Note)
	if len(d.Labels) > 0 {
		b = jsonw.StringMap(append(b, `,"labels":`...), d.Labels)
	}
	if b, err = jsonw.Raw(append(b, `,"predicate":`...), d.Predicate); err != nil {
		return nil
	}
	return append(b, '}')
}

// OutcomeMessage builds the mailbox message for a settled watch.
func OutcomeMessage(id string, w *vigil.Watch, out *vigil.Outcome, now time.Time) *vigil.Message {
	d := messageData{Kind: w.Kind, State: out.State, Outcome: out, Note: w.Note, Labels: w.Labels, Predicate: vigil.RedactJSON(w.Predicate)}
	data := d.marshal()
	return &vigil.Message{ID: id, Recipient: w.Recipient, WatchID: w.ID, Type: vigil.MessageTypeFor(out.State),
		Text: out.Sentence, Data: data, CreatedAt: now}
}

// commit persists settlements in one transaction, then tells the world.
// It reports which settlements won, or the store's error (each entry is
// then rescheduled, unless it was removed).
func (s *prober) commit(ctx context.Context, ss []settlement, now time.Time) ([]bool, error) {
	ps := make([]vigil.WatchSettleParams, len(ss))
	msgs := make([]*vigil.Message, len(ss))
	for i := range ss {
		st := &ss[i]
		st.out.Sentence = wording.Outcome(st.w, st.out)
		// A registration still waiting for this first observation gets the
		// answer itself: nothing is mailed (answered at creation), unless
		// another registration joined the watch (Store.WatchJoin, see
		// joinObserved), which the store knows and this daemon may not
		// (it reached another replica). So the message goes with a quiet
		// settlement too, and the store says whether it wrote it (its
		// Seq).
		st.quiet = st.e.Observer().Claim()
		msgs[i] = OutcomeMessage(s.cfg.NewIDFunc(), st.w, st.out, now)
		ps[i] = vigil.WatchSettleParams{ID: st.w.ID, State: st.out.State, Outcome: st.out, SettledAt: now, Polls: st.polls,
			Errors: st.w.Errors, ConsecutiveErrors: st.w.ConsecutiveErrors, CheckedAt: st.w.CheckedAt, AnsweredAtCreation: st.quiet,
			Answered: st.answered, Message: msgs[i]}
	}
	won, err := s.cfg.Store.WatchSettle(ctx, ps)
	for _, st := range ss {
		if st.probed != nil {
			st.probed()
		}
	}
	if err != nil {
		if ctx.Err() == nil {
			s.outage.error(s.log, now, "settling watches", err, "count", len(ss))
		}
		for i, st := range ss {
			// It may have been written all the same: the next look at
			// the watch says (see doubt.go).
			d := doubt{state: st.out.State, settledAt: now, due: st.e.Due(), msg: msgs[i]}
			if st.final {
				d.final = &finalAnswer{out: st.out, polls: st.polls, errors: st.w.Errors, consecutive: st.w.ConsecutiveErrors, checkedAt: st.w.CheckedAt}
			}
			s.doubts.put(st.w.ID, d)
			st.e.Observer().Finish(nil)
			s.sched.Retry(st.e, retryAt(st.e, now))
		}
		return nil, err
	}
	s.outage.fine(s.log, "settling watches")
	var anyWon bool
	committed := s.now()
	for i, st := range ss {
		if won[i] && s.cfg.Metrics != nil {
			s.cfg.Metrics.Settled(st.w.Kind, st.out.State, committed.Sub(st.e.Due()))
		}
		s.sched.Drop(st.e)
		if !won[i] {
			if s.doubts.has(st.w.ID) {
				// Settled meanwhile: perhaps by the commit in doubt,
				// whose write became visible only now.
				s.recheck(ctx, st.w.ID)
			}
			st.e.Observer().Finish(nil)
			continue
		}
		s.doubts.forget(st.w.ID)
		anyWon = true
		// Answered at creation, unless the store wrote the message all
		// the same (the watch was joined): then it is told as any
		// settlement is, pushed and announced with its message.
		quiet := st.quiet && msgs[i].Seq == 0
		if quiet {
			msgs[i] = nil
		}
		w := st.w
		w.State, w.Outcome, w.SettledAt, w.Polls, w.AnsweredAtCreation = st.out.State, st.out, now, st.polls, quiet
		w.LastObservation = st.out.Observation
		st.e.Observer().Finish(w)
		if s.cfg.DeliverFunc != nil {
			s.cfg.DeliverFunc(w, msgs[i])
		}
		if w.State == vigil.StateErrored && s.cfg.StopFunc != nil {
			// Given up on, as by a cancel: what its probes started (a
			// run watch's program) would outlive it.
			s.cfg.StopFunc(w.Kind, w.ID)
		}
		s.cfg.EventFunc(vigil.Event{Type: vigil.EventWatchSettled, WatchID: w.ID, Recipient: w.Recipient, State: w.State,
			Polls: w.Polls, Text: st.out.Sentence, Done: true, At: now})
		if m := msgs[i]; m != nil {
			s.cfg.EventFunc(vigil.Event{Type: vigil.EventMessage, WatchID: w.ID, Recipient: w.Recipient, State: w.State, Text: m.Text, Seq: m.Seq, At: now})
		}
	}
	if anyWon {
		s.sched.ArmPrune(now.Add(min(s.cfg.Limits.RetentionWatches, s.cfg.Limits.RetentionMessages)))
	}
	return won, nil
}

// Prune implements scheduler.Prober: it deletes what is past retention
// and returns the next instant anything becomes prunable, zero when
// nothing will.
func (s *prober) Prune(ctx context.Context, now time.Time) time.Time {
	l := s.cfg.Limits
	res, err := s.cfg.Store.Prune(ctx, vigil.PruneParams{
		WatchesBefore:     now.Add(-l.RetentionWatches),
		MessagesBefore:    now.Add(-l.RetentionMessages),
		IdempotencyBefore: now.Add(-l.IdempotencyTTL),
	})
	if err != nil {
		if ctx.Err() == nil {
			s.log.Error("pruning", "err", err)
		}
		return now.Add(time.Hour)
	}
	if res.Watches+res.Messages+res.Keys > 0 {
		s.log.Info("pruned", "watches", res.Watches, "messages", res.Messages, "idempotency_keys", res.Keys)
	}
	var next time.Time
	for _, t := range []time.Time{
		addIf(res.OldestSettled, l.RetentionWatches),
		addIf(res.OldestMessage, l.RetentionMessages),
		addIf(res.OldestKey, l.IdempotencyTTL),
	} {
		if !t.IsZero() && (next.IsZero() || t.Before(next)) {
			next = t
		}
	}
	return next
}

func addIf(t time.Time, d time.Duration) time.Time {
	if t.IsZero() {
		return t
	}
	return t.Add(d)
}
