package cli

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/vigil-run/vigil"
)

// TestAddUnknownKindWithArgs: a mistyped kind followed by its arguments
// says the kind is unknown, suggests the near one and lists the kinds,
// instead of cobra's "accepts at most 1 arg(s)".
func TestAddUnknownKindWithArgs(t *testing.T) {
	t.Parallel()
	r := runCLI(t, map[string]string{"VIGIL_TOKEN": "x", "VIGIL_ADDR": "127.0.0.1:1"}, "add", "timr", "5s")
	if r.code != ExitUsage {
		t.Errorf("exit %d, want %d", r.code, ExitUsage)
	}
	for _, want := range []string{`unknown kind "timr"`, "did you mean timer", "http", "schedule", "token"} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("stderr %q; want it to say %q", r.stderr, want)
		}
	}
	if strings.Contains(r.stderr, "arg(s)") {
		t.Errorf("stderr %q speaks of args, not of the kind", r.stderr)
	}
}

// TestAddedExistingWithAnotherDeadline: a registration that matched a
// pending watch with another deadline than the one asked for says which
// deadline stands.
func TestAddedExistingWithAnotherDeadline(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	w := &vigil.Watch{ID: "W1", Kind: vigil.KindTimer, Recipient: "alice", State: vigil.StatePending, Existing: true,
		Deadline: t0.Add(time.Hour), AskedDeadline: t0.Add(2 * time.Hour)}
	var b bytes.Buffer
	printAdded(&b, w)
	if got := b.String(); !strings.Contains(got, "keeps its deadline, 2026-11-30 13:00:00 UTC, not the 2026-11-30 14:00:00 UTC asked for") {
		t.Errorf("printAdded = %q; want it to say the deadline asked for was not taken", got)
	}
	w.AskedDeadline = time.Time{}
	b.Reset()
	printAdded(&b, w)
	if strings.Contains(b.String(), "deadline") {
		t.Errorf("printAdded = %q; a dedup hit with the deadline asked for says nothing of it", b.String())
	}
}

// TestShowLiveLastCheck: show gives the time of the latest check, which
// the daemon reports live, not the time the observation was first made,
// and the error counts.
func TestShowLiveLastCheck(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	w := &vigil.Watch{ID: "W1", Kind: vigil.KindHTTP, Recipient: "alice", State: vigil.StatePending, Polls: 9, Errors: 4, ConsecutiveErrors: 2, MaxErrors: 3,
		CheckedAt: t0.Add(5 * time.Minute), LastObservation: &vigil.Observation{Verdict: vigil.VerdictUnavailable, At: t0, Reason: "connection refused"}}
	var b bytes.Buffer
	printWatch(&b, w)
	got := b.String()
	for _, want := range []string{
		"Last check:  2026-11-30 12:05:00 UTC  unavailable: connection refused (the same since 2026-11-30 12:00:00 UTC)",
		"Polls:       9",
		"Errors:      4 of 9 checks could not tell, the last 2 in a row (max_errors 3)",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("show =\n%s\nwant a line %q", got, want)
		}
	}
}
