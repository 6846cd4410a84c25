package watchertest_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/vigil-run/vigil"
	"github.com/vigil-run/vigil/watcher"
	"github.com/vigil-run/vigil/watcher/watchertest"
)

func TestSettlesAfterCountsPerWatch(t *testing.T) {
	t.Parallel()
	f := watchertest.SettlesAfter(vigil.KindCI, 3)
	ctx := context.Background()
	verdicts := func(id string, n int) []vigil.Verdict {
		var vs []vigil.Verdict
		for range n {
			obs, err := f.Probe(ctx, watcher.Probe{WatchID: id, Kind: vigil.KindCI})
			if err != nil {
				t.Fatal(err)
			}
			vs = append(vs, obs.Verdict)
		}
		return vs
	}
	got := fmt.Sprint(verdicts("a", 4), verdicts("b", 1))
	want := "[pending pending satisfied satisfied] [pending]"
	if got != want {
		t.Errorf("SettlesAfter(3) verdicts = %s, want %s", got, want)
	}
	if f.Probes("a") != 4 || f.Probes("b") != 1 || f.Probes("c") != 0 || f.Total() != 5 {
		t.Errorf("Probes = a %d, b %d, c %d, Total %d; want 4, 1, 0, 5", f.Probes("a"), f.Probes("b"), f.Probes("c"), f.Total())
	}
}

func TestConcurrentCounting(t *testing.T) {
	t.Parallel()
	f := watchertest.NeverSettles(vigil.KindHTTP)
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			for range 100 {
				_, _ = f.Probe(context.Background(), watcher.Probe{WatchID: fmt.Sprint(i % 2), Kind: vigil.KindHTTP})
			}
		})
	}
	wg.Wait()
	if f.Total() != 800 || f.Probes("0") != 400 || f.Probes("1") != 400 {
		t.Errorf("Total = %d, Probes(0) = %d, Probes(1) = %d; want 800, 400, 400", f.Total(), f.Probes("0"), f.Probes("1"))
	}
}

func TestBehaviours(t *testing.T) {
	t.Parallel()
	const kind = vigil.KindTCP
	tests := []struct {
		name      string
		f         *watchertest.Fake
		verdict   vigil.Verdict
		permanent bool
		panics    bool
	}{
		{"never settles", watchertest.NeverSettles(kind), vigil.VerdictPending, false, false},
		{"fails", watchertest.Fails(kind), vigil.VerdictFailed, false, false},
		{"unavailable", watchertest.Unavailable(kind, false), vigil.VerdictUnavailable, false, false},
		{"unavailable for good", watchertest.Unavailable(kind, true), vigil.VerdictUnavailable, true, false},
		{"panics", watchertest.Panics(kind), vigil.VerdictUnavailable, false, true},
		{"func", watchertest.Func(kind, func(context.Context, watcher.Probe) (vigil.Observation, error) {
			return vigil.Observation{Verdict: vigil.VerdictSatisfied}, nil
		}), vigil.VerdictSatisfied, false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p := watcher.Probe{WatchID: "w", Kind: kind}
			obs, err := watcher.Run(context.Background(), tt.f, p)
			if err != nil {
				t.Fatal(err)
			}
			if obs.Verdict != tt.verdict || obs.Permanent != tt.permanent {
				t.Errorf("Run = %+v, want %s permanent %v", obs, tt.verdict, tt.permanent)
			}
			if tt.f.Probes("w") != 1 {
				t.Errorf("Probes(w) = %d, want 1", tt.f.Probes("w"))
			}
			if _, err := tt.f.Probe(context.Background(), watcher.Probe{WatchID: "w", Kind: vigil.KindHTTP}); !errors.Is(err, watcher.ErrWrongKind) {
				t.Errorf("Probe(wrong kind) = %v, want ErrWrongKind", err)
			}
		})
	}
}

func TestCanonicalizeAndAdmit(t *testing.T) {
	t.Parallel()
	f := watchertest.NeverSettles(vigil.KindFolder)
	c, err := f.Canonicalize(context.Background(), json.RawMessage(` {"b": 1, "a": [2, {"d": 1, "c": 0}]} `), time.Time{})
	if err != nil || string(c.Predicate) != `{"a":[2,{"c":0,"d":1}],"b":1}` {
		t.Errorf("Canonicalize = %s, %v, want sorted keys", c.Predicate, err)
	}
	if _, err := f.Canonicalize(context.Background(), json.RawMessage(`[1]`), time.Time{}); vigil.ErrorCode(err) != vigil.CodeInvalidPredicate {
		t.Errorf("Canonicalize([1]) = %v, want invalid_predicate", err)
	}
	if err := f.Admit(context.Background(), nil); err != nil {
		t.Errorf("Admit = %v, want nil", err)
	}
	f.AdmitErr = watcher.Unobservable("set the x setting")
	if err := f.Admit(context.Background(), nil); vigil.ErrorCode(err) != vigil.CodeWatchUnobservable {
		t.Errorf("Admit = %v, want watch_unobservable", err)
	}
}
