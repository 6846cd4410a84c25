package vigil_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/vigil-run/vigil"
)

func TestDurations(t *testing.T) {
	t.Parallel()
	good := map[string]time.Duration{"30s": 30 * time.Second, "7d": 7 * 24 * time.Hour, "1d12h": 36 * time.Hour, "1h30m": 90 * time.Minute, "500ms": 500 * time.Millisecond}
	for in, want := range good {
		got, err := vigil.ParseDuration(in)
		if err != nil || got != want {
			t.Errorf("ParseDuration(%q) = %v, %v; want %v", in, got, err, want)
		}
		if back, _ := vigil.ParseDuration(vigil.FormatDuration(got)); back != got {
			t.Errorf("FormatDuration(%v) = %q does not parse back", got, vigil.FormatDuration(got))
		}
	}
	for _, in := range []string{"", "soon", "-5s", "d", "1.5d", "99999999d", "1x"} {
		if _, err := vigil.ParseDuration(in); err == nil {
			t.Errorf("ParseDuration(%q) accepted", in)
		}
	}
	for d, want := range map[time.Duration]string{time.Hour: "1h", 90 * time.Second: "1m30s", 48 * time.Hour: "2d", 30 * time.Second: "30s"} {
		if got := vigil.FormatDuration(d); got != want {
			t.Errorf("FormatDuration(%v) = %q, want %q", d, got, want)
		}
	}
}

func TestIdentity(t *testing.T) {
	t.Parallel()
	a, _ := vigil.CanonicalJSON(json.RawMessage(`{"b": 1, "a": [2, 1]}`))
	b, _ := vigil.CanonicalJSON(json.RawMessage(`{"a":[2,1],"b":1}`))
	if string(a) != string(b) {
		t.Fatalf("CanonicalJSON: %s != %s", a, b)
	}
	id := vigil.Identity("r", vigil.KindHTTP, vigil.ModeUntil, a)
	for _, other := range []string{
		vigil.Identity("r2", vigil.KindHTTP, vigil.ModeUntil, a),
		vigil.Identity("r", vigil.KindTCP, vigil.ModeUntil, a),
		vigil.Identity("r", vigil.KindHTTP, vigil.ModeUnless, a),
	} {
		if other == id {
			t.Fatal("different recipients, kinds or modes share an identity")
		}
	}
	if vigil.Identity("r", vigil.KindHTTP, "", a) != id {
		t.Fatal("the empty mode is until")
	}
}

func TestWatchJSONRoundTrip(t *testing.T) {
	t.Parallel()
	w := vigil.Watch{
		ID: "01J", Kind: vigil.KindHTTP, Predicate: json.RawMessage(`{"url":"https://x/"}`), Recipient: "agent-7",
		State: vigil.StatePending, Mode: vigil.ModeUntil, Every: 30 * time.Second, Deadline: t0.Add(time.Hour),
		CreatedAt: t0, NextDue: t0.Add(30 * time.Second), Polls: 3, Note: "n", Labels: map[string]string{"task": "T-19"},
		LastObservation: &vigil.Observation{Verdict: vigil.VerdictPending, At: t0.Add(123 * time.Millisecond), Summary: "HTTP 503", Facts: map[string]any{"status": json.Number("503"), "big": json.Number("1234567890123456789")}},
	}
	b, err := json.Marshal(w)
	if err != nil {
		t.Fatal(err)
	}
	var raw map[string]any
	_ = json.Unmarshal(b, &raw)
	if raw["created_at"] != "2026-11-30T12:00:00.000Z" || raw["every"] != "30s" || raw["next_due"] != "2026-11-30T12:00:30.000Z" {
		t.Fatalf("wire form %s: times must be RFC 3339 with milliseconds UTC, durations compact", b)
	}
	var back vigil.Watch
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(w, back); diff != "" {
		t.Fatalf("round trip (-want +got):\n%s", diff)
	}
}

func TestErrorIs(t *testing.T) {
	t.Parallel()
	err := fmt.Errorf("wrapped: %w", vigil.FieldErrorf(vigil.CodeNotFound, "id", "no watch %q", "x"))
	if !errors.Is(err, vigil.ErrNotFound) || errors.Is(err, vigil.ErrConflict) {
		t.Fatal("errors.Is must match on code")
	}
	if vigil.ErrorCode(err) != vigil.CodeNotFound || vigil.ErrorField(err) != "id" {
		t.Fatalf("code %s field %s", vigil.ErrorCode(err), vigil.ErrorField(err))
	}
	if vigil.ErrorCode(errors.New("boom")) != vigil.CodeInternal || vigil.ErrorMessage(errors.New("secret db path")) != "internal error" {
		t.Fatal("a plain error must read as internal error")
	}
}

func ExampleParseDuration() {
	d, _ := vigil.ParseDuration("1d12h")
	fmt.Println(d, vigil.FormatDuration(d))
	// Output: 36h0m0s 1d12h
}
