package engine

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/vigil-run/vigil"
	"github.com/vigil-run/vigil/deliver"
	"github.com/vigil-run/vigil/forge"
	"github.com/vigil-run/vigil/scheduler"
	"github.com/vigil-run/vigil/watcher"
)

// Register implements vigil.Service. Every default is resolved here, in one
// place, against the engine's clock.
func (e *Engine) Register(ctx context.Context, r vigil.RegisterRequest) (*vigil.Watch, error) {
	now := e.now()
	w, err := e.prepare(ctx, r, now)
	if err != nil {
		got, err := e.replayRefused(ctx, r, now, err)
		if err != nil {
			return nil, err
		}
		if got.Existing {
			got.AskedDeliver = e.askedDeliverOf(ctx, r, got)
			if got, err = e.joinObserved(ctx, got); err != nil {
				return nil, err
			}
		}
		got.CompletionToken = e.replayedToken(got)
		return e.view(got), nil
	}
	// A token watch's secret is returned once, here, and never stored.
	secret := w.CompletionToken
	w.CompletionToken = ""
	p := vigil.WatchCreateParams{
		Watch:                 w,
		MaxActive:             e.limits.MaxActive,
		MaxActivePerRecipient: e.limits.MaxActivePerRecipient,
	}
	if r.IdempotencyKey != "" {
		p.IdempotencyKey = r.IdempotencyKey
		p.RequestHash = requestHash(r)
		p.IdempotencySince = now.Add(-e.limits.IdempotencyTTL)
	}
	got, err := e.store.WatchCreate(ctx, p)
	if err != nil {
		return nil, err
	}
	if got.Existing && !got.Replayed {
		if got, err = e.joinLive(ctx, p, got, now); err != nil {
			return nil, err
		}
	}
	if r.IdempotencyKey != "" && !got.Replayed {
		e.sched.ArmPrune(now.Add(e.limits.IdempotencyTTL))
	}
	if got.Existing {
		// The pending watch keeps its deadline and its delivery options:
		// say what was asked for and not taken. A replay says the
		// options again, as the answer its caller lost did (the same
		// request, so the same options); not the deadline, which a
		// duration counts from this call, not the first.
		if r.Deadline != "" && !got.Replayed && !w.Deadline.Equal(got.Deadline) {
			got.AskedDeadline = w.Deadline
		}
		got.AskedDeliver = askedDeliver(w.Deliver, got.Deliver)
		// A replay joins too: the registration it repeats may have been
		// refused because its join failed.
		if got, err = e.joinObserved(ctx, got); err != nil {
			return nil, err
		}
	}
	if got.Replayed && secret != "" {
		// A retry of the registration that made it: its caller may
		// never have had the first answer.
		got.CompletionToken = e.replayedToken(got)
	}
	if got.Existing || got.Replayed {
		return e.view(got), nil
	}
	if secret != "" {
		got.CompletionToken = completionToken(got.ID, secret)
	}
	var o *scheduler.Observer
	if r.Observe && e.probesAtOnce(w, now) {
		o = scheduler.NewObserver()
	}
	e.probes.add(got, o)
	e.hub.publish(vigil.Event{Type: vigil.EventWatchCreated, WatchID: got.ID, Recipient: got.Recipient, State: got.State, At: now})
	if o == nil {
		return e.view(got), nil
	}
	return e.observe(ctx, got, o)
}

// replayRefused answers a keyed registration that prepare refused with
// the watch its key replays, when the refusal is deadline_out_of_range
// and the key's live ledger entry is of this very request: a retry,
// after its deadline (an instant) passed, of a registration whose answer
// was lost, which its caller needs to learn the outcome. Every other
// check came before the deadline's and passed, as for the first; a new
// request (another hash, or no entry) gets the refusal. Else it returns
// the refusal.
func (e *Engine) replayRefused(ctx context.Context, r vigil.RegisterRequest, now time.Time, refusal error) (*vigil.Watch, error) {
	if r.IdempotencyKey == "" || vigil.ErrorCode(refusal) != vigil.CodeDeadlineOutOfRange {
		return nil, refusal
	}
	got, err := e.store.IdempotencyReplay(ctx, vigil.IdempotencyReplayParams{Recipient: r.Recipient, Key: r.IdempotencyKey,
		RequestHash: requestHash(r), Since: now.Add(-e.limits.IdempotencyTTL)})
	if err != nil {
		return nil, err
	}
	if got == nil {
		return nil, refusal
	}
	return got, nil
}

