package wording_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/vigil-run/vigil"
	"github.com/vigil-run/vigil/wording"
)

// hostile holds what a forge title or a check name may carry that must
// never reach a reader as it is: a terminal escape sequence (OSC retitle,
// CSI clear), a bell, a C1 CSI, DEL, a byte that is not UTF-8, and the
// Unicode bidi controls that make text read in another order than it is.
const hostile = "build\x1b]0;pwned\x07 \x1b[2J\u009b31m\x7f\xff \u202eevil\u202c \u2066x\u2069 \u200f\u061c"

// dangerous reports the first character of s no sentence may carry.
func dangerous(s string) (rune, bool) {
	for i, r := range s {
		switch {
		case r == 0xFFFD && strings.HasPrefix(s[i:], "\xff"),
			r < 0x20, r == 0x7f, r >= 0x80 && r <= 0x9f,
			r == 0x061c, r == 0x200e, r == 0x200f,
			r >= 0x202a && r <= 0x202e, r >= 0x2066 && r <= 0x2069:
			return r, true
		}
	}
	if !strings.ContainsRune(s, 0xFFFD) && strings.ToValidUTF8(s, "") != s {
		return 0xFFFD, true
	}
	return 0, false
}

// TestSentencesNeutraliseControls: a sentence quotes text from outside (a
// CI check's name, an HTTP body, a forge title); it reaches agents' prompts,
// terminals and mail, so escape sequences, control characters and bidi
// controls in it are spelled visibly (\x1b, \u202e), never passed on.
func TestSentencesNeutraliseControls(t *testing.T) {
	t.Parallel()
	obs := &vigil.Observation{Verdict: vigil.VerdictFailed, Summary: "1 of 2 checks failed: " + hostile, Reason: hostile}
	ci := &vigil.Watch{ID: "w1", Kind: vigil.KindCI, Predicate: json.RawMessage(`{"provider":"github","repo":"acme/api","sha":"3f2a1b0c3f2a1b0c3f2a1b0c3f2a1b0c3f2a1b0c"}`),
		Deadline: t0, MaxPolls: 5, MaxErrors: 3, Note: hostile}
	fp, _ := json.Marshal(map[string]string{"path": "/srv/" + strings.ToValidUTF8(hostile, "")})
	folder := &vigil.Watch{ID: "w2", Kind: vigil.KindFolder, Predicate: fp}
	timer := &vigil.Watch{ID: "t1", Kind: vigil.KindTimer, Predicate: json.RawMessage(`{"at":"2026-11-30T12:30:00.000Z"}`), Note: hostile}
	var got []string
	for _, st := range []vigil.State{vigil.StateFired, vigil.StateFailed, vigil.StateExpired, vigil.StateErrored} {
		for _, reason := range []string{"satisfied", "failed", "deadline", "max_errors", "permanent"} {
			o := &vigil.Outcome{State: st, Reason: reason, Observation: obs}
			got = append(got, wording.Outcome(ci, o), wording.Outcome(folder, o), wording.Outcome(timer, o))
		}
	}
	got = append(got, wording.Changed(ci, obs), wording.Note(ci, obs), wording.Subject(folder))
	pending := *ci
	pending.State, pending.LastObservation = vigil.StatePending, obs
	got = append(got, wording.Why(&pending))
	for _, s := range got {
		if r, bad := dangerous(s); bad {
			t.Errorf("a sentence carries %U as it is: %q", r, s)
		}
	}
	want := `1 of 2 checks failed: build\x1b]0;pwned\x07 \x1b[2J\u009b31m\x7f\xff \u202eevil\u202c \u2066x\u2069 \u200f\u061c`
	if s := wording.Outcome(ci, &vigil.Outcome{State: vigil.StateFailed, Reason: "failed", Observation: obs}); !strings.Contains(s, want) {
		t.Errorf("the failed sentence = %q, want it to spell the controls visibly: %q", s, want)
	}
}

// TestSentencesBounded: however long the text a sentence quotes (a 1 MB
// title, a 1 MB note), the sentence stays short.
func TestSentencesBounded(t *testing.T) {
	t.Parallel()
	huge := strings.Repeat("\u202e\x1b[31mtitle ", 1<<20/12)
	obs := &vigil.Observation{Verdict: vigil.VerdictFailed, Summary: huge, Reason: huge}
	w := &vigil.Watch{ID: "w1", Kind: vigil.KindHTTP, Predicate: json.RawMessage(`{"url":"https://x/"}`), Deadline: t0, Note: huge}
	timer := &vigil.Watch{ID: "t1", Kind: vigil.KindTimer, Predicate: json.RawMessage(`{"at":"2026-11-30T12:30:00.000Z"}`), Note: huge}
	for _, s := range []string{
		wording.Outcome(w, &vigil.Outcome{State: vigil.StateFailed, Observation: obs}),
		wording.Outcome(w, &vigil.Outcome{State: vigil.StateErrored, Reason: "max_errors", Observation: obs}),
		wording.Outcome(timer, &vigil.Outcome{State: vigil.StateFired}),
		wording.Changed(w, obs), wording.Note(w, obs),
	} {
		if len(s) > 2048 {
			t.Errorf("a sentence quoting 1 MB is %d bytes", len(s))
		}
	}
}

// TestPlurals: a bound of one is said in the singular.
func TestPlurals(t *testing.T) {
	t.Parallel()
	w := httpWatch(vigil.ModeUntil)
	w.MaxPolls, w.MaxErrors = 1, 1
	for _, tc := range []struct{ reason, want string }{
		{"max_polls", "GET https://api.example/health stopped after 1 probe without an answer (max_polls)."},
		{"max_errors", "GET https://api.example/health stopped after 1 check that could not tell (max_errors)."},
	} {
		if got := wording.Outcome(w, &vigil.Outcome{State: vigil.StateErrored, Reason: tc.reason}); got != tc.want {
			t.Errorf("%s with a bound of 1 = %q, want %q", tc.reason, got, tc.want)
		}
	}
	w.Polls, w.Errors, w.ConsecutiveErrors = 1, 1, 1
	if got, want := wording.Errors(w), "1 of 1 check could not tell, the last one (max_errors 1)"; got != want {
		t.Errorf("Errors = %q, want %q", got, want)
	}
}

// TestWhyPlainStored: a settled watch's why is its stored sentence; one
// stored before sentences were made plain is spelled plain when read.
func TestWhyPlainStored(t *testing.T) {
	t.Parallel()
	w := httpWatch(vigil.ModeUntil)
	w.State = vigil.StateFailed
	w.Outcome = &vigil.Outcome{State: vigil.StateFailed, Sentence: "GET https://api.example/health failed: \x1b[2J\u202eok."}
	if got, want := wording.Why(w), `GET https://api.example/health failed: \x1b[2J\u202eok.`; got != want {
		t.Errorf("Why = %q, want %q", got, want)
	}
}
