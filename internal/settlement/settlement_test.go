package settlement_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/vigil-run/vigil"
	"github.com/vigil-run/vigil/internal/settlement"
)

// TestPrepare: a message's defaults are filled in, outcomes and
// observations are encoded (one shared outcome once), and a settlement a
// store must not write is refused as the caller's error.
func TestPrepare(t *testing.T) {
	at := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	obs := &vigil.Observation{Verdict: vigil.VerdictSatisfied, At: at, Summary: "<done>"}
	shared := &vigil.Outcome{State: vigil.StateFired, Sentence: "s", Reason: "satisfied", Observation: obs}
	ps := []vigil.WatchSettleParams{
		{ID: "w1", State: vigil.StateFired, SettledAt: at, Outcome: shared, Message: &vigil.Message{ID: "m1"}},
		{ID: "w2", State: vigil.StateFired, SettledAt: at, Outcome: shared},
		{ID: "w3", State: vigil.StateCancelled, SettledAt: at,
			Message: &vigil.Message{ID: "m3", WatchID: "other", Type: vigil.MessageType("note"), CreatedAt: at.Add(time.Second)}},
	}
	got, err := settlement.Prepare("test", ps)
	if err != nil {
		t.Fatal(err)
	}
	wantOutcome := `{"state":"fired","sentence":"s","reason":"satisfied","observation":{"verdict":"satisfied","at":"2026-12-01T12:00:00.000Z","summary":"\u003cdone\u003e"}}`
	if got[0].Outcome == nil || *got[0].Outcome != wantOutcome {
		t.Errorf("outcome = %v; want %s", got[0].Outcome, wantOutcome)
	}
	if got[0].LastObs == nil || *got[0].LastObs != `{"verdict":"satisfied","at":"2026-12-01T12:00:00.000Z","summary":"\u003cdone\u003e"}` {
		t.Errorf("last observation = %v", got[0].LastObs)
	}
	if got[1].Outcome != got[0].Outcome || got[1].LastObs != got[0].LastObs || got[1].Message != nil {
		t.Errorf("second entry = %+v; want the first's encoding shared, no message", got[1])
	}
	if m := got[0].Message; m == nil || m.WatchID != "w1" || m.Type != vigil.MessageTypeFor(vigil.StateFired) || !m.CreatedAt.Equal(at) || m == ps[0].Message {
		t.Errorf("message = %+v; want a copy with the watch's id, the outcome's type and the settling time", m)
	}
	if m := got[2].Message; m == nil || m.WatchID != "other" || m.Type != "note" || !m.CreatedAt.Equal(at.Add(time.Second)) {
		t.Errorf("message given its own fields = %+v; want them kept", m)
	}
	if got[2].Outcome != nil || got[2].LastObs != nil {
		t.Errorf("no outcome encoded as %v, %v; want NULL", got[2].Outcome, got[2].LastObs)
	}
	for name, bad := range map[string]vigil.WatchSettleParams{
		"pending":            {ID: "w", State: vigil.StatePending, SettledAt: at},
		"no settling time":   {ID: "w", State: vigil.StateFired},
		"message without id": {ID: "w", State: vigil.StateFired, SettledAt: at, Message: &vigil.Message{}},
	} {
		if _, err := settlement.Prepare("test", []vigil.WatchSettleParams{ps[1], bad}); vigil.ErrorCode(err) != vigil.CodeInvalidRequest {
			t.Errorf("%s: %v; want invalid_request", name, err)
		}
	}
}

// TestCancel: a cancel's message gets the watch's id, the cancelled type
// and the settling time unless it has its own; its outcome is encoded;
// without a settling time it is refused as the caller's error.
func TestCancel(t *testing.T) {
	at := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	msg := &vigil.Message{ID: "m1"}
	got, err := settlement.Cancel("test", vigil.WatchCancelParams{ID: "w1", SettledAt: at, Message: msg,
		Outcome: &vigil.Outcome{State: vigil.StateCancelled, Sentence: "s", Reason: "cancelled"}})
	if err != nil {
		t.Fatal(err)
	}
	if got.Outcome == nil || *got.Outcome != `{"state":"cancelled","sentence":"s","reason":"cancelled"}` || got.LastObs != nil {
		t.Errorf("outcome = %v, last observation = %v", got.Outcome, got.LastObs)
	}
	if m := got.Message; m == nil || m == msg || m.WatchID != "w1" || m.Type != vigil.MessageCancelled || !m.CreatedAt.Equal(at) {
		t.Errorf("message = %+v; want a copy with the watch's id, cancelled and the settling time", m)
	}
	own := &vigil.Message{ID: "m2", WatchID: "other", Type: vigil.MessageNote, CreatedAt: at.Add(time.Second)}
	if got, err := settlement.Cancel("test", vigil.WatchCancelParams{ID: "w1", SettledAt: at, Message: own}); err != nil ||
		got.Outcome != nil || got.Message.WatchID != "other" || got.Message.Type != vigil.MessageNote || !got.Message.CreatedAt.Equal(own.CreatedAt) {
		t.Errorf("Cancel with the message's own fields = %+v, %v; want them kept, no outcome", got, err)
	}
	if _, err := settlement.Cancel("test", vigil.WatchCancelParams{ID: "w1"}); vigil.ErrorCode(err) != vigil.CodeInvalidRequest {
		t.Errorf("Cancel without a settling time: %v; want invalid_request", err)
	}
}

// TestJSON: outcomes and observations are written as encoding/json writes
// them, nil ones as null, and anything else through encoding/json.
func TestJSON(t *testing.T) {
	at := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	obs := &vigil.Observation{Verdict: vigil.VerdictSatisfied, At: at, Summary: "<done>", Facts: map[string]any{"n": 1.5, "s": "x"}}
	out := &vigil.Outcome{State: vigil.StateFired, Sentence: "s", Reason: "satisfied", Observation: obs}
	for _, v := range []any{out, obs, (*vigil.Outcome)(nil), (*vigil.Observation)(nil), map[string]string{"b": "2", "a": "1"}, []string(nil)} {
		got, err := settlement.JSON(v)
		if err != nil {
			t.Fatalf("%T: %v", v, err)
		}
		want, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != string(want) {
			t.Errorf("%T: %s; want %s", v, got, want)
		}
	}
}