// askedDeliverOf is askedDeliver of r's delivery options (which prepare
// took) and got's, for a replay answered without prepare's watch.
func (e *Engine) askedDeliverOf(ctx context.Context, r vigil.RegisterRequest, got *vigil.Watch) json.RawMessage {
	scope, scoped := vigil.ScopeFrom(ctx)
	opts, err := e.deliver.Canonicalize(r.Deliver, !scoped || scope.Exec)
	if err != nil {
		return nil
	}
	return askedDeliver(opts, got.Deliver)
}

// askedDeliver returns the delivery options a registration asked for
// (asked, canonical), secrets redacted, when the pending watch it matched
// does not carry each of them as asked (kept): that registration's
// webhook, command, email, resume or progress is not registered, and its
// answer must say so. Nil when none was asked for, or each is there.
func askedDeliver(asked, kept json.RawMessage) json.RawMessage {
	if len(asked) == 0 {
		return nil
	}
	var a, k map[string]json.RawMessage
	if err := json.Unmarshal(asked, &a); err != nil {
		return deliver.Redact(asked)
	}
	if len(kept) > 0 {
		if c, err := vigil.CanonicalJSON(kept); err == nil {
			_ = json.Unmarshal(c, &k)
		}
	}
	for name, v := range a {
		if !bytes.Equal(v, k[name]) {
			return deliver.Redact(asked)
		}
	}
	return nil
}

// joinObserved answers a registration that matched the pending watch got
// (existing). A registration of that watch may still wait for its first
// observation, on this daemon or on another replica; had it the answer to
// itself (settled quietly, answered at creation), this caller, told the
// watch is pending, would wait for a message that never comes. So the
// watch is marked joined in the store (Store.WatchJoin), and the settling
// write, which reads the mark under the same lock, mails the outcome all
// the same. When the watch is no longer pending (settled since this
// caller's read), and quietly, this caller gets the watch as it settled;
// settled with a message, that message is in its mailbox. A join that
// could not be written is an error the caller may retry (unavailable):
// answered existing, it would wait for a message that may never come.
func (e *Engine) joinObserved(ctx context.Context, got *vigil.Watch) (*vigil.Watch, error) {
	if !e.probesAtOnce(got, got.CreatedAt) || got.CreatedAt.Before(e.now().Add(-e.limits.ObserveWait-time.Minute)) {
		// No registration of it can still wait for its first
		// observation (a timer's has none; an older one's wait has
		// ended): nothing to join, and no write.
		return got, nil
	}
	if joined, err := e.store.WatchJoin(ctx, got.ID); err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		var ve *vigil.Error
		if errors.As(err, &ve) && ve.Code != vigil.CodeInternal {
			return nil, err // the store's own word (unavailable, storage_full)
		}
		return nil, &vigil.Error{Code: vigil.CodeUnavailable, Err: err,
			Message: "this registration matched pending watch " + got.ID + ", but joining it (so that its outcome reaches this mailbox) could not be written: try again"}
	} else if joined {
		return got, nil
	}
	w, err := e.store.WatchGet(context.WithoutCancel(ctx), got.ID)
	if err != nil || w.State == vigil.StatePending || !w.AnsweredAtCreation {
		// Settled with a message to its mailbox (or gone).
		return got, nil
	}
	w.Existing, w.Replayed = true, got.Replayed
	w.AskedDeadline, w.AskedDeliver = got.AskedDeadline, got.AskedDeliver
	return w, nil
}

// probesAtOnce reports whether watch w, registered at, is probed as soon
// as it is armed: the registrations of those alone may wait for a first
// observation (observe).
func (e *Engine) probesAtOnce(w *vigil.Watch, at time.Time) bool {
	spec, _ := e.watchers.Spec(w.Kind)
	return (w.Every > 0 || spec.Instant) && (w.StartAt.IsZero() || !w.StartAt.After(at))
}

// observe waits (bounded) for the first observation of a new watch. If it
// settled the watch while we waited, the caller holds the answer
// (answered_at_creation) and nothing was mailed.
func (e *Engine) observe(ctx context.Context, w *vigil.Watch, o *scheduler.Observer) (*vigil.Watch, error) {
	t := time.NewTimer(e.limits.ObserveWait)
	defer t.Stop()
	select {
	case <-o.Done():
	case <-t.C:
		if o.Abandon() {
			return e.view(w), nil
		}
		<-o.Done()
	case <-ctx.Done():
		if o.Abandon() {
			return nil, ctx.Err()
		}
		<-o.Done()
	}
	got, err := e.store.WatchGet(context.WithoutCancel(ctx), w.ID)
	if err != nil {
		return nil, err
	}
	return e.view(got), nil
}

