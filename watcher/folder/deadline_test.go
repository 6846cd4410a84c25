package folder_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/vigil-run/vigil"
)

// TestOneShotChangeAtTheDeadline: a one-shot folder watch whose folder
// changed inside its window, but too close to its deadline for the settle
// window to close before it, reports that change at its final probe: the
// deadline cuts the settle window short. It expired instead ("did not
// settle before its deadline"), and an unless watch fired held, saying
// the change did not happen during the whole window.
func TestOneShotChangeAtTheDeadline(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		mode      vigil.Mode
		attention bool
	}{{vigil.ModeUntil, false}, {vigil.ModeUnless, true}} {
		t.Run(string(tt.mode), func(t *testing.T) {
			t.Parallel()
			r := newRig(t, rigOpts{})
			w, err := r.eng.Register(r.ctx, vigil.RegisterRequest{Kind: vigil.KindFolder, Recipient: "agent-1", Mode: tt.mode,
				Predicate: json.RawMessage(`{"path":` + q(r.path("docs")) + `,"settle":"20s"}`), Deadline: "1m"})
			if err != nil {
				t.Fatal(err)
			}
			r.eng.Tick(r.ctx, r.clock.Now()) // the baseline
			r.at(40 * time.Second)
			write(t, r.path("docs", "guide.md"), "# Guide\n")
			r.at(50 * time.Second) // the change is seen; it settles at 70 s
			if got := r.get(w.ID); got.State != vigil.StatePending {
				t.Fatalf("inside the settle window: %s, want pending", got.State)
			}
			r.at(time.Minute) // the deadline
			got := r.get(w.ID)
			if got.State != vigil.StateFired || got.Outcome == nil || got.Outcome.Held || got.Outcome.Attention != tt.attention {
				t.Fatalf("a change 10 s before the deadline, settle 20 s: %s %+v, want fired (attention %v), not held",
					got.State, got.Outcome, tt.attention)
			}
			if rep := observationReport(t, got.Outcome.Observation); rep.Summary != "1 added" {
				t.Errorf("outcome report = %q\n%s", rep.Summary, rep.Text)
			}
		})
	}
}
