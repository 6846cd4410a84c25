// Package engine is vigil's in-process implementation of vigil.Service: it
// validates and canonicalises registrations, resolves every default in one
// place, persists through a vigil.Store, keeps the scheduler armed, and
// answers waits and mailbox long-polls from an in-memory event hub. The
// daemon serves it over HTTP; Go programs may use it directly.
//
// The scheduler decides when a watch's turn comes; the engine decides what
// happens then (it is the scheduler's Prober): the probe, recording what it
// saw, settling with the outcome message in one transaction, push
// delivery, events, pruning, and priming the scheduler from the store.
package engine

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/oklog/ulid/v2"

	"github.com/vigil-run/vigil"
	"github.com/vigil-run/vigil/deliver"
	"github.com/vigil-run/vigil/scheduler"
	"github.com/vigil-run/vigil/watcher"
	"github.com/vigil-run/vigil/wording"
)

// Config configures an Engine. Zero fields take defaults.
type Config struct {
	Store    vigil.Store
	Watchers *watcher.Registry
	// Limits; the zero value means vigil.DefaultLimits().
	Limits vigil.Limits
	// NowFunc is the clock; nil means time.Now.
	NowFunc func() time.Time
	// Scheduler decides when each watch's turn comes; the engine primes
	// it, adds registrations to it and runs its loop. Nil makes one with
	// Workers probe workers (default DefaultWorkers) on NowFunc's clock.
	Scheduler *scheduler.Scheduler
	// Workers sizes the probe pool of the scheduler made when Scheduler
	// is nil.
	Workers int
	Logger  *slog.Logger
	// JitterFunc returns a random duration in [0, n): where in its
	// interval a restart re-arms each probing watch. Nil uses
	// math/rand/v2.
	JitterFunc func(n time.Duration) time.Duration
	// NewIDFunc makes watch and message ids; nil makes ULIDs.
	NewIDFunc func() string
	// DeliverFunc, when set, hears of each settlement that won, after its
	// commit, with the outcome message (nil for a silent settlement such as
	// one answered at creation). It hands the work to the push channels and
	// must not block.
	DeliverFunc func(w *vigil.Watch, m *vigil.Message)
	// CheckFunc, when set, runs before each probe, timers' included, and
	// before a token watch's completion is taken; a
	// *vigil.StopError cancels the watch silently with the reason it
	// names (a revoked token), and no probe runs.
	CheckFunc func(ctx context.Context, w *vigil.Watch) error
	// Metrics, when set, hears of each probe and each settlement, for
	// monitoring.
	Metrics Metrics
	// ProbeTimeout is a hard cap on one probe (default 15 min).
	ProbeTimeout time.Duration
	// DeliverPolicy says which push channels registrations may ask for
	// (see deliver.Policy); the zero value allows webhooks only.
	DeliverPolicy deliver.Policy
	// CompletionKey, when set, is the key a token watch's secret is
	// derived from, with the watch's id (see completionSecret): a replay
	// of its registration (the same idempotency key) answers the same
	// completion token again. Nil: a random secret, answered only by the
	// registration that made it. Every daemon of one store must hold the
	// same key.
	CompletionKey []byte
	// Shared says other daemons write to the same store (PostgreSQL
	// replicas) and what they commit is announced to this engine
	// (Announce, AnnounceWatch, Rewake): an event that reaches it both
	// ways is then sent to subscribers once.
	Shared bool
	// HoldsFunc, when set, says whether this engine schedules the watch
	// id: on a replica of several on one database, whether it holds the
	// watch's shard. A registration of a watch it does not hold is not
	// scheduled here (its holder hears of it from the database and arms
	// it; registration with observe then answers without waiting), and
	// Check of one asks CheckElsewhereFunc. Nil: every watch is this
	// engine's.
	HoldsFunc func(id string) bool
	// CheckElsewhereFunc asks the holder of a watch this engine does not
	// hold to probe it now (Check); nil answers conflict.
	CheckElsewhereFunc func(ctx context.Context, id string) error
}

// Engine implements vigil.Service in-process.
type Engine struct {
	store    vigil.Store
	watchers *watcher.Registry
	stoppers map[vigil.Kind]watcher.Stopper // the watchers that implement it
	limits   vigil.Limits
	now      func() time.Time
	newID    func() string
	log      *slog.Logger
	sched    *scheduler.Scheduler
	probes   *prober
	hub      *hub
	deliver  deliver.Policy
	// completionKey is Config.CompletionKey.
	completionKey []byte
	// holds and checkElsewhere are Config.HoldsFunc and
	// Config.CheckElsewhereFunc.
	holds          func(id string) bool
	checkElsewhere func(ctx context.Context, id string) error
	// recent remembers each watch's last probes (the panel's).
	recent *probeLog
	// beforeCheckWait, set by tests, runs in Check once it found the
	// watch pending and live, before it listens for its settlement.
	beforeCheckWait func(id string)
}

