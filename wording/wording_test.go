package wording_test

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/vigil-run/vigil"
	"github.com/vigil-run/vigil/wording"
)

var t0 = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

func httpWatch(mode vigil.Mode) *vigil.Watch {
	return &vigil.Watch{ID: "w1", Kind: vigil.KindHTTP, Mode: mode, Predicate: json.RawMessage(`{"method":"GET","url":"https://api.example/health"}`),
		Deadline: t0.Add(30 * time.Minute), MaxPolls: 5, MaxErrors: 3}
}

func TestOutcomeSentences(t *testing.T) {
	t.Parallel()
	pending := &vigil.Observation{Verdict: vigil.VerdictPending, Summary: "HTTP 503"}
	unavailable := &vigil.Observation{Verdict: vigil.VerdictUnavailable, Reason: "dial tcp: connection refused"}
	ok := &vigil.Observation{Verdict: vigil.VerdictSatisfied, Summary: `HTTP 200; status = "ok"`}
	failed := &vigil.Observation{Verdict: vigil.VerdictFailed, Summary: `HTTP 200; status = "error"`}
	timer := &vigil.Watch{ID: "t1", Kind: vigil.KindTimer, Predicate: json.RawMessage(`{"at":"2026-11-30T12:30:00.000Z"}`), Note: "stretch"}
	cases := []struct {
		name string
		w    *vigil.Watch
		o    vigil.Outcome
		want string
	}{
		{"fired", httpWatch(vigil.ModeUntil), vigil.Outcome{State: vigil.StateFired, Reason: "satisfied", Observation: ok},
			`GET https://api.example/health is done: HTTP 200; status = "ok".`},
		{"timer fired", timer, vigil.Outcome{State: vigil.StateFired, Reason: "satisfied"},
			`The timer set for 2026-11-30 12:30:00 UTC went off: stretch`},
		{"unless happened", httpWatch(vigil.ModeUnless), vigil.Outcome{State: vigil.StateFired, Reason: "satisfied", Attention: true, Observation: ok},
			`Attention: GET https://api.example/health happened: HTTP 200; status = "ok".`},
		{"unless held", httpWatch(vigil.ModeUnless), vigil.Outcome{State: vigil.StateFired, Reason: "deadline", Held: true, Observation: pending},
			`GET https://api.example/health did not happen during the whole window (until 2026-11-30 12:30:00 UTC): the watch held.`},
		{"failed", httpWatch(vigil.ModeUntil), vigil.Outcome{State: vigil.StateFailed, Reason: "failed", Observation: failed},
			`GET https://api.example/health failed: HTTP 200; status = "error".`},
		{"expired with a confirmed last observation", httpWatch(vigil.ModeUntil), vigil.Outcome{State: vigil.StateExpired, Reason: "deadline", Observation: pending},
			`GET https://api.example/health did not settle before its deadline, 2026-11-30 12:30:00 UTC; last seen: HTTP 503.`},
		{"expired without a confirmed answer", httpWatch(vigil.ModeUntil), vigil.Outcome{State: vigil.StateExpired, Reason: "deadline", Observation: unavailable},
			`GET https://api.example/health ended at its deadline, 2026-11-30 12:30:00 UTC, without a confirmed answer (the last probe could not tell: dial tcp: connection refused).`},
		{"expired while down", httpWatch(vigil.ModeUntil), vigil.Outcome{State: vigil.StateExpired, Reason: "down_past_deadline"},
			`GET https://api.example/health expired: its deadline, 2026-11-30 12:30:00 UTC, passed while vigil was not running.`},
		{"errored permanent", httpWatch(vigil.ModeUntil), vigil.Outcome{State: vigil.StateErrored, Reason: "permanent", Observation: &vigil.Observation{Verdict: vigil.VerdictUnavailable, Reason: "address 169.254.169.254 is link-local", Permanent: true}},
			`GET https://api.example/health cannot be watched: address 169.254.169.254 is link-local.`},
		{"errored max_polls", httpWatch(vigil.ModeUntil), vigil.Outcome{State: vigil.StateErrored, Reason: "max_polls", Observation: pending},
			`GET https://api.example/health stopped after 5 probes without an answer (max_polls); last seen: HTTP 503.`},
		{"errored max_errors", httpWatch(vigil.ModeUntil), vigil.Outcome{State: vigil.StateErrored, Reason: "max_errors", Observation: unavailable},
			`GET https://api.example/health stopped after 3 checks in a row that could not tell (max_errors): dial tcp: connection refused.`},
		{"folder fired", &vigil.Watch{Kind: vigil.KindFolder, Predicate: json.RawMessage(`{"path":"/srv/docs"}`)}, vigil.Outcome{State: vigil.StateFired, Reason: "satisfied", Observation: &vigil.Observation{Summary: "1 added, 2 edited"}},
			`The folder /srv/docs changed: 1 added, 2 edited.`},
		{"cancelled", httpWatch(vigil.ModeUntil), vigil.Outcome{State: vigil.StateCancelled, Reason: "cancelled"},
			`Stopped watching GET https://api.example/health.`},
	}
	seen := map[string]string{}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := wording.Outcome(c.w, &c.o)
			if got != c.want {
				t.Errorf("Outcome =\n%s\nwant\n%s", got, c.want)
			}
			if again := wording.Outcome(c.w, &c.o); again != got {
				t.Errorf("the same frozen outcome worded twice differs: %q vs %q", got, again)
			}
		})
		if other, dup := seen[c.want]; dup {
			t.Errorf("%q and %q read the same", c.name, other)
		}
		seen[c.want] = c.name
	}
}

func TestWhy(t *testing.T) {
	t.Parallel()
	w := httpWatch(vigil.ModeUntil)
	w.State = vigil.StatePending
	w.NextDue = t0.Add(10 * time.Second)
	if got, want := wording.Why(w), "GET https://api.example/health has not been checked yet; next check at 2026-11-30 12:00:10 UTC; deadline 2026-11-30 12:30:00 UTC."; got != want {
		t.Errorf("Why before the first probe = %q, want %q", got, want)
	}
	w.LastObservation = &vigil.Observation{Verdict: vigil.VerdictUnavailable, Reason: "HTTP 503"}
	if got, want := wording.Why(w), "The last check of GET https://api.example/health could not tell: HTTP 503; next check at 2026-11-30 12:00:10 UTC; deadline 2026-11-30 12:30:00 UTC."; got != want {
		t.Errorf("Why after an unavailable probe = %q, want %q", got, want)
	}
	w.State = vigil.StateUnwatchable
	if got := wording.Why(w); got == "" {
		t.Error("an unwatchable watch has no why")
	}
}

func ExampleOutcome() {
	w := &vigil.Watch{Kind: vigil.KindTCP, Predicate: json.RawMessage(`{"address":"db:5432"}`)}
	fmt.Println(wording.Outcome(w, &vigil.Outcome{State: vigil.StateFired, Observation: &vigil.Observation{Summary: "connected"}}))
	// Output: TCP db:5432 is done: connected.
}
