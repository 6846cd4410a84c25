package engine_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/vigil-run/vigil"
	"github.com/vigil-run/vigil/watcher"
	"github.com/vigil-run/vigil/watcher/watchertest"
)

// longProbe is a fake whose probe starting at slot takes took on the
// test's clock (clock, set once the env is built), as a command that runs
// that long does. It answers pending, records the Final flag of each
// probe, and the watches it is asked to stop.
type longProbe struct {
	*watchertest.Fake
	clock   *clock
	mu      sync.Mutex
	finals  []bool
	stopped []string
}

func newLongProbe(kind vigil.Kind, slot time.Time, took time.Duration) *longProbe {
	l := &longProbe{}
	l.Fake = watchertest.Func(kind, func(_ context.Context, p watcher.Probe) (vigil.Observation, error) {
		l.mu.Lock()
		l.finals = append(l.finals, p.Final)
		l.mu.Unlock()
		if p.Now.Equal(slot) {
			l.clock.Add(took)
		}
		return vigil.Observation{Verdict: vigil.VerdictPending, Summary: "not yet"}, nil
	})
	return l
}

func (l *longProbe) Stop(_ context.Context, id string) error {
	l.mu.Lock()
	l.stopped = append(l.stopped, id)
	l.mu.Unlock()
	return nil
}

func (l *longProbe) seen() (finals []bool, stopped []string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.finals), slices.Clone(l.stopped)
}

// finalLongProbe is a longProbe whose final probe does what its others do
// not (a run's, a folder's): a watcher.FinalProber.
type finalLongProbe struct{ *longProbe }

func (finalLongProbe) FinalProbe() {}

// TestProbeRunningAtDeadlineIsFinal: a command probe that starts before
// the deadline and ends after it is the watch's final probe. Its pending
// answer expires the watch (an unless watch holds) as it ends, with no
// other probe: the command is not run again, and the expiry is not late
// by a probe's timeout. What the final probe lets go of is let go of
// (Stop). A watcher whose final probe does what its others do not
// (watcher.FinalProber: a run, a folder) still gets that probe after such
// a probe.
func TestProbeRunningAtDeadlineIsFinal(t *testing.T) {
	t.Parallel()
	slot := t0.Add(30 * time.Second) // the second probe, 30 s before the deadline
	const took = 45 * time.Second    // it ends 15 s past the deadline
	for _, c := range []struct {
		mode  vigil.Mode
		state vigil.State
		held  bool
	}{{vigil.ModeUntil, vigil.StateExpired, false}, {vigil.ModeUnless, vigil.StateFired, true}} {
		t.Run(string(c.mode), func(t *testing.T) {
			cmd := newLongProbe(vigil.KindCommand, slot, took)
			v := newEnv(t, envOpts{watchers: []watcher.Watcher{cmd}})
			cmd.clock = v.clock
			w := v.register(vigil.RegisterRequest{Kind: vigil.KindCommand, Predicate: obj(`{"argv":["make","check"]}`),
				Every: "30s", Deadline: "1m", Mode: c.mode})
			v.tick(t0)
			v.tick(slot) // the long probe: the clock is at t0+75s when it ends
			got := v.get(w.ID)
			if got.State != c.state || got.Outcome == nil || got.Outcome.Held != c.held || got.Outcome.Reason != "deadline" {
				t.Fatalf("after a probe that ran past the deadline: %s %+v; want %s (held %v) by the deadline, at once", got.State, got.Outcome, c.state, c.held)
			}
			if end := slot.Add(took); !got.SettledAt.Equal(end) {
				t.Fatalf("settled at %v, want when the probe ended (%v), past the deadline %v", got.SettledAt, end, w.Deadline)
			}
			v.tick(v.clock.Now().Add(time.Hour))
			finals, stopped := cmd.seen()
			if !slices.Equal(finals, []bool{false, false}) {
				t.Fatalf("probes (their Final flags) = %v, want the two made before the deadline and no other: the command ran again", finals)
			}
			if !slices.Equal(stopped, []string{w.ID}) {
				t.Fatalf("stopped %v, want %s, as its final probe would have let go", stopped, w.ID)
			}
			if msgs := v.messages("agent-1"); len(msgs) != 1 {
				t.Fatalf("mailbox = %+v, want one outcome", msgs)
			}
		})
	}
	t.Run("FinalProber", func(t *testing.T) {
		run := finalLongProbe{newLongProbe(vigil.KindCommand, slot, took)}
		v := newEnv(t, envOpts{watchers: []watcher.Watcher{run}})
		run.clock = v.clock
		w := v.register(vigil.RegisterRequest{Kind: vigil.KindCommand, Predicate: obj(`{"argv":["make","check"]}`), Every: "30s", Deadline: "1m"})
		v.tick(t0)
		v.tick(slot)
		if got := v.get(w.ID).State; got != vigil.StatePending {
			t.Fatalf("a FinalProber's watch is %s after a probe that ran past its deadline; want pending for its final probe", got)
		}
		v.tick(v.clock.Now())
		if got := v.get(w.ID).State; got != vigil.StateExpired {
			t.Fatalf("after its final probe: %s, want expired", got)
		}
		if finals, _ := run.seen(); !slices.Equal(finals, []bool{false, false, true}) {
			t.Fatalf("probes (their Final flags) = %v, want a final one after the long one", finals)
		}
	})
}
