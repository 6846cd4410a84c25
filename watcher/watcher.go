// Package watcher defines the contract every kind's watcher fulfils, the
// registry value the daemon builds with one explicit Register per kind, and
// Run, the one place where a probe's errors and panics become an
// unavailable observation.
package watcher

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/vigil-run/vigil"
)

// Watcher answers one question about one kind: has this settled? A probe is
// ONE bounded observation: it must not sleep or loop, and holds no
// scheduling, persistence, delivery or retry logic.
type Watcher interface {
	// Kind is the kind this watcher answers for.
	Kind() vigil.Kind
	// Descriptor is what vigil knows about the kind (its kind package's
	// Descriptor()); its Kind is Kind().
	Descriptor() Descriptor
	// Canonicalize validates a predicate, fills its defaults and returns its
	// one canonical spelling. Refusals are *vigil.Error with code
	// invalid_predicate and the field at fault ("predicate.url"). now
	// resolves relative times.
	Canonicalize(ctx context.Context, raw json.RawMessage, now time.Time) (Canonical, error)
	// Admit refuses, with code watch_unobservable and a message naming the
	// setting to change, a canonical predicate that can never be observed
	// with this daemon's configuration. It checks configuration only, never
	// the network.
	Admit(ctx context.Context, predicate json.RawMessage) error
	// Probe makes one observation. A returned error means unavailable
	// (transient) unless wrapped with Permanent.
	Probe(ctx context.Context, p Probe) (vigil.Observation, error)
}

// Stopper is implemented by a watcher whose probes start something that
// outlives them (a run's program). The engine calls Stop once a watch of its
// kind is cancelled — by its caller, its recipient closing or its token's
// revocation — since no final probe will come to end it, and when a probe
// finds the watch settled by another (a replica where it was cancelled or
// its recipient closed). Stop must return promptly and do nothing for a
// watch that started nothing.
type Stopper interface {
	Stop(ctx context.Context, watchID string) error
}

// FinalProber is implemented by a watcher whose probe at the deadline
// (Probe.Final) does what its other probes do not: it ends what the
// watch started (a run's program), or answers what they would still wait
// on (a folder's burst still settling). The engine runs that probe at the
// deadline even when a probe of the watch was still running as the
// deadline came. Of any other watcher, such a probe is the watch's final
// probe: its answer decides as the final probe's would, and nothing is
// probed again (a command is not run twice, and the expiry is not late).
type FinalProber interface {
	// FinalProbe marks the watcher; it is never called.
	FinalProbe()
}

// Canonical is a validated predicate.
type Canonical struct {
	Predicate json.RawMessage
	// StartAt is when the watch is first due, if not at once (a timer's instant).
	StartAt time.Time
	// Standing makes this predicate's watch standing even though its kind
	// is not (a folder predicate with "standing": true): no deadline, and
	// each change is a "changed" message until it is cancelled.
	Standing bool
	// Every, when set, replaces the kind's default interval for this
	// predicate when the caller gives none: an event-driven watcher that
	// is woken by Poke asks for a long safety interval instead of polling.
	Every time.Duration
	// Secret is a capability made at registration (a token watch's
	// completion secret). It is returned once to the registering caller and
	// never stored: the predicate holds only what checks it.
	Secret string
	// Exec marks a predicate that runs a program although its kind does
	// not (a folder watch's on_change reviewer): a scoped token needs the
	// exec scope to register it, as for the exec kinds.
	Exec bool
}

// Probe is the input of one probe.
type Probe struct {
	WatchID   string
	Kind      vigil.Kind
	Predicate json.RawMessage
	Now       time.Time
	// Created is when the watch was registered; zero when the caller
	// does not know. A watcher that gives a condition time to begin (a
	// commit still being pushed) counts from it.
	Created time.Time
	// Last is the last recorded observation, nil before the first. A
	// standing watcher compares against it: with no Last it answers pending
	// (the silent baseline); a change answers satisfied, with a Summary
	// that says what changed, and becomes the new baseline together with
	// its "changed" message.
	Last *vigil.Observation
	// ChainDepth is the watch's VIGIL_CHAIN_DEPTH: how deep in a chain of
	// vigil-started commands it was registered. Watchers that start
	// commands give them ChainDepth+1.
	ChainDepth int
	// Final is set on the probe made at the watch's deadline, its last: a
	// watcher that started something that outlives probes (a run) ends it.
	// Only a FinalProber's watch is sure to get one: of another watcher, a
	// probe still running as the deadline came (Final unset) may be the
	// last, and the watch settles on its answer.
	Final bool
}

// ErrWrongKind is returned by a watcher given another kind's predicate: a
// routing bug, never a verdict.
var ErrWrongKind = errors.New("watcher: predicate of the wrong kind")

// CheckKind returns ErrWrongKind (wrapped with both kinds) unless p is of kind k.
func CheckKind(p Probe, k vigil.Kind) error {
	if p.Kind != k {
		return fmt.Errorf("%w: %s watcher given a %q predicate", ErrWrongKind, k, p.Kind)
	}
	return nil
}

type permanentError struct{ err error }

func (e permanentError) Error() string { return e.err.Error() }
func (e permanentError) Unwrap() error { return e.err }