// prepare validates a request and builds the watch to insert. It writes
// nothing.
func (e *Engine) prepare(ctx context.Context, r vigil.RegisterRequest, now time.Time) (*vigil.Watch, error) {
	l := e.limits
	if r.Kind == "" {
		return nil, vigil.FieldErrorf(vigil.CodeInvalidRequest, "kind", "kind is required")
	}
	spec, known := e.watchers.Spec(r.Kind)
	wt, ok := e.watchers.Lookup(r.Kind)
	if !known || !ok {
		return nil, vigil.FieldErrorf(vigil.CodeUnknownKind, "kind", "unknown kind %q; this daemon watches: %v", clipName(string(r.Kind)), e.watchers.Kinds())
	}
	if err := vigil.ValidName("recipient", r.Recipient, l.MaxNameBytes); err != nil {
		return nil, err
	}
	scope, scoped := vigil.ScopeFrom(ctx)
	if scoped && !scope.Allows(r.Recipient) {
		// Not found, as for the recipient's watches: a scoped token learns
		// nothing of recipients it does not act for.
		return nil, vigil.FieldErrorf(vigil.CodeNotFound, "recipient", "no recipient %q for this token", r.Recipient)
	}
	if scoped && !scope.AllowsKind(r.Kind, spec.Exec) {
		return nil, scopeKindError(scope, r.Kind, spec.Exec)
	}
	if r.ChainDepth > l.MaxChainDepth {
		return nil, vigil.Errorf(vigil.CodeChainTooDeep, "this registration comes from a chain %d commands deep; the limit is %d (max_chain_depth)", r.ChainDepth, l.MaxChainDepth)
	}
	mode, err := vigil.ResolveMode(r.Kind, spec, r.Mode)
	if err != nil {
		return nil, err
	}
	if len(r.Note) > l.MaxNoteBytes || !utf8.ValidString(r.Note) {
		return nil, vigil.FieldErrorf(vigil.CodeInvalidRequest, "note", "note must be UTF-8 of at most %d bytes", l.MaxNoteBytes)
	}
	if strings.IndexByte(r.Note, 0) >= 0 {
		// Nor can PostgreSQL store it (a 500 there), nor a wake
		// (deliver.resume) pass it within one program argument: refused
		// in every store, as a note message's body is.
		return nil, vigil.FieldErrorf(vigil.CodeInvalidRequest, "note", "the note must not hold a NUL byte")
	}
	if err := validLabels(r.Labels, l); err != nil {
		return nil, err
	}
	if r.IdempotencyKey != "" {
		if err := vigil.ValidName("idempotency_key", r.IdempotencyKey, l.MaxNameBytes); err != nil {
			return nil, err
		}
	}
	deliverOpts, err := e.deliver.Canonicalize(r.Deliver, !scoped || scope.Exec)
	if err != nil {
		return nil, err
	}
	for _, f := range []struct {
		name string
		n    int
	}{{"max_polls", r.MaxPolls}, {"max_errors", r.MaxErrors}, {"stable", r.Stable}} {
		if f.n < 0 || f.n > l.MaxPolls {
			return nil, vigil.FieldErrorf(vigil.CodeInvalidRequest, f.name, "%s must be between 0 and %d", f.name, l.MaxPolls)
		}
	}
	if len(r.Predicate) > l.MaxPredicateBytes {
		return nil, vigil.FieldErrorf(vigil.CodeInvalidPredicate, "predicate", "predicate is larger than %d bytes", l.MaxPredicateBytes)
	}
	raw := r.Predicate
	if len(raw) == 0 {
		raw = json.RawMessage("{}")
	}
	if scoped && len(scope.Repos) > 0 {
		// Before Canonicalize, which may read the forge (a ci watch's
		// ref resolved) with the daemon's credentials.
		if err := scopeRepoCheck(scope, wt, r.Kind, raw); err != nil {
			return nil, err
		}
	}
	canon, err := wt.Canonicalize(ctx, raw, now)
	if err != nil {
		return nil, asPredicateError(err)
	}
	if scoped && len(scope.Repos) > 0 {
		// And the canonical predicate, the one the probes read.
		if err := scopeRepoCheck(scope, wt, r.Kind, canon.Predicate); err != nil {
			return nil, err
		}
	}
	if scoped && canon.Exec && !scope.Exec {
		return nil, vigil.FieldErrorf(vigil.CodeForbidden, "predicate", "this %s predicate runs a program, and this token lacks the exec scope (vigil token create --exec)", r.Kind)
	}
	if err := wt.Admit(ctx, canon.Predicate); err != nil {
		var ve *vigil.Error
		if errors.As(err, &ve) {
			return nil, err
		}
		return nil, &vigil.Error{Code: vigil.CodeWatchUnobservable, Message: err.Error(), Err: err}
	}
	// A predicate may make its watch standing (a standing folder watch).
	if canon.Standing {
		if mode == vigil.ModeUnless {
			return nil, vigil.FieldErrorf(vigil.CodeInvalidRequest, "mode", "standing %s watches do not take mode \"unless\"", r.Kind)
		}
		spec.Standing, spec.Deadline = true, 0
	}
	if spec.Standing {
		if err := standingRefusal(r); err != nil {
			return nil, err
		}
	}

	// The defaults, resolved by the rules of the root package.
	every, err := vigil.ResolveEvery(r.Kind, spec, canon.Every, r.Every, l)
	if err != nil {
		return nil, err
	}
	start := canon.StartAt
	deadline, err := vigil.ResolveDeadline(r.Kind, spec, r.Deadline, start, now, l)
	if err != nil {
		return nil, err
	}
	stableFor, err := vigil.ResolveStableFor(r.Kind, r.StableFor, r.Stable, every, l)
	if err != nil {
		return nil, err
	}

	labels := r.Labels
	if len(labels) == 0 {
		labels = nil
	}
	id := e.newID()
	if canon.Secret != "" && len(e.completionKey) > 0 {
		// The secret comes from the key and the id instead, so that a
		// replay of this registration can answer it again.
		if c, ok := wt.(completer); ok {
			canon.Secret = completionSecret(e.completionKey, id)
			if canon.Predicate, err = c.Predicate(canon.Secret); err != nil {
				return nil, err
			}
		}
	}
	return &vigil.Watch{
		ID: id, Kind: r.Kind, Predicate: canon.Predicate, Recipient: r.Recipient, State: vigil.StatePending,
		Mode: mode, Every: every, Deadline: deadline, StartAt: start, CreatedAt: now, Note: r.Note, Labels: labels,
		Stable: r.Stable, StableFor: stableFor, MaxPolls: r.MaxPolls, MaxErrors: r.MaxErrors, Standing: spec.Standing,
		ChainDepth: r.ChainDepth, Identity: vigil.Identity(r.Recipient, r.Kind, mode, canon.Predicate),
		Deliver:         deliverOpts,
		CompletionToken: canon.Secret,
		TokenID:         scope.TokenID,
	}, nil
}

