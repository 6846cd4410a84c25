// Package timer is the watcher for kind timer: a watch that fires when an
// instant passes. It does no I/O; the clock alone answers it.
//
// A predicate gives exactly one of
//
//	{"at": "2026-03-01T09:00:00+01:00"}   an RFC 3339 instant
//	{"in": "90m"}                          a duration from registration (> 0)
//
// and its canonical form is always the instant, in UTC with milliseconds
// (a finer instant rounded up, so that it never fires early):
//
//	{"at": "2026-03-01T08:00:00.000Z"}
//
// so "in" is resolved once, at registration. The instant is the watch's
// StartAt. It may lie at most MaxAhead from now either way (an instant in
// the past fires at the first probe).
package timer

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/vigil-run/vigil"
	"github.com/vigil-run/vigil/watcher"
)

// MaxAhead bounds how far from now an instant may lie. The engine's own
// deadline limit is usually tighter.
const MaxAhead = 366 * 24 * time.Hour

// Config configures the timer watcher. It has no settings.
type Config struct{}

// Watcher answers timer watches.
type Watcher struct{}

var _ watcher.Watcher = (*Watcher)(nil)

// New returns a timer watcher.
func New(Config) *Watcher { return &Watcher{} }

type input struct {
	At string `json:"at,omitempty"`
	In string `json:"in,omitempty"`
}

type canonical struct {
	At string `json:"at"`
}

// Kind returns vigil.KindTimer.
func (*Watcher) Kind() vigil.Kind { return vigil.KindTimer }

// Canonicalize resolves the predicate to its instant.
func (*Watcher) Canonicalize(_ context.Context, raw json.RawMessage, now time.Time) (watcher.Canonical, error) {
	in, ok := simple(raw)
	if !ok {
		if err := watcher.Decode(raw, "", &in); err != nil {
			return watcher.Canonical{}, err
		}
	}
	var at time.Time
	switch {
	case in.At != "" && in.In != "":
		return watcher.Canonical{}, watcher.InvalidPredicate("", "has both at and in: give exactly one")
	case in.At != "":
		t, err := vigil.ParseTime(in.At)
		if err != nil {
			return watcher.Canonical{}, watcher.InvalidPredicate("at", "must be an RFC 3339 time like 2026-03-01T09:00:00Z")
		}
		if d := t.Sub(now); d > MaxAhead || d < -MaxAhead {
			return watcher.Canonical{}, watcher.InvalidPredicate("at", "must be within %s of now", vigil.FormatDuration(MaxAhead))
		}
		at = t
	case in.In != "":
		d, err := watcher.DurationField("in", in.In, 0, MaxAhead)
		if err != nil {
			return watcher.Canonical{}, err
		}
		at = now.Add(d)
	default:
		return watcher.Canonical{}, watcher.InvalidPredicate("", "needs at (an RFC 3339 time) or in (a duration)")
	}
	// Kept to the millisecond, rounded up: a timer never fires before the
	// instant it was given (cut down, 09:00:00.0005 fired at 09:00:00.000).
	at = vigil.CeilMillisecond(at.UTC())
	// What watcher.Encode(canonical{…}) writes, without its two passes:
	// FormatTime spells digits, letters and punctuation that need no
	// escape (TestCanonicalIsEncoded).
	b := json.RawMessage(`{"at":"` + vigil.FormatTime(at) + `"}`)
	return watcher.Canonical{Predicate: b, StartAt: at}, nil
}

// Admit admits every timer: it needs no configuration.
func (*Watcher) Admit(context.Context, json.RawMessage) error { return nil }

// Probe answers satisfied once p.Now has reached the instant, else pending.
func (*Watcher) Probe(_ context.Context, p watcher.Probe) (vigil.Observation, error) {
	if err := watcher.CheckKind(p, vigil.KindTimer); err != nil {
		return vigil.Observation{}, err
	}
	// A stored predicate is canonical, {"at":"…"}, which simple reads
	// without the decoder (a storm probes each of its timers once).
	c, ok := simple(p.Predicate)
	if !ok || c.In != "" {
		c = input{}
		var stored canonical
		if err := json.Unmarshal(p.Predicate, &stored); err != nil {
			return vigil.Observation{}, watcher.Permanent(fmt.Errorf("stored timer predicate is unreadable: %w", err))
		}
		c.At = stored.At
	}
	at, err := vigil.ParseTime(c.At)
	if err != nil || at.IsZero() {
		return vigil.Observation{}, watcher.Permanent(fmt.Errorf("stored timer predicate has no valid instant %q", c.At))
	}
	when := vigil.FormatTime(at)
	facts := map[string]any{"at": when}
	if p.Now.Before(at) {
		return vigil.Observation{Verdict: vigil.VerdictPending, Summary: "waiting until " + when, Facts: facts}, nil
	}
	return vigil.Observation{Verdict: vigil.VerdictSatisfied, Summary: "reached " + when, Facts: facts}, nil
}

// simple reads a predicate spelled exactly {"at":"…"} or {"in":"…"}, whose
// string is printable ASCII that JSON does not escape, as watcher.Decode
// would read it, without the decoder: the form clients send, and the one
// a batch of timers spent most of its Canonicalize decoding (issue #18).
// ok is false for anything else, which Decode reads.
func simple(raw []byte) (in input, ok bool) {
	const head = len(`{"at":"`)
	if len(raw) < head+3 || len(raw) > watcher.MaxPredicateBytes ||
		raw[0] != '{' || raw[1] != '"' || raw[4] != '"' || raw[5] != ':' || raw[6] != '"' ||
		raw[len(raw)-2] != '"' || raw[len(raw)-1] != '}' {
		return input{}, false
	}
	v := raw[head : len(raw)-2]
	for _, c := range v {
		if c < 0x20 || c > 0x7e || c == '"' || c == '\\' {
			return input{}, false
		}
	}
	switch string(raw[2:4]) {
	case "at":
		return input{At: string(v)}, true
	case "in":
		return input{In: string(v)}, true
	}
	return input{}, false
}
