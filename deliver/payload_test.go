package deliver_test

import (
	"encoding/json"
	"path/filepath"
	"testing"
	"time"

	"github.com/vigil-run/vigil"
	"github.com/vigil-run/vigil/deliver"
	"github.com/vigil-run/vigil/store/sqlite"
)

// TestPayloadSameAfterRestart: every attempt of a delivery carries the
// same bytes. The first attempt's body is built from the watch as the
// engine holds it when it settles, a retry after a restart from the stored
// row: they are the same, an integer fact past 2^53 included.
func TestPayloadSameAfterRestart(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "v.db")
	st, err := sqlite.Open(t.Context(), path, nil)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC().Truncate(time.Millisecond)
	w := &vigil.Watch{ID: "w1", Kind: vigil.KindHTTP, Predicate: json.RawMessage(`{"url":"https://example.com/"}`), Recipient: "agent-7",
		State: vigil.StatePending, Mode: vigil.ModeUntil, Every: 10 * time.Second, Deadline: now.Add(time.Hour), CreatedAt: now,
		Note: "merge PR 41", Labels: map[string]string{"task": "T-19"}, Deliver: json.RawMessage(hookOpts)}
	w.Identity = vigil.Identity(w.Recipient, w.Kind, w.Mode, w.Predicate)
	if _, err := st.WatchCreate(t.Context(), vigil.WatchCreateParams{Watch: w}); err != nil {
		t.Fatal(err)
	}
	// As a probe reads an HTTP body (numbers as json.Number) and as
	// watchers fill in facts of their own (Go integers, floats).
	obs := &vigil.Observation{Verdict: vigil.VerdictSatisfied, At: now.Add(123456 * time.Nanosecond), Summary: "HTTP 200",
		Facts: map[string]any{"id": json.Number("1234567890123456789"), "big": int64(1234567890123456789), "f": 0.1, "ms": 3, "s": "<&>"}}
	out := &vigil.Outcome{State: vigil.StateFired, Sentence: "https://example.com/ answered 200.", Reason: "satisfied", Observation: obs}
	m := &vigil.Message{ID: "m1", Recipient: w.Recipient, WatchID: w.ID, Type: vigil.MessageFired, Text: out.Sentence, CreatedAt: now}
	if _, err := st.WatchSettle(t.Context(), []vigil.WatchSettleParams{{ID: w.ID, State: vigil.StateFired, Outcome: out, SettledAt: now, Polls: 1, Message: m}}); err != nil {
		t.Fatal(err)
	}
	w.State, w.Outcome, w.SettledAt = vigil.StateFired, out, now
	first, err := json.Marshal(deliver.NewPayload(w, m.ID))
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	st, err = sqlite.Open(t.Context(), path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	back, err := st.WatchGet(t.Context(), w.ID)
	if err != nil {
		t.Fatal(err)
	}
	retry, err := json.Marshal(deliver.NewPayload(back, m.ID))
	if err != nil {
		t.Fatal(err)
	}
	if string(first) != string(retry) {
		t.Errorf("a retry after a restart carries other bytes than the first attempt:\nfirst %s\nretry %s", first, retry)
	}
}
