package vigil

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"reflect"
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
		AskedDeadline: FormatTime(w.AskedDeadline), AskedDeliver: w.AskedDeliver,
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
	return randomWatchOf(r, []string{"", "plain", "r-1", `quo"te`, `back\slash`, "<b>", "a<b", "a>b", "x&y", "tab\there", "new\nline",
		"\x01ctl", "héllo wörld", "\u2028sep\u2029", "bad\xffutf8", "\x7fdel", "emoji 🙂"})
}

// randomWatchOf is randomWatch with its strings taken from strs.
func randomWatchOf(r *rand.Rand, strs []string) Watch {
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
		w.AskedDeliver = raws[r.IntN(len(raws))]
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

// quickWatch reads what Watch.MarshalJSON writes, and gives what
// encoding/json gives for it; what it does not read (or reads wrong) is
// left to encoding/json, with the same answer and the same error.
func TestQuickWatchMatches(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	quick, slow := 0, 0
	plainStrs := []string{"", "plain", "r-1", "héllo wörld", "emoji 🙂", "a b", "01JBENCH000000000000000001"}
	for i := range 5000 {
		w := randomWatch(r)
		if i%2 == 0 {
			w = randomWatchOf(r, plainStrs)
		}
		b, err := w.MarshalJSON()
		if err != nil {
			t.Fatal(err)
		}
		var want, got Watch
		werr := want.unmarshalReflect(b)
		if quickWatch(b, &got) {
			quick++
		} else {
			got = Watch{}
			if i%2 == 0 {
				slow++
				if slow == 1 {
					t.Logf("left to encoding/json: %s", b)
				}
			}
		}
		gerr := got.UnmarshalJSON(b)
		if (werr != nil) != (gerr != nil) || !reflect.DeepEqual(got, want) {
			t.Fatalf("watch %d: %s\n got %+v (%v)\nwant %+v (%v)", i, b, got, gerr, want, werr)
		}
	}
	// A watch whose strings need no escape goes the quick way.
	if slow > 0 {
		t.Errorf("quickWatch left %d of the 2 500 watches with plain strings to encoding/json (it read %d of 5 000)", slow, quick)
	}
	for _, in := range []string{
		`{"id":"w1","kind":"timer","predicate":{"at":"2026-12-01T12:00:00.000Z"},"recipient":"r","state":"pending","mode":"until","created_at":"2026-12-01T11:00:00.000Z","polls":0}`,
		" { \"id\" : \"w1\" ,\n\t\"polls\" : -0 , \"labels\" : { } , \"receipts\" : [ ] } \n",
		`{}`, ` {} `, `{"labels":{"a":"1","a":"2"}}`, `{"predicate":[1,{"a":"}"},"\"]"]}`,
		`{"id":"a","id":"b"}`, `{"ID":"a"}`, `{"unknown":1}`, `{"id":null}`, `{"polls":1.0}`, `{"polls":1e2}`,
		`{"polls":01}`, `{"polls":99999999999999999999}`, `{"polls":"1"}`, `{"standing":tru}`, `{"standing":truex}`,
		`{"predicate":{"a":}}`, `{"predicate":"s"}`, `{"predicate":null}`, `{"every":"soon"}`, `{"every":""}`,
		`{"created_at":"yesterday"}`, `{"note":"caf\u00e9"}`, "{\"note\":\"bad\xff\"}", "{\"note\":\"tab\there\"}",
		`{"id":"w"}x`, `{"id":"w"`, `{"id":"w",}`, `{"id" "w"}`, `[]`, `null`, ``, `{"last_observation":{"verdict":"pending","at":"2026-12-01T12:00:00.000Z"}}`,
		`{"last_observation":{"at":"never"}}`, `{"outcome":{"state":"fired","sentence":"s","extra":1}}`, `{"receipts":[{"channel":"webhook","attempts":"x"}]}`,
		`{"labels":{"a":1}}`, `{"labels":{"a":"1",}}`, `{"deliver":{"webhook":{"url":"http://x/"}},"existing":true,"answered_at_creation":false}`,
		`{"existing":true,"asked_deliver":{"resume":{"harness":"claude","session":"s2"}}}`, `{"asked_deliver":null}`,
	} {
		var want, got Watch
		werr := want.unmarshalReflect([]byte(in))
		gerr := got.UnmarshalJSON([]byte(in))
		if (werr != nil) != (gerr != nil) || (werr != nil && werr.Error() != gerr.Error()) || !reflect.DeepEqual(got, want) {
			t.Errorf("UnmarshalJSON(%s) = %+v (%v), encoding/json gives %+v (%v)", in, got, gerr, want, werr)
		}
	}
}

// BenchmarkWatchUnmarshal decodes a registration's answer as the Go client
// does, by quickWatch and by encoding/json over watchJSON.
func BenchmarkWatchUnmarshal(b *testing.B) {
	w := Watch{ID: "01KB7S9J1W0X2Y3Z4A5B6C7D8E", Kind: "timer", Predicate: json.RawMessage(`{"at":"2026-12-01T18:00:00.000Z"}`),
		Recipient: "r12345", State: StatePending, Mode: "until", Deadline: time.Date(2026, 12, 1, 18, 0, 0, 0, time.UTC),
		CreatedAt: time.Date(2026, 12, 1, 17, 0, 0, 0, time.UTC), NextDue: time.Date(2026, 12, 1, 18, 0, 0, 0, time.UTC), Note: "12345"}
	raw, err := w.MarshalJSON()
	if err != nil {
		b.Fatal(err)
	}
	b.Run("quick", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var got Watch
			if err := got.UnmarshalJSON(raw); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("reflect", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var got Watch
			if err := got.unmarshalReflect(raw); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// FuzzQuickWatch: for any text, Watch.UnmarshalJSON gives what
// encoding/json over watchJSON gives, the same watch or the same error.
func FuzzQuickWatch(f *testing.F) {
	r := rand.New(rand.NewPCG(7, 8))
	for range 20 {
		w := randomWatchOf(r, []string{"", "plain", "héllo", "r-1"})
		b, err := w.MarshalJSON()
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	for _, s := range []string{`{}`, `{"id":"a","id":"b"}`, `{"polls":1e2}`, `{"predicate":null}`, `{"labels":{"a":"1","a":"2"}}`, "{\"note\":\"bad\xff\"}"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var want, got Watch
		werr := want.unmarshalReflect(b)
		gerr := got.UnmarshalJSON(b)
		if (werr != nil) != (gerr != nil) || (werr != nil && werr.Error() != gerr.Error()) || !reflect.DeepEqual(got, want) {
			t.Errorf("UnmarshalJSON(%q) = %+v (%v), encoding/json gives %+v (%v)", b, got, gerr, want, werr)
		}
	})
}

// The wire shape of an outcome, for encoding/json alone (no MarshalJSON
// anywhere inside: observationJSON, the observation's, has none).
type reflectOutcome struct {
	State       State            `json:"state"`
	Sentence    string           `json:"sentence"`
	Attention   bool             `json:"attention,omitempty"`
	Held        bool             `json:"held,omitempty"`
	Reason      string           `json:"reason"`
	Observation *observationJSON `json:"observation,omitempty"`
}

func reflectObs(o *Observation) *observationJSON {
	if o == nil {
		return nil
	}
	return &observationJSON{o.Verdict, FormatTime(o.At), o.Summary, o.Facts, o.Reason, o.Permanent}
}

// Outcome.MarshalJSON and Observation.MarshalJSON (and their AppendJSON,
// which the stores call) write, byte for byte, what encoding/json writes
// for their wire shapes by reflection, on their own and inside a value;
// facts of strings only, of other values, and none.
func TestOutcomeJSONMatchesReflection(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	strs := []string{"", "plain", `quo"te`, `back\slash`, "<b>", "x&y", "tab\there", "\x01ctl", "héllo", "\u2028sep\u2029", "bad\xffutf8", "emoji 🙂"}
	str := func() string { return strs[r.IntN(len(strs))] }
	some := func() bool { return r.IntN(2) == 0 }
	for i := range 5000 {
		var obs *Observation
		if some() {
			obs = &Observation{Verdict: Verdict(str()), Summary: str(), Reason: str(), Permanent: some()}
			if some() {
				obs.At = time.Date(2026, 12, 1, 12, 0, 0, 0, time.FixedZone("x", 3600)).Add(time.Duration(r.Int64N(int64(48 * time.Hour))))
			}
			switch r.IntN(3) {
			case 0:
				obs.Facts = map[string]any{str(): str(), str(): str(), "at": str()}
			case 1:
				obs.Facts = map[string]any{str(): str(), "n": 1.5, "l": []any{"a", 2}}
			}
		}
		out := &Outcome{State: State(str()), Sentence: str(), Attention: some(), Held: some(), Reason: str(), Observation: obs}
		want, err := json.Marshal(reflectOutcome{out.State, out.Sentence, out.Attention, out.Held, out.Reason, reflectObs(obs)})
		if err != nil {
			t.Fatal(err)
		}
		got, err := out.AppendJSON([]byte("prefix"))
		if err != nil || string(got) != "prefix"+string(want) {
			t.Fatalf("outcome %d (%+v):\n got %s (%v)\nwant prefix%s", i, out, got, err, want)
		}
		if got, err := json.Marshal(map[string]*Outcome{"o": out}); err != nil || string(got) != `{"o":`+string(want)+`}` {
			t.Fatalf("outcome %d inside a value:\n got %s (%v)\nwant {\"o\":%s}", i, got, err, want)
		}
		if obs == nil {
			continue
		}
		want, err = json.Marshal(reflectObs(obs))
		if err != nil {
			t.Fatal(err)
		}
		if got, err := obs.MarshalJSON(); err != nil || !bytes.Equal(got, want) {
			t.Fatalf("observation %d (%+v):\n got %s (%v)\nwant %s", i, obs, got, err, want)
		}
	}
}