// standingRefusal refuses what a standing watch (a ticket, a schedule, a
// standing folder) would take and never use: it reports each change until
// a cancel, its recipient closing or its token revoked ends it, so it
// never fires (stable, stable_for) and is never given up on after a
// number of checks (max_polls, max_errors). Taken and ignored, each would
// make its caller believe it applies.
func standingRefusal(r vigil.RegisterRequest) error {
	for _, f := range []struct {
		name, why string
		set       bool
	}{
		{"max_polls", "it is never given up on after a number of checks", r.MaxPolls > 0},
		{"max_errors", "checks that could not tell are tried again with backoff, and it is never given up on after them", r.MaxErrors > 0},
		{"stable", "it never fires: it reports each change as it is seen", r.Stable > 0},
		{"stable_for", "it never fires: it reports each change as it is seen", stableForAsked(r.StableFor)},
	} {
		if f.set {
			return vigil.FieldErrorf(vigil.CodeInvalidRequest, f.name, "a standing %s watch does not take %s: %s, and only a cancel, its recipient closing or its token revoked ends it; leave %s out", r.Kind, f.name, f.why, f.name)
		}
	}
	return nil
}

// stableForAsked reports whether stable_for asks for a window: "" and a
// zero duration do not (one that does not parse is refused as such later).
func stableForAsked(s string) bool {
	if s == "" {
		return false
	}
	d, err := vigil.ParseDuration(s)
	return err == nil && d > 0
}

