package engine

import (
	"context"
	"sync"

	"github.com/vigil-run/vigil"
)

// RegisterBatch implements vigil.Service: every item is validated as
// Register validates it, then all that pass go to the store in one
// WatchCreateMany (one transaction, one durable commit), and the new
// watches are armed together. An item is answered in its own place, in
// order; only an empty batch or one over vigil.MaxBatch is refused whole.
func (e *Engine) RegisterBatch(ctx context.Context, rs []vigil.RegisterRequest) ([]vigil.BatchResult, error) {
	if len(rs) == 0 {
		return nil, vigil.FieldErrorf(vigil.CodeInvalidRequest, "watches", "a batch holds 1 to %d watches; this one holds none", vigil.MaxBatch)
	}
	if len(rs) > vigil.MaxBatch {
		return nil, vigil.FieldErrorf(vigil.CodePayloadTooLarge, "watches", "a batch holds at most %d watches; this one holds %d: split it", vigil.MaxBatch, len(rs))
	}
	now := e.now()
	out := make([]vigil.BatchResult, len(rs))
	ps := make([]vigil.WatchCreateParams, 0, len(rs))
	at := make([]int, 0, len(rs))         // ps[j] answers item at[j]
	secrets := make([]string, 0, len(rs)) // a token watch's secret, by j
	// The (recipient, key) pairs of the items before. A refusal names
	// no position: the caller's items are not rs (the HTTP route and the
	// MCP tool pass on only those that decoded), so rs's would be wrong.
	keys := map[[2]string]bool{}
	var replayJoins []joining // replays of items refused (replayRefused)
	for i, r := range rs {
		if r.Observe {
			out[i] = refused(vigil.FieldErrorf(vigil.CodeInvalidRequest, "observe", "a batch does not wait for first observations; register this watch alone to observe it"))
			continue
		}
		w, err := e.prepare(ctx, r, now)
		if err != nil {
			// A retry after its deadline passed replays, as Register's.
			got, err := e.replayRefused(ctx, r, now, err)
			if err != nil {
				out[i] = refused(err)
				continue
			}
			k := [2]string{r.Recipient, r.IdempotencyKey}
			if keys[k] {
				out[i] = refused(vigil.FieldErrorf(vigil.CodeIdempotencyConflict, "idempotency_key",
					"an earlier item of this batch already uses idempotency key %q for recipient %s; give each item its own key", clipName(r.IdempotencyKey), r.Recipient))
				continue
			}
			keys[k] = true
			if got.Existing {
				got.AskedDeliver = e.askedDeliverOf(ctx, r, got)
				replayJoins = append(replayJoins, joining{i, got})
			}
			got.CompletionToken = e.replayedToken(got)
			out[i] = vigil.BatchResult{Status: vigil.BatchExisting, Watch: e.view(got)}
			continue
		}
		p := vigil.WatchCreateParams{
			Watch:                 w,
			MaxActive:             e.limits.MaxActive,
			MaxActivePerRecipient: e.limits.MaxActivePerRecipient,
		}
		if r.IdempotencyKey != "" {
			k := [2]string{r.Recipient, r.IdempotencyKey}
			if keys[k] {
				out[i] = refused(vigil.FieldErrorf(vigil.CodeIdempotencyConflict, "idempotency_key",
					"an earlier item of this batch already uses idempotency key %q for recipient %s; give each item its own key", clipName(r.IdempotencyKey), r.Recipient))
				continue
			}
			keys[k] = true
			p.IdempotencyKey = r.IdempotencyKey
			p.RequestHash = requestHash(r)
			p.IdempotencySince = now.Add(-e.limits.IdempotencyTTL)
		}
		secrets = append(secrets, w.CompletionToken)
		w.CompletionToken = ""
		ps = append(ps, p)
		at = append(at, i)
	}
	if len(ps) == 0 {
		e.joinMany(ctx, out, replayJoins)
		return out, nil
	}
	res, err := e.store.WatchCreateMany(ctx, ps)
	if err != nil {
		return nil, err
	}
	for j, r := range res {
		// An item that joined a watch of a token no longer held makes
		// its own (Register's joinLive).
		if r.Err == nil && r.Watch.Existing && !r.Watch.Replayed {
			if got, err := e.joinLive(ctx, ps[j], r.Watch, now); err != nil {
				res[j] = vigil.WatchCreateResult{Err: err}
			} else {
				res[j].Watch = got
			}
		}
	}
	armPrune := false
	added := make([]*vigil.Watch, 0, len(res))
	joins := replayJoins // the items answered with a pending watch
	for j, r := range res {
		i, asked := at[j], ps[j].Watch
		if r.Err != nil {
			out[i] = refused(r.Err)
			continue
		}
		got := r.Watch
		if ps[j].IdempotencyKey != "" && !got.Replayed {
			armPrune = true
		}
		if got.Existing || got.Replayed {
			if got.Existing {
				// As Register says them: the options on a replay too.
				if rs[i].Deadline != "" && !got.Replayed && !asked.Deadline.Equal(got.Deadline) {
					got.AskedDeadline = asked.Deadline
				}
				got.AskedDeliver = askedDeliver(asked.Deliver, got.Deliver)
			}
			if got.Existing {
				// A replay joins too, as Register's does.
				joins = append(joins, joining{i, got})
			}
			if got.Replayed && secrets[j] != "" {
				// A retry of the registration that made it: its
				// caller may never have had the first answer.
				got.CompletionToken = e.replayedToken(got)
			}
			out[i] = vigil.BatchResult{Status: vigil.BatchExisting, Watch: e.view(got)}
			continue
		}
		if secrets[j] != "" {
			got.CompletionToken = completionToken(got.ID, secrets[j])
		}
		added = append(added, got)
		out[i] = vigil.BatchResult{Status: vigil.BatchCreated, Watch: got}
	}
	e.joinMany(ctx, out, joins)
	if armPrune {
		e.sched.ArmPrune(now.Add(e.limits.IdempotencyTTL))
	}
	e.probes.addMany(added)
	for j, r := range res {
		i := at[j]
		if out[i].Status != vigil.BatchCreated {
			continue
		}
		got := r.Watch
		e.hub.publish(vigil.Event{Type: vigil.EventWatchCreated, WatchID: got.ID, Recipient: got.Recipient, State: got.State, At: now})
		out[i].Watch = e.view(got)
	}
	return out, nil
}

func refused(err error) vigil.BatchResult {
	return vigil.BatchResult{Status: vigil.BatchRefused, Err: err}
}

// joining is an item of a batch (out[i]) that matched pending watch w.
type joining struct {
	i int
	w *vigil.Watch
}

// joinMany answers the items of a batch that matched a pending watch as
// joinObserved answers one, several at a time: each join that writes is a
// store write, which the SQLite store's writer commits together when they
// come together.
func (e *Engine) joinMany(ctx context.Context, out []vigil.BatchResult, js []joining) {
	var wg sync.WaitGroup
	sem := make(chan struct{}, joinsAtOnce)
	for _, j := range js {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			w, err := e.joinObserved(ctx, j.w)
			if err != nil {
				out[j.i] = refused(err)
				return
			}
			out[j.i].Watch = e.view(w)
		})
	}
	wg.Wait()
}

// joinsAtOnce bounds the joins of a batch made at once.
const joinsAtOnce = 32