var _ vigil.Service = (*Engine)(nil)

// New returns an engine. Call Prime, then Run (or drive Tick in tests).
func New(cfg Config) *Engine {
	if cfg.Limits == (vigil.Limits{}) {
		cfg.Limits = vigil.DefaultLimits()
	}
	if cfg.NowFunc == nil {
		cfg.NowFunc = time.Now
	}
	if cfg.NewIDFunc == nil {
		cfg.NewIDFunc = func() string { return ulid.Make().String() }
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	e := &Engine{
		store: cfg.Store, watchers: cfg.Watchers, limits: cfg.Limits,
		now:   func() time.Time { return cfg.NowFunc().UTC().Truncate(time.Millisecond) },
		newID: cfg.NewIDFunc, log: log.With("component", "engine"), hub: newHub(),
		deliver: cfg.DeliverPolicy, recent: newProbeLog(), completionKey: cfg.CompletionKey,
		holds: cfg.HoldsFunc, checkElsewhere: cfg.CheckElsewhereFunc,
	}
	if cfg.Shared {
		e.hub.seen = newSeen()
	}
	e.stoppers = make(map[vigil.Kind]watcher.Stopper)
	if cfg.Watchers != nil {
		for _, k := range cfg.Watchers.Kinds() {
			if s, ok := mustLookup(cfg.Watchers, k).(watcher.Stopper); ok {
				e.stoppers[k] = s
			}
		}
	}
	e.sched = cfg.Scheduler
	if e.sched == nil {
		e.sched = scheduler.New(scheduler.Config{NowFunc: e.now, Workers: cfg.Workers})
	}
	if cfg.JitterFunc == nil {
		cfg.JitterFunc = func(n time.Duration) time.Duration {
			if n <= 0 {
				return 0
			}
			return time.Duration(rand.Int64N(int64(n)))
		}
	}
	if cfg.ProbeTimeout <= 0 {
		cfg.ProbeTimeout = 15 * time.Minute
	}
	e.probes = &prober{
		cfg: probeConfig{
			Store: cfg.Store, Watchers: cfg.Watchers, Limits: cfg.Limits, JitterFunc: cfg.JitterFunc,
			EventFunc: e.schedulerEvent, NewIDFunc: cfg.NewIDFunc, ProbeTimeout: cfg.ProbeTimeout, BatchSize: 512,
			DeliverFunc: cfg.DeliverFunc, CheckFunc: cfg.CheckFunc, Metrics: cfg.Metrics,
			ProbedFunc: func(w *vigil.Watch, obs *vigil.Observation, ticket uint64) {
				e.recent.record(w.ID, obs, w.CheckedAt, ticket)
			},
			StartFunc: e.recent.start,
			HoldsFunc: cfg.HoldsFunc,
			StopFunc:  e.stop,
		},
		log: log.With("component", "scheduler"), now: e.now, sched: e.sched,
	}
	return e
}

func mustLookup(r *watcher.Registry, k vigil.Kind) watcher.Watcher {
	w, _ := r.Lookup(k)
	return w
}

// schedulerEvent publishes the scheduler's events; a watch the scheduler
// cancelled (its token revoked) has what it started stopped first.
func (e *Engine) schedulerEvent(ev vigil.Event) {
	if ev.Type == vigil.EventWatchSettled && ev.State == vigil.StateCancelled {
		e.stop("", ev.WatchID)
	}
	e.hub.publish(ev)
}

// stop ends what a cancelled watch's probes started and would outlive it
// (see watcher.Stopper). kind "" tries every kind that can.
func (e *Engine) stop(kind vigil.Kind, id string) {
	for k, s := range e.stoppers {
		if kind != "" && k != kind {
			continue
		}
		if err := s.Stop(context.Background(), id); err != nil {
			e.log.Warn("could not stop what the cancelled watch started", "watch_id", id, "kind", k, "err", err)
		}
	}
}

// Prime loads every pending watch from the store and arms the scheduler:
// each probing watch at a random point inside its own interval (so a
// restart does not probe everything at once), each instant watch at its
// instant. Watches whose deadline passed while the daemon was down are
// expired and mailed at once; if the store cannot settle them, Prime fails
// (the daemon does not become ready) and nothing of them is scheduled.
// Rows of kinds this build has no watcher for are left untouched until
// their deadline, when they expire with reason ReasonNoWatcher; those
// without a deadline are left untouched.
func (e *Engine) Prime(ctx context.Context) error { return e.probes.prime(ctx, nil) }

// PrimeWith is Prime with a step of the caller's between reading the
// pending watches and settling any: before runs once they are read and in
// the scheduler, before the overdue expire and before the scheduler may
// run any. The daemon resumes the last run's deliveries there, so that
// what is settled from then on is handed over afresh, while the reading
// need not wait for that write. An error from before fails PrimeWith.
func (e *Engine) PrimeWith(ctx context.Context, before func(context.Context) error) error {
	return e.probes.prime(ctx, before)
}

// Adopt arms pending watches loaded after the start, as Prime arms those
// it loads: a replica calls it with the pending watches of the shards it
// took over. Overdue deadlines expire at once; watches held already are
// left as they are.
func (e *Engine) Adopt(ctx context.Context, rows []vigil.ScheduleEntry) error {
	return e.probes.adopt(ctx, rows)
}

// ArmMany schedules pending watches registered elsewhere (on another replica,
// in a shard this engine holds), as a registration here would have:
// watches it holds already, or does not hold the shard of, are skipped.
func (e *Engine) ArmMany(ws []*vigil.Watch) {
	e.probes.addMany(ws)
}

// Forget stops scheduling the watches with ids: cancelled or closed on
// another replica. What their probes started (a run's process) is stopped.
func (e *Engine) Forget(ids ...string) {
	for _, id := range ids {
		if _, held := e.sched.Live(id); held {
			e.sched.Remove(id)
			e.stop("", id)
		}
	}
}

// Run runs the scheduler loop, the engine probing, until ctx is done.
func (e *Engine) Run(ctx context.Context) error { return e.sched.Run(ctx, e.probes) }

// Tick runs everything due at now to completion and returns how many
// watches it evaluated (see scheduler.Tick): tests drive the engine with
// it and a fake clock.
func (e *Engine) Tick(ctx context.Context, now time.Time) int {
	return e.sched.Tick(ctx, e.probes, now)
}

// view fills in what lives in memory: next due and polls of a pending
// watch; a pending row of a kind this build cannot watch shows unwatchable.
func (e *Engine) view(w *vigil.Watch) *vigil.Watch {
	// Secrets in the delivery options are never shown. A copy: the
	// scheduler may hand the same watch to the dispatcher.
	if len(w.Deliver) > 0 {
		c := *w
		c.Deliver = deliver.Redact(w.Deliver)
		w = &c
	}
	// Nor are credentials in the predicate (a URL's password, an
	// Authorization header): the probe reads the stored row, never this.
	if r := vigil.RedactJSON(w.Predicate); len(r) > 0 && &r[0] != &w.Predicate[0] {
		c := *w
		c.Predicate = r
		w = &c
	}
	if w.State != vigil.StatePending {
		return w
	}
	if _, ok := e.watchers.Lookup(w.Kind); !ok {
		w.State = vigil.StateUnwatchable
		return w
	}
	if l, ok := e.sched.Live(w.ID); ok {
		live(w, l)
	}
	return w
}

// live overlays the scheduler's figures of a pending watch on its row: the
// store holds them as of its last write, which an unchanged observation
// does not make.
func live(w *vigil.Watch, l scheduler.Live) {
	w.NextDue = l.NextDue
	w.Polls = max(w.Polls, l.Polls)
	w.Errors = max(w.Errors, l.Errors)
	if l.CheckedAt.After(w.CheckedAt) {
		w.CheckedAt = l.CheckedAt
		w.ConsecutiveErrors = l.ConsecutiveErrors
	}
}

// scopeCheck hides another recipient's watch as not found.
func scopeCheck(ctx context.Context, w *vigil.Watch) error {
	if s, ok := vigil.ScopeFrom(ctx); ok && !s.Allows(w.Recipient) {
		return notFound(w.ID)
	}
	return nil
}

func notFound(id string) error {
	return &vigil.Error{Code: vigil.CodeNotFound, Message: fmt.Sprintf("no watch %q", id)}
}

func (e *Engine) get(ctx context.Context, id string) (*vigil.Watch, error) {
	if err := validID(id); err != nil {
		return nil, err
	}
	w, err := e.store.WatchGet(ctx, id)
	if errors.Is(err, vigil.ErrNotFound) {
		return nil, notFound(id)
	}
	if err != nil {
		return nil, err
	}
	if err := scopeCheck(ctx, w); err != nil {
		return nil, err
	}
	return e.view(w), nil
}

// Watch implements vigil.Service.
func (e *Engine) Watch(ctx context.Context, id string) (*vigil.Watch, error) { return e.get(ctx, id) }

// Watches implements vigil.Service.
func (e *Engine) Watches(ctx context.Context, q vigil.ListRequest) (vigil.WatchPage, error) {
	p := vigil.WatchListParams{Recipient: q.Recipient, State: q.State, Kind: q.Kind, Labels: q.Labels, Text: q.Text, After: q.After, Limit: q.Limit}
	if len(q.Text) > vigil.MaxListText || strings.ContainsAny(q.Text, "\x00\r\n") {
		return vigil.WatchPage{}, vigil.FieldErrorf(vigil.CodeInvalidRequest, "text", "text must be one line of at most %d bytes", vigil.MaxListText)
	}
	if q.Recipient != "" {
		if err := vigil.ValidName("recipient", q.Recipient, e.limits.MaxNameBytes); err != nil {
			return vigil.WatchPage{}, err
		}
	}
	if q.State != "" && !q.State.Valid() {
		return vigil.WatchPage{}, vigil.FieldErrorf(vigil.CodeInvalidRequest, "state", "unknown state %q", q.State)
	}
	if q.Kind != "" {
		if _, ok := e.watchers.Spec(q.Kind); !ok {
			return vigil.WatchPage{}, vigil.FieldErrorf(vigil.CodeUnknownKind, "kind", "unknown kind %q", q.Kind)
		}
	}
	if q.Limit < 0 || q.Limit > 1000 {
		return vigil.WatchPage{}, vigil.FieldErrorf(vigil.CodeInvalidRequest, "limit", "limit must be between 1 and 1000")
	}
	if err := validLabels(q.Labels, e.limits); err != nil {
		return vigil.WatchPage{}, err
	}
	if s, ok := vigil.ScopeFrom(ctx); ok && len(s.Recipients) > 0 {
		if q.Recipient != "" && !s.Allows(q.Recipient) {
			return vigil.WatchPage{}, vigil.Errorf(vigil.CodeNotFound, "no recipient %q", q.Recipient)
		}
		p.Recipients = s.Recipients
	}
	// An unwatchable row is stored as pending: filter on the view.
	if q.State == vigil.StateUnwatchable {
		p.State = vigil.StatePending
	}
	// The store matched the text against the stored predicate, secrets
	// and all, and a pending row of a kind this build cannot watch is
	// shown unwatchable: the answer keeps only what its view matches (so
	// that a text is no way to learn a [redacted] value). A page the view
	// cut short is filled from the store's next ones, each asked for no
	// more than the page still lacks, so that the last watch read is the
	// last one kept and the store's cursor is the page's. At most
	// listRounds reads: a page still short then carries the cursor of the
	// last read, so the caller goes on from there, and the end is said
	// only where the store said it.
	want := q.Limit
	if want == 0 {
		want = listDefaultLimit
	}
	out := []*vigil.Watch{}
	var next string
	p.Limit = want
	for round := 1; ; round++ {
		page, err := e.store.WatchList(ctx, p)
		if err != nil {
			return vigil.WatchPage{}, err
		}
		for _, w := range page.Watches {
			w = e.view(w)
			if q.State != "" && w.State != q.State {
				continue
			}
			if q.Text != "" && !vigil.TextMatchesWatch(q.Text, w.Note, w.Predicate) {
				continue
			}
			out = append(out, w)
		}
		next = page.Next
		if next == "" || len(out) >= want || round == listRounds {
			break
		}
		p.After, p.Limit = next, want-len(out)
	}
	return vigil.WatchPage{Watches: out, Next: next}, nil
}

// listDefaultLimit is the size of a page of Watches asked for without a
// limit, as the stores have it; listRounds bounds the reads of the store
// that one page of Watches makes when its view drops watches the store
// matched.
const (
	listDefaultLimit = 100
	listRounds       = 8
)

// Counts returns how many watches the caller may see are in each state; a
// pending watch of a kind this build cannot watch counts as unwatchable.
func (e *Engine) Counts(ctx context.Context) (map[vigil.State]int, error) {
	var recipients []string
	if s, ok := vigil.ScopeFrom(ctx); ok {
		recipients = s.Recipients
	}
	cs, err := e.store.WatchCounts(ctx, recipients)
	if err != nil {
		return nil, err
	}
	out := map[vigil.State]int{}
	for _, c := range cs {
		st := c.State
		if st == vigil.StatePending {
			if _, ok := e.watchers.Lookup(c.Kind); !ok {
				st = vigil.StateUnwatchable
			}
		}
		out[st] += c.N
	}
	return out, nil
}

// Why implements vigil.Service.
func (e *Engine) Why(ctx context.Context, id string) (*vigil.Why, error) {
	w, err := e.get(ctx, id)
	if err != nil {
		return nil, err
	}
	return &vigil.Why{Watch: w, Sentence: wording.Why(w)}, nil
}

// Wait implements vigil.Service. A watch shown unwatchable (a kind this
// build has no watcher for) has not settled: it is waited on as a pending
// one is (its deadline expires it; a cancel, or a replica that has the
// watcher, may settle it sooner).
func (e *Engine) Wait(ctx context.Context, id string, timeout time.Duration) (*vigil.Watch, error) {
	timeout = min(max(timeout, 0), e.limits.MaxWait)
	s, cancel := e.hub.subscribe(vigil.EventFilter{WatchID: id}, 1, vigil.EventWatchSettled)
	defer cancel()
	w, err := e.get(ctx, id)
	if err != nil || w.State.Terminal() || timeout == 0 {
		return w, err
	}
	t := time.NewTimer(timeout)
	defer t.Stop()
	for {
		// Woken by its settlement, or by Rewake: read it again, and
		// wait on while it is still pending.
		select {
		case <-s.ch:
		case <-t.C:
			return e.get(ctx, id)
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		if w, err = e.get(ctx, id); err != nil || w.State.Terminal() {
			return w, err
		}
	}
}

// Cancel implements vigil.Service: a user's cancel leaves one neutral line in
// the mailbox, keyed by the watch so a retry cannot repeat it.
func (e *Engine) Cancel(ctx context.Context, id string) (*vigil.Watch, error) {
	w, err := e.get(ctx, id)
	if err != nil {
		return nil, err
	}
	if w.State != vigil.StatePending && w.State != vigil.StateUnwatchable {
		return w, nil
	}
	now := e.now()
	out := &vigil.Outcome{State: vigil.StateCancelled, Reason: "cancelled", Observation: w.LastObservation}
	out.Sentence = wording.Outcome(w, out)
	msg := OutcomeMessage(e.newID(), w, out, now)
	p := vigil.WatchCancelParams{ID: id, Recipients: []string{w.Recipient}, Outcome: out, SettledAt: now, Message: msg}
	// What the probes counted since the last write is kept with the
	// cancellation (w is the view: the live figures).
	if l, ok := e.sched.Live(id); ok && !l.CheckedAt.IsZero() {
		p.CheckedAt, p.Polls, p.Errors, p.ConsecutiveErrors = w.CheckedAt, w.Polls, w.Errors, w.ConsecutiveErrors
	}
	after, won, err := e.store.WatchCancel(ctx, p)
	if errors.Is(err, vigil.ErrNotFound) {
		return nil, notFound(id)
	}
	if err != nil {
		return nil, err
	}
	if won {
		e.sched.Remove(id)
		e.stop(w.Kind, id)
		e.sched.ArmPrune(now.Add(min(e.limits.RetentionWatches, e.limits.RetentionMessages)))
		e.hub.publish(vigil.Event{Type: vigil.EventWatchSettled, WatchID: id, Recipient: w.Recipient, State: vigil.StateCancelled, Text: out.Sentence, Done: true, At: now})
		e.hub.publish(vigil.Event{Type: vigil.EventMessage, WatchID: id, Recipient: w.Recipient, State: vigil.StateCancelled, Text: out.Sentence, Seq: msg.Seq, At: now})
	}
	return e.view(after), nil
}

// Check implements vigil.Service: it makes a pending watch due now and
// waits (bounded by Limits.MaxWait) for that probe to be made and what it
// decided to be written, then returns the watch as it is. A settled watch
// is a conflict; a timer, which the clock alone answers, is an
// invalid_request. A watch whose kind runs a program (command, run,
// schedule) is checked only by a caller that may run programs: a check
// runs it at a time the caller chooses, which the exec scope gates.
func (e *Engine) Check(ctx context.Context, id string) (*vigil.Watch, error) {
	w, err := e.get(ctx, id)
	if err != nil {
		return nil, err
	}
	if scope, scoped := vigil.ScopeFrom(ctx); scoped && !scope.Exec {
		if spec, _ := e.watchers.Spec(w.Kind); spec.Exec {
			return nil, vigil.Errorf(vigil.CodeForbidden, "%s watches run commands, and checking one now runs its command; this token lacks the exec scope (vigil token create --exec)", w.Kind)
		}
	}
	switch {
	case w.State == vigil.StateUnwatchable:
		return nil, vigil.Errorf(vigil.CodeConflict, "watch %s cannot be checked: this build has no watcher for its kind %q", id, w.Kind)
	case w.State != vigil.StatePending:
		return nil, vigil.Errorf(vigil.CodeConflict, "watch %s has already settled (%s); only a pending watch can be checked", id, w.State)
	}
	if spec, _ := e.watchers.Spec(w.Kind); spec.Instant {
		return nil, vigil.Errorf(vigil.CodeInvalidRequest, "watch %s is a %s: the clock alone answers it, so there is nothing to check before it is due", id, w.Kind)
	}
	if _, held := e.sched.Live(id); !held {
		if e.holds != nil && !e.holds(id) && e.checkElsewhere != nil {
			// Another replica probes it: ask it to, now, and answer
			// with the watch as it is (its probe's answer lands there).
			if err := e.checkElsewhere(ctx, id); err != nil {
				return nil, err
			}
			return w, nil
		}
		return nil, vigil.Errorf(vigil.CodeConflict, "watch %s is not being probed by this daemon, so it cannot be checked now", id)
	}
	// A probe that was already looking when Check came (its answer may
	// predate the call) does not count: Check returns once a probe that
	// started after it has been recorded. One poke makes that probe: the
	// watch comes due now, or, its probe in flight, again as that ends.
	// (A poke per probe heard would ask for one more than was wanted.)
	// A watch settled meanwhile some other way (cancelled, completed, a
	// recipient closed) is never probed again: its settlement answers.
	if e.beforeCheckWait != nil {
		e.beforeCheckWait(id)
	}
	settled, unsub := e.hub.subscribe(vigil.EventFilter{WatchID: id}, 1, vigil.EventWatchSettled)
	defer unsub()
	done, stop := e.recent.wait(id)
	defer stop()
	// Settled since it was read above (a probe already looking, a
	// cancel) and announced before the subscription: nobody would tell
	// this Check, and it would wait out MaxWait. Read it again now that
	// a later settlement is heard.
	if w, err := e.get(ctx, id); err != nil || w.State != vigil.StatePending {
		return w, err
	}
	e.sched.Poke(id)
	t := time.NewTimer(e.limits.MaxWait)
	defer t.Stop()
	for {
		select {
		case <-done:
			return e.get(ctx, id)
		case <-settled.ch:
			// Or woken by Rewake: answer only once it has settled.
			if w, err := e.get(ctx, id); err != nil || w.State != vigil.StatePending {
				return w, err
			}
		case <-t.C:
			return nil, vigil.Errorf(vigil.CodeUnavailable, "the probe of watch %s did not finish within %s; it goes on, see its detail later", id, e.limits.MaxWait)
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// Probes returns the last probes of a watch the caller may see, newest
// first (at most ProbesPerWatch; kept in memory only).
func (e *Engine) Probes(ctx context.Context, id string) ([]Probe, error) {
	if _, err := e.get(ctx, id); err != nil {
		return nil, err
	}
	return e.recent.recent(id), nil
}

// WatchMessages returns the newest mailbox messages of a watch the caller
// may see (its changes, notes and outcome; at most vigil.MaxWatchMessages),
// oldest first. A watch the caller's scope does not allow is not_found, as
// reading it is.
func (e *Engine) WatchMessages(ctx context.Context, id string) ([]*vigil.Message, error) {
	if _, err := e.get(ctx, id); err != nil {
		return nil, err
	}
	return e.store.MessagesOfWatch(ctx, id, vigil.MaxWatchMessages)
}

// Delete implements vigil.Service: a pending watch is cancelled first.
func (e *Engine) Delete(ctx context.Context, id string) error {
	w, err := e.Cancel(ctx, id)
	if err != nil {
		return err
	}
	err = e.store.WatchDelete(ctx, w.ID)
	if errors.Is(err, vigil.ErrNotFound) {
		return notFound(id)
	}
	return err
}

// CloseRecipient implements vigil.Service: pending watches are cancelled
// silently.
func (e *Engine) CloseRecipient(ctx context.Context, recipient string) (vigil.CloseResult, error) {
	if err := vigil.ValidName("recipient", recipient, e.limits.MaxNameBytes); err != nil {
		return vigil.CloseResult{}, err
	}
	if s, ok := vigil.ScopeFrom(ctx); ok && !s.Allows(recipient) {
		return vigil.CloseResult{}, vigil.Errorf(vigil.CodeNotFound, "no recipient %q", recipient)
	}
	now := e.now()
	out := &vigil.Outcome{State: vigil.StateCancelled, Reason: "recipient_closed", Sentence: fmt.Sprintf("Recipient %s was closed.", recipient)}
	ids, err := e.store.RecipientClose(ctx, vigil.RecipientCloseParams{Recipient: recipient, Outcome: out, SettledAt: now})
	if err != nil {
		return vigil.CloseResult{}, err
	}
	for _, id := range ids {
		e.sched.Remove(id)
		e.stop("", id)
		e.hub.publish(vigil.Event{Type: vigil.EventWatchSettled, WatchID: id, Recipient: recipient, State: vigil.StateCancelled, Text: out.Sentence, Done: true, At: now})
	}
	if len(ids) > 0 {
		e.sched.ArmPrune(now.Add(e.limits.RetentionWatches))
	}
	return vigil.CloseResult{Cancelled: len(ids)}, nil
}

// Messages implements vigil.Service. With Wait, an empty read blocks until
// a message arrives for the recipient or the wait passes.
func (e *Engine) Messages(ctx context.Context, r vigil.MessagesRequest) (vigil.MessagesPage, error) {
	if err := vigil.ValidName("recipient", r.Recipient, e.limits.MaxNameBytes); err != nil {
		return vigil.MessagesPage{}, err
	}
	if r.Reader != "" {
		if err := vigil.ValidName("reader", r.Reader, e.limits.MaxNameBytes); err != nil {
			return vigil.MessagesPage{}, err
		}
	}
	if r.Ack && r.Reader == "" {
		return vigil.MessagesPage{}, vigil.FieldErrorf(vigil.CodeInvalidRequest, "reader", "ack needs a reader name")
	}
	if r.After != nil && *r.After < 0 {
		return vigil.MessagesPage{}, vigil.FieldErrorf(vigil.CodeInvalidRequest, "after", "after must be a non-negative message seq")
	}
	if r.Limit < 0 || r.Limit > 1000 {
		return vigil.MessagesPage{}, vigil.FieldErrorf(vigil.CodeInvalidRequest, "limit", "limit must be between 1 and 1000")
	}
	if s, ok := vigil.ScopeFrom(ctx); ok && !s.Allows(r.Recipient) {
		return vigil.MessagesPage{}, vigil.Errorf(vigil.CodeNotFound, "no recipient %q", r.Recipient)
	}
	wait := min(max(r.Wait, 0), e.limits.MaxWait)
	var sub *sub
	if wait > 0 {
		var cancel func()
		sub, cancel = e.hub.subscribe(vigil.EventFilter{Recipient: r.Recipient}, 1, vigil.EventMessage)
		defer cancel()
	}
	p := vigil.MessagesReadParams{Recipient: r.Recipient, Reader: r.Reader, After: r.After, Limit: r.Limit}
	page, err := e.store.MessagesRead(ctx, p)
	if err != nil {
		return page, err
	}
	if len(page.Messages) == 0 && wait > 0 {
		t := time.NewTimer(wait)
		defer t.Stop()
	waiting:
		for len(page.Messages) == 0 {
			// Woken by a message for the recipient, or by Rewake: read
			// again, and wait on while there is nothing to read.
			select {
			case <-sub.ch:
				if page, err = e.store.MessagesRead(ctx, p); err != nil {
					return page, err
				}
			case <-t.C:
				break waiting
			case <-ctx.Done():
				return page, ctx.Err()
			}
		}
	}
	if page.Messages == nil {
		page.Messages = []*vigil.Message{}
	}
	if r.Ack && len(page.Messages) > 0 {
		last := page.Messages[len(page.Messages)-1].Seq
		if err := e.store.MessagesAck(ctx, vigil.MessagesAckParams{Recipient: r.Recipient, Reader: r.Reader, Seq: last}); err != nil {
			return page, err
		}
	}
	return page, nil
}

// Ack implements vigil.Service.
func (e *Engine) Ack(ctx context.Context, r vigil.AckRequest) error {
	if err := vigil.ValidName("recipient", r.Recipient, e.limits.MaxNameBytes); err != nil {
		return err
	}
	if err := vigil.ValidName("reader", r.Reader, e.limits.MaxNameBytes); err != nil {
		return err
	}
	if r.Seq < 0 {
		return vigil.FieldErrorf(vigil.CodeInvalidRequest, "seq", "seq must be a non-negative message seq")
	}
	if s, ok := vigil.ScopeFrom(ctx); ok && !s.Allows(r.Recipient) {
		return vigil.Errorf(vigil.CodeNotFound, "no recipient %q", r.Recipient)
	}
	// An ack names a message read: a seq past the newest would move the
	// cursor past messages yet to come, which the reader would never see.
	// Seqs are given in order, so no message to come has one at or below
	// the newest.
	newest, err := e.store.MessagesLastSeq(ctx)
	if err != nil {
		return err
	}
	if r.Seq > newest {
		return vigil.FieldErrorf(vigil.CodeInvalidRequest, "seq", "seq %d is past the newest message (%d): ack the seq of the last message read", r.Seq, newest)
	}
	return e.store.MessagesAck(ctx, vigil.MessagesAckParams(r))
}

// Subscribe implements vigil.Service. Every stream sends each message
// event once and in seq order, reading the mailbox when their events come
// out of order (see stream): a live one from the newest message when it
// subscribes, one resumed with f.After from there.
func (e *Engine) Subscribe(ctx context.Context, f vigil.EventFilter) (<-chan vigil.Event, error) {
	if f.After != nil && *f.After < 0 {
		return nil, vigil.FieldErrorf(vigil.CodeInvalidRequest, "after", "a stream resumes after a message seq, a whole number of 0 or more, not %d", *f.After)
	}
	var allowed func(vigil.Event) bool
	var recipient string // whose mailbox the stream reads; "" for all
	scope, scoped := vigil.ScopeFrom(ctx)
	if scoped && len(scope.Recipients) > 0 {
		if f.Recipient != "" && !scope.Allows(f.Recipient) {
			return nil, vigil.Errorf(vigil.CodeNotFound, "no recipient %q", f.Recipient)
		}
		allowed = func(ev vigil.Event) bool { return scope.Allows(ev.Recipient) }
		if len(scope.Recipients) == 1 {
			recipient = scope.Recipients[0]
		}
	}
	if f.WatchID != "" {
		// Another recipient's watch is not found, as on every route;
		// the stream reads its recipient's mailbox only.
		w, err := e.get(ctx, f.WatchID)
		if err != nil {
			return nil, err
		}
		recipient = w.Recipient
	}
	if f.Recipient != "" {
		recipient = f.Recipient
	}
	// Subscribe before reading where the mailboxes end: a message
	// committed after that read is then announced on the subscription.
	s, cancel := e.hub.subscribeStream(f)
	var last int64
	if f.After != nil {
		last = *f.After
	} else {
		var err error
		if last, err = e.store.MessagesLastSeq(ctx); err != nil {
			cancel()
			return nil, err
		}
	}
	return e.stream(ctx, s, cancel, f, allowed, recipient, last, f.After != nil), nil
}

// requestHash identifies a registration for the idempotency ledger: the
// request as sent, without the key and the observe flag.
func requestHash(r vigil.RegisterRequest) string {
	r.IdempotencyKey, r.Observe = "", false
	if len(r.Predicate) > 0 {
		if c, err := vigil.CanonicalJSON(r.Predicate); err == nil {
			r.Predicate = c
		}
	}
	if len(r.Deliver) > 0 {
		if c, err := vigil.CanonicalJSON(r.Deliver); err == nil {
			r.Deliver = c
		}
	}
	b, _ := json.Marshal(r)
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:16])
}

func validID(id string) error {
	if id == "" || len(id) > 64 || strings.ContainsAny(id, "/ \t\r\n") {
		return vigil.FieldErrorf(vigil.CodeNotFound, "id", "no watch %q", clipName(id))
	}
	return nil
}

func validLabels(ls map[string]string, l vigil.Limits) error {
	if len(ls) > l.MaxLabels {
		return vigil.FieldErrorf(vigil.CodeInvalidRequest, "labels", "at most %d labels", l.MaxLabels)
	}
	for k, v := range ls {
		if err := vigil.ValidName("labels", k, 63); err != nil {
			return vigil.FieldErrorf(vigil.CodeInvalidRequest, "labels", "label key %q may hold only letters, digits and . _ : @ + - (at most 63 bytes)", clipName(k))
		}
		if len(v) > l.MaxLabelBytes {
			return vigil.FieldErrorf(vigil.CodeInvalidRequest, "labels."+k, "label %q is longer than %d bytes", k, l.MaxLabelBytes)
		}
		// PostgreSQL refuses a text that is not UTF-8 or holds a NUL
		// (a registration's, a list filter's): refused here, in every
		// store, not answered internal there.
		if !utf8.ValidString(v) || strings.IndexByte(v, 0) >= 0 {
			return vigil.FieldErrorf(vigil.CodeInvalidRequest, "labels."+k, "label %q must be UTF-8 without a NUL byte", k)
		}
	}
	return nil
}

func clipName(s string) string {
	if len(s) > 40 {
		return s[:40] + "…"
	}
	return s
}
