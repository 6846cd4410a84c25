package vigil

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"testing"
	"time"
)

// reflectWatchJSON is how a watch was encoded before Watch.MarshalJSON
// wrote its bytes by hand: encoding/json over watchJSON.
func reflectWatchJSON(w Watch) ([]byte, error) {
	j := watchJSON{
		ID: w.ID, Kind: w.Kind, Predicate: w.Predicate, Recipient: w.Recipient, State: w.State, Mode: w.Mode,
		Every: formatDuration(w.Every), Deadline: FormatTime(w.Deadline), StartAt: FormatTime(w.StartAt),
		CreatedAt: FormatTime(w.CreatedAt), SettledAt: FormatTime(w.SettledAt), Polls: w.Polls,
		Errors: w.Errors, ConsecutiveErrors: w.ConsecutiveErrors, CheckedAt: FormatTime(w.CheckedAt),
		LastObservation: w.LastObservation, Outcome: w.Outcome, Receipts: w.Receipts, Note: w.Note, Labels: w.Labels,
		Stable: w.Stable, StableFor: formatDuration(w.StableFor), MaxPolls: w.MaxPolls, MaxErrors: w.MaxErrors,
		Standing: w.Standing, Deliver: w.Deliver, AnsweredAtCreation: w.AnsweredAtCreation, Existing: w.Existing,
		AskedDeadline:   FormatTime(w.AskedDeadline),
		CompletionToken: w.CompletionToken, CompletionURL: w.CompletionURL, Unreadable: w.Unreadable,
	}
	if w.State == StatePending {
		j.NextDue = FormatTime(w.NextDue)
	}
	return json.Marshal(j)
}

// randomWatch fills each field of a watch or leaves it zero, with strings
// that need escaping now and then.
func randomWatch(r *rand.Rand) Watch {
	strs := []string{"", "plain", "r-1", `quo"te`, `back\slash`, "<b>", "a<b", "a>b", "x&y", "tab\there", "new\nline",
		"\x01ctl", "héllo wörld", "\u2028sep\u2029", "bad\xffutf8", "\x7fdel", "emoji 🙂"}
	str := func() string { return strs[r.IntN(len(strs))] }
	some := func() bool { return r.IntN(2) == 0 }
	at := func() time.Time {
		if some() {
			return time.Time{}
		}
		return time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC).Add(time.Duration(r.Int64N(int64(48 * time.Hour))))
	}
	raws := []json.RawMessage{nil, json.RawMessage(`{"at":"2026-12-01T12:00:00.000Z"}`),
		json.RawMessage(`{ "url" : "http://x/?a=1&b=<2>" , "n": [1, 2.5, -3e2] }`), json.RawMessage(`{"s":"\u2028"}`)}
	states := []State{StatePending, StateFired, StateFailed, StateExpired, StateCancelled}
	w := Watch{
		ID: str(), Kind: Kind(str()), Predicate: raws[r.IntN(len(raws))], Recipient: str(),
		State: states[r.IntN(len(states))], Mode: Mode(str()), Deadline: at(), StartAt: at(), CreatedAt: at(),
		NextDue: at(), SettledAt: at(), CheckedAt: at(), AskedDeadline: at(), Note: str(),
		CompletionToken: str(), CompletionURL: str(), Unreadable: str(),
		Standing: some(), AnsweredAtCreation: some(), Existing: some(),
	}
	if some() {
		w.Every = time.Duration(r.IntN(4)) * 90 * time.Second
		w.StableFor = time.Duration(r.IntN(3)) * time.Minute
		w.Polls, w.Errors, w.ConsecutiveErrors = r.IntN(3), r.IntN(3), r.IntN(3)
		w.Stable, w.MaxPolls, w.MaxErrors = r.IntN(3), r.IntN(3), r.IntN(3)
	}
	if some() {
		w.Deliver = raws[r.IntN(len(raws))]
	}
	if some() {
		w.Labels = map[string]string{}
		for range r.IntN(4) {
			w.Labels[str()] = str()
		}
	}
	if some() {
		w.LastObservation = &Observation{Verdict: Verdict(str()), At: at(), Summary: str(), Facts: map[string]any{"k": str(), "n": 1.5}}
	}
	if some() {
		w.Outcome = &Outcome{State: StateFired, Sentence: str(), Attention: some(), Reason: str(), Observation: w.LastObservation}
	}
	if some() {
		w.Receipts = []Receipt{{Channel: str(), Status: str(), Attempts: 2, UpdatedAt: at()}}
	}
	return w
}

// Watch.MarshalJSON writes, byte for byte, what encoding/json writes for
// the watch's wire shape, on its own and inside another value.
func TestWatchJSONMatchesReflection(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for i := range 5000 {
		w := randomWatch(r)
		want, werr := reflectWatchJSON(w)
		got, gerr := w.MarshalJSON()
		if (werr != nil) != (gerr != nil) || !bytes.Equal(got, want) {
			t.Fatalf("watch %d (%+v):\n got %s (%v)\nwant %s (%v)", i, w, got, gerr, want, werr)
		}
		outer, err := json.Marshal(map[string][]Watch{"watches": {w}})
		if err != nil {
			t.Fatal(err)
		}
		if wantOuter := []byte(`{"watches":[` + string(want) + `]}`); !bytes.Equal(outer, wantOuter) {
			t.Fatalf("watch %d inside a value:\n got %s\nwant %s", i, outer, wantOuter)
		}
	}
}

// A predicate that is not JSON is an error, as with encoding/json.
func TestWatchJSONRefusesBadRaw(t *testing.T) {
	for _, raw := range []json.RawMessage{{}, json.RawMessage(`{"a":`), json.RawMessage(`nope`)} {
		w := Watch{ID: "w", Predicate: raw}
		if _, err := w.MarshalJSON(); err == nil {
			t.Errorf("MarshalJSON with predicate %q succeeded", raw)
		}
		if _, err := reflectWatchJSON(w); err == nil {
			t.Errorf("reflection with predicate %q succeeded: the test's premise is wrong", raw)
		}
	}
}