// Permanent marks err as an answer that will never change (a repository
// that does not exist, a command not found): the watch settles errored at once.
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	return permanentError{err}
}

// IsPermanent reports whether err was marked with Permanent.
func IsPermanent(err error) bool {
	var p permanentError
	return errors.As(err, &p)
}

// Run probes once through w, catching errors and panics: any error becomes
// an unavailable observation with the reason recorded (permanent if marked),
// and a panic becomes an unavailable observation saying so. ErrWrongKind is
// returned as an error: it is a bug, not an observation.
func Run(ctx context.Context, w Watcher, p Probe) (obs vigil.Observation, err error) {
	defer func() {
		if r := recover(); r != nil {
			// The reason stays the same from one panic to the next, so a
			// watcher that keeps panicking writes once, not every probe.
			obs = vigil.Observation{Verdict: vigil.VerdictUnavailable, At: p.Now,
				Reason: fmt.Sprintf("the %s watcher panicked: %v", p.Kind, r)}
			err = nil
		}
	}()
	obs, err = w.Probe(ctx, p)
	if errors.Is(err, ErrWrongKind) {
		return vigil.Observation{}, err
	}
	if obs.At.IsZero() {
		obs.At = p.Now
	}
	if err != nil {
		return vigil.Observation{Verdict: vigil.VerdictUnavailable, At: p.Now, Reason: err.Error(),
			Permanent: IsPermanent(err), Facts: obs.Facts}, nil
	}
	switch obs.Verdict {
	case vigil.VerdictSatisfied, vigil.VerdictFailed, vigil.VerdictPending, vigil.VerdictUnavailable:
	default:
		return vigil.Observation{Verdict: vigil.VerdictUnavailable, At: p.Now,
			Reason: fmt.Sprintf("the %s watcher returned no verdict", p.Kind)}, nil
	}
	return obs, nil
}

// Registry maps kinds to watchers and their descriptors. Build it with
// Build, or NewRegistry and one Register call per kind; it is read-only once the
// daemon starts.
type Registry struct {
	m     map[vigil.Kind]Watcher
	kinds Kinds
}

// NewRegistry returns a registry holding ws.
func NewRegistry(ws ...Watcher) *Registry {
	r := &Registry{m: make(map[vigil.Kind]Watcher)}
	for _, w := range ws {
		r.Register(w)
	}
	return r
}

// Build returns a registry of one watcher per kind of ks, each made by
// its descriptor's New from deps: the daemon registers every kind this
// way. It panics on a descriptor without New, a bug in the kind's
// package.
func Build(ks Kinds, deps Deps) *Registry {
	r := NewRegistry()
	for _, d := range ks.List() {
		if d.New == nil {
			panic(fmt.Sprintf("watcher: the descriptor of kind %q has no New", d.Kind))
		}
		r.Register(d.New(deps))
	}
	return r
}

// Watchers returns the registered watchers, sorted by kind.
func (r *Registry) Watchers() []Watcher {
	ws := make([]Watcher, 0, len(r.m))
	for _, k := range r.Kinds() {
		ws = append(ws, r.m[k])
	}
	return ws
}

// Register adds w and its descriptor; it panics on a duplicate kind or a
// descriptor of another kind, a wiring bug.
func (r *Registry) Register(w Watcher) {
	if _, dup := r.m[w.Kind()]; dup {
		panic(fmt.Sprintf("watcher: kind %q registered twice", w.Kind()))
	}
	d := w.Descriptor()
	if d.Kind != w.Kind() {
		panic(fmt.Sprintf("watcher: the %s watcher has the descriptor of %q", w.Kind(), d.Kind))
	}
	r.m[w.Kind()] = w
	r.kinds = r.kinds.with(d)
}

// Spec returns the defaults of k, and false for a kind not registered.
func (r *Registry) Spec(k vigil.Kind) (vigil.KindSpec, bool) {
	return r.kinds.Spec(k)
}

// Descriptors returns the descriptors of the registered kinds: the kinds
// this daemon runs.
func (r *Registry) Descriptors() Kinds { return r.kinds }

// Lookup returns the watcher for k.
func (r *Registry) Lookup(k vigil.Kind) (Watcher, bool) {
	w, ok := r.m[k]
	return w, ok
}

// Kinds lists the registered kinds, sorted.
func (r *Registry) Kinds() []vigil.Kind {
	ks := make([]vigil.Kind, 0, len(r.m))
	for k := range r.m {
		ks = append(ks, k)
	}
	sort.Slice(ks, func(i, j int) bool { return ks[i] < ks[j] })
	return ks
}

// RepoNamer is implemented by the watchers whose watches read a forge
// repository with the daemon's own forge credentials (ci, ticket): the
// engine refuses a scoped token's watch on a repository its repos scope
// does not match, before Canonicalize reads anything.
type RepoNamer interface {
	// Repository returns the repository a predicate (as given, or
	// canonical) names, as forge.RepoPath spells it: "github/acme/api".
	// It reads no network; a predicate that does not parse is an error,
	// as Canonicalize's.
	Repository(predicate json.RawMessage) (string, error)
}
