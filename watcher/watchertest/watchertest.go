// Package watchertest provides fake watchers, by behaviour, for testing
// code that drives watchers (the scheduler, the engine): one that never
// settles, one that settles after n probes, one that fails, one that
// panics, one that is unavailable, and an adapter for any probe function.
//
// Every fake answers for the kind given at construction, refuses a probe
// of another kind with watcher.ErrWrongKind, and counts its probes per
// watch id, safely for concurrent use. Canonicalize accepts any JSON
// object and returns it in vigil.CanonicalJSON form; Admit returns
// AdmitErr.
package watchertest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/vigil-run/vigil"
	"github.com/vigil-run/vigil/watcher"
	"github.com/vigil-run/vigil/watcher/kinds"
)

// Fake is a watcher whose probes answer as its constructor says.
type Fake struct {
	kind vigil.Kind
	fn   func(ctx context.Context, p watcher.Probe, n int) (vigil.Observation, error)

	// AdmitErr is what Admit returns; set it before first use.
	AdmitErr error

	mu     sync.Mutex
	probes map[string]int
	total  int
}

var _ watcher.Watcher = (*Fake)(nil)

func newFake(kind vigil.Kind, fn func(context.Context, watcher.Probe, int) (vigil.Observation, error)) *Fake {
	return &Fake{kind: kind, fn: fn, probes: make(map[string]int)}
}

// NeverSettles returns a fake that answers pending to every probe.
func NeverSettles(kind vigil.Kind) *Fake {
	return newFake(kind, func(context.Context, watcher.Probe, int) (vigil.Observation, error) {
		return vigil.Observation{Verdict: vigil.VerdictPending, Summary: "not yet"}, nil
	})
}

// SettlesAfter returns a fake that answers pending until the n-th probe of
// a watch, which (like every later one) is satisfied.
func SettlesAfter(kind vigil.Kind, n int) *Fake {
	return newFake(kind, func(_ context.Context, _ watcher.Probe, i int) (vigil.Observation, error) {
		if i >= n {
			return vigil.Observation{Verdict: vigil.VerdictSatisfied, Summary: "settled",
				Facts: map[string]any{"after": n}}, nil
		}
		return vigil.Observation{Verdict: vigil.VerdictPending, Summary: "not yet"}, nil
	})
}

// Fails returns a fake that answers failed to every probe.
func Fails(kind vigil.Kind) *Fake {
	return newFake(kind, func(context.Context, watcher.Probe, int) (vigil.Observation, error) {
		return vigil.Observation{Verdict: vigil.VerdictFailed, Summary: "failed"}, nil
	})
}

// Panics returns a fake whose every probe panics.
func Panics(kind vigil.Kind) *Fake {
	return newFake(kind, func(_ context.Context, p watcher.Probe, _ int) (vigil.Observation, error) {
		panic(fmt.Sprintf("watchertest: %s fake panics on watch %s", kind, p.WatchID))
	})
}

// ErrUnavailable is the error the Unavailable fake returns.
var ErrUnavailable = errors.New("watchertest: the fake cannot tell")

// Unavailable returns a fake whose every probe returns ErrUnavailable,
// marked with watcher.Permanent if permanent.
func Unavailable(kind vigil.Kind, permanent bool) *Fake {
	return newFake(kind, func(context.Context, watcher.Probe, int) (vigil.Observation, error) {
		if permanent {
			return vigil.Observation{}, watcher.Permanent(ErrUnavailable)
		}
		return vigil.Observation{}, ErrUnavailable
	})
}

// Func returns a fake whose probes call fn.
func Func(kind vigil.Kind, fn func(ctx context.Context, p watcher.Probe) (vigil.Observation, error)) *Fake {
	return newFake(kind, func(ctx context.Context, p watcher.Probe, _ int) (vigil.Observation, error) {
		return fn(ctx, p)
	})
}

// Kind returns the kind given at construction.
func (f *Fake) Kind() vigil.Kind { return f.kind }

// Descriptor returns the built-in descriptor of the fake's kind (see
// package kinds), so a fake has its kind's defaults; a kind vigil does not
// build in gets a bare descriptor: no defaults, no schema.
func (f *Fake) Descriptor() watcher.Descriptor {
	if d, ok := kinds.Lookup(f.kind); ok {
		return d
	}
	return watcher.Descriptor{Kind: f.kind}
}

// Canonicalize accepts any JSON object and returns its canonical JSON.
func (f *Fake) Canonicalize(_ context.Context, raw json.RawMessage, _ time.Time) (watcher.Canonical, error) {
	var obj map[string]json.RawMessage
	if err := watcher.Decode(raw, "", &obj); err != nil {
		return watcher.Canonical{}, err
	}
	c, err := vigil.CanonicalJSON(raw)
	if err != nil {
		return watcher.Canonical{}, watcher.InvalidPredicate("", "is not valid JSON")
	}
	return watcher.Canonical{Predicate: c}, nil
}

// Admit returns AdmitErr.
func (f *Fake) Admit(context.Context, json.RawMessage) error { return f.AdmitErr }

// Probe counts the probe and answers as the fake was built to.
func (f *Fake) Probe(ctx context.Context, p watcher.Probe) (vigil.Observation, error) {
	if err := watcher.CheckKind(p, f.kind); err != nil {
		return vigil.Observation{}, err
	}
	f.mu.Lock()
	f.probes[p.WatchID]++
	f.total++
	n := f.probes[p.WatchID]
	f.mu.Unlock()
	return f.fn(ctx, p, n)
}

// Probes returns how many probes watch id has had.
func (f *Fake) Probes(id string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.probes[id]
}

// Total returns how many probes the fake has had, over all watches.
func (f *Fake) Total() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.total
}