// scopeKindError refuses a kind the caller's token does not carry, as
// forbidden (a permission the token lacks; not_found is for what the
// caller may not see), with a sentence naming what is missing.
func scopeKindError(s vigil.Scope, k vigil.Kind, runsCommands bool) error {
	if runsCommands && !s.Exec {
		return vigil.FieldErrorf(vigil.CodeForbidden, "kind", "%s watches run commands, and this token lacks the exec scope (vigil token create --exec)", k)
	}
	return vigil.FieldErrorf(vigil.CodeForbidden, "kind", "this token cannot register %s watches (its kinds: %v)", k, s.Kinds)
}

// scopeRepoCheck refuses, as forbidden, a watch of a kind that reads a
// forge repository (watcher.RepoNamer) naming one that the token's repos
// scope does not match, with a sentence naming the repository; a
// predicate that names none is refused as Canonicalize would. A kind that
// reads no forge passes.
func scopeRepoCheck(s vigil.Scope, wt watcher.Watcher, k vigil.Kind, predicate json.RawMessage) error {
	rn, ok := wt.(watcher.RepoNamer)
	if !ok {
		return nil
	}
	repo, err := rn.Repository(predicate)
	if err != nil {
		return asPredicateError(err)
	}
	if !forge.MatchRepo(s.Repos, repo) {
		return vigil.FieldErrorf(vigil.CodeForbidden, "predicate.repo", "this token cannot watch %s: its %s watches may name only the repositories its repos scope matches (%s)",
			repo, k, strings.Join(s.Repos, ", "))
	}
	return nil
}

// asPredicateError makes sure a canonicalisation refusal carries a code.
func asPredicateError(err error) error {
	var ve *vigil.Error
	if errors.As(err, &ve) {
		return err
	}
	return &vigil.Error{Code: vigil.CodeInvalidPredicate, Field: "predicate", Message: err.Error(), Err: err}
}

// joinLive returns got, the pending watch the registration p joined,
// unless its token no longer holds (revoked, expired or deleted: it is
// cancelled silently at its next turn, and a caller who joined it would
// never hear of an outcome): then that watch is cancelled now, as its
// turn would, and p is registered again, making a watch of the caller's
// own. A keyed registration's ledger entry (which the join wrote, naming
// the dead watch) goes with the dead watch, which is deleted, so that a
// retry of p replays the new one. A token that cannot be read leaves the
// join as it was.
func (e *Engine) joinLive(ctx context.Context, p vigil.WatchCreateParams, got *vigil.Watch, now time.Time) (*vigil.Watch, error) {
	check := e.probes.cfg.CheckFunc
	if check == nil || got.TokenID == "" || got.TokenID == p.Watch.TokenID || got.State != vigil.StatePending {
		return got, nil
	}
	var se *vigil.StopError
	if err := check(ctx, got); !errors.As(err, &se) {
		return got, nil
	}
	out := &vigil.Outcome{State: vigil.StateCancelled, Reason: se.Reason, Sentence: se.Sentence, Observation: got.LastObservation}
	_, won, err := e.store.WatchCancel(ctx, vigil.WatchCancelParams{ID: got.ID, Outcome: out, SettledAt: now})
	if err != nil && !errors.Is(err, vigil.ErrNotFound) {
		return nil, err
	}
	if won {
		e.sched.Remove(got.ID)
		e.stop(got.Kind, got.ID)
		e.sched.ArmPrune(now.Add(e.limits.RetentionWatches))
		e.hub.publish(vigil.Event{Type: vigil.EventWatchSettled, WatchID: got.ID, Recipient: got.Recipient, State: vigil.StateCancelled,
			Text: se.Sentence, Done: true, At: now})
	} else {
		// Settled otherwise meanwhile. Cancelled for the same reason
		// (another registration that joined it, or its own turn, found
		// the token dead first), or deleted by a keyed one that did: the
		// caller must not be left joined to it either, so it registers
		// again as below (joining the watch the other one made, if it
		// did). Settled for another reason (it fired before the token
		// died): the join stands, as a join of any pending watch that
		// then settles does.
		cur, err := e.store.WatchGet(ctx, got.ID)
		switch {
		case errors.Is(err, vigil.ErrNotFound):
		case err != nil:
			return nil, err
		case cur.State != vigil.StateCancelled || cur.Outcome == nil || cur.Outcome.Reason != se.Reason:
			return got, nil
		}
	}
	if p.IdempotencyKey != "" {
		if err := e.store.WatchDelete(ctx, got.ID); err != nil && !errors.Is(err, vigil.ErrNotFound) {
			return nil, err
		}
	}
	again, err := e.store.WatchCreate(ctx, p)
	if err != nil {
		return nil, err
	}
	// (Another registration that made one meanwhile is joined, as ever.)
	return again, nil
}
