// Package wording holds every sentence a person or an agent reads about a
// watch: what it watches, how it settled, why it has not settled yet. Each
// sentence is built from the watch and its frozen observation only, so a
// retry produces the same words. The CLI, MCP server, notice block and
// webhook body all use it.
package wording

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/vigil-run/vigil"
	"github.com/vigil-run/vigil/internal/jsonscan"
	"github.com/vigil-run/vigil/watcher/kinds"
)

// maxSummary clips observation summaries inside a sentence.
const maxSummary = 300

// Time formats an instant for a sentence.
func Time(t time.Time) string { return t.UTC().Format("2006-01-02 15:04:05 UTC") }

// Subject names what a watch watches, in a few words: "GET https://x/health",
// "the timer set for 2026-11-30 15:04:05 UTC".
func Subject(w *vigil.Watch) string {
	if d, ok := kinds.Lookup(w.Kind); ok && d.Subject != nil {
		// Credentials in the predicate never reach a sentence; nor do
		// its control characters (a path, a check name).
		return vigil.PlainText(d.Subject(predicate(vigil.RedactJSON(w.Predicate))))
	}
	return vigil.PlainText(string(w.Kind) + " watch " + w.ID)
}

// predicate reads raw as json.Unmarshal reads it into a map[string]any
// (nil when it is not an object). An object of plain strings (a timer's,
// a folder's) is read without the decoder: every settlement's sentence
// names its subject, a storm's thousands at once.
func predicate(raw []byte) map[string]any {
	s := jsonscan.Scanner{B: raw}
	p := make(map[string]any, 4)
	plain := s.Object(func(key string) bool {
		v, ok := s.PlainString()
		p[key] = v // a key given twice: the last value, as encoding/json has it
		return ok
	})
	if plain && s.End() {
		return p
	}
	p = nil
	_ = json.Unmarshal(raw, &p)
	return p
}

// Outcome returns the one sentence for a settled watch: o holds the state,
// the reason and the frozen observation; the watch gives subject and deadline.
func Outcome(w *vigil.Watch, o *vigil.Outcome) string {
	subj := Subject(w)
	obs := o.Observation
	switch o.State {
	case vigil.StateFired:
		switch {
		case o.Held && o.Reason == "failed":
			return fmt.Sprintf("%s can no longer happen%s: the watch held.", capital(subj), detail(obs))
		case o.Held:
			return fmt.Sprintf("%s did not happen during the whole window (until %s): the watch held.", capital(subj), Time(w.Deadline))
		case w.Kind == vigil.KindTimer:
			if w.Note != "" {
				return fmt.Sprintf("%s went off: %s", capital(subj), clip(w.Note, maxSummary))
			}
			return capital(subj) + " went off."
		case w.Kind == vigil.KindFolder:
			return fmt.Sprintf("%s changed%s.", capital(subj), detail(obs))
		case w.Mode == vigil.ModeUnless:
			return fmt.Sprintf("Attention: %s happened%s.", subj, detail(obs))
		}
		return fmt.Sprintf("%s is done%s.", capital(subj), detail(obs))
	case vigil.StateFailed:
		return fmt.Sprintf("%s failed%s.", capital(subj), detail(obs))
	case vigil.StateExpired:
		if o.Reason == "no_watcher" {
			return fmt.Sprintf("%s expired at its deadline, %s: no watcher for kind %q ran in this build of vigil, so it was never checked.", capital(subj), Time(w.Deadline), w.Kind)
		}
		if o.Reason == "down_past_deadline" {
			return fmt.Sprintf("%s expired: its deadline, %s, passed while vigil was not running.", capital(subj), Time(w.Deadline))
		}
		if obs == nil || obs.Verdict == vigil.VerdictUnavailable {
			why := "no probe answered"
			if obs != nil && obs.Reason != "" {
				why = "the last probe could not tell: " + clip(obs.Reason, maxSummary)
			}
			return fmt.Sprintf("%s ended at its deadline, %s, without a confirmed answer (%s).", capital(subj), Time(w.Deadline), why)
		}
		return fmt.Sprintf("%s did not settle before its deadline, %s%s.", capital(subj), Time(w.Deadline), lastSeen(obs))
	case vigil.StateErrored:
		switch o.Reason {
		case "max_polls":
			return fmt.Sprintf("%s stopped after %s without an answer (max_polls)%s.", capital(subj), count(w.MaxPolls, "probe", "probes"), lastSeen(obs))
		case "max_errors":
			if w.MaxErrors == 1 {
				return fmt.Sprintf("%s stopped after 1 check that could not tell (max_errors)%s.", capital(subj), lastReason(obs))
			}
			return fmt.Sprintf("%s stopped after %d checks in a row that could not tell (max_errors)%s.", capital(subj), w.MaxErrors, lastReason(obs))
		}
		return fmt.Sprintf("%s cannot be watched%s.", capital(subj), lastReason(obs))
	case vigil.StateCancelled:
		return "Stopped watching " + subj + "."
	}
	return fmt.Sprintf("%s is %s.", capital(subj), o.State)
}

// Changed is the sentence of a standing watch's "changed" message: what
// changed, as its watcher summarised it.
func Changed(w *vigil.Watch, obs *vigil.Observation) string {
	if obs == nil || obs.Summary == "" {
		return capital(Subject(w)) + " changed."
	}
	return fmt.Sprintf("%s changed: %s.", capital(Subject(w)), clip(strings.TrimRight(obs.Summary, "."), 2*maxSummary))
}

// Why says in one sentence why a watch has not settled yet, or how it did.
func Why(w *vigil.Watch) string {
	if w.State == vigil.StateUnwatchable {
		if !w.Deadline.IsZero() {
			return fmt.Sprintf("This build of vigil has no watcher for kind %q; the watch is left untouched for a build that has one, and expires at its deadline, %s, if none runs before.", w.Kind, Time(w.Deadline))
		}
		return fmt.Sprintf("This build of vigil has no watcher for kind %q; the watch is left untouched for a build that has one.", w.Kind)
	}
	if w.State.Terminal() {
		if w.Outcome != nil && w.Outcome.Sentence != "" {
			// A sentence stored before sentences were made plain
			// is made so as it is read.
			return vigil.PlainText(w.Outcome.Sentence)
		}
		return fmt.Sprintf("%s is %s.", capital(Subject(w)), w.State)
	}
	var b strings.Builder
	obs := w.LastObservation
	switch {
	case w.Kind == vigil.KindTimer:
		fmt.Fprintf(&b, "Waiting for %s", Subject(w))
	case obs == nil:
		fmt.Fprintf(&b, "%s has not been checked yet", capital(Subject(w)))
	case obs.Verdict == vigil.VerdictUnavailable:
		fmt.Fprintf(&b, "The last check of %s could not tell: %s", Subject(w), clip(obs.Reason, maxSummary))
	case obs.Verdict == vigil.VerdictSatisfied:
		fmt.Fprintf(&b, "%s holds%s but has not been stable long enough yet", capital(Subject(w)), detail(obs))
	default:
		fmt.Fprintf(&b, "%s has not settled%s", capital(Subject(w)), lastSeen(obs))
	}
	if w.Errors > 0 {
		b.WriteString("; " + Errors(w))
	}
	if !w.NextDue.IsZero() && w.Kind != vigil.KindTimer {
		fmt.Fprintf(&b, "; next check at %s", Time(w.NextDue))
	}
	if !w.Deadline.IsZero() {
		fmt.Fprintf(&b, "; deadline %s", Time(w.Deadline))
	}
	b.WriteString(".")
	return b.String()
}

// Errors says how many checks of w could not tell, in all and in a row:
// "4 of 5 checks could not tell, the last 2 in a row (max_errors 3)".
func Errors(w *vigil.Watch) string {
	s := fmt.Sprintf("%d of %s could not tell", w.Errors, count(max(w.Polls, w.Errors), "check", "checks"))
	switch {
	case w.ConsecutiveErrors == 0:
		s += ", none since the last that could"
	case w.ConsecutiveErrors == 1:
		s += ", the last one"
	case w.ConsecutiveErrors == w.Errors:
		s += ", all in a row"
	default:
		s += fmt.Sprintf(", the last %d in a row", w.ConsecutiveErrors)
	}
	if w.MaxErrors > 0 {
		s += fmt.Sprintf(" (max_errors %d)", w.MaxErrors)
	}
	return s
}

func detail(o *vigil.Observation) string {
	if o == nil || o.Summary == "" {
		return ""
	}
	return ": " + clip(strings.TrimRight(o.Summary, "."), maxSummary)
}

func lastSeen(o *vigil.Observation) string {
	if o == nil || o.Summary == "" {
		return ""
	}
	return "; last seen: " + clip(strings.TrimRight(o.Summary, "."), maxSummary)
}

func lastReason(o *vigil.Observation) string {
	if o == nil {
		return ""
	}
	if o.Reason != "" {
		return ": " + clip(strings.TrimRight(o.Reason, "."), maxSummary)
	}
	return detail(o)
}

// capital starts a sentence with a subject: vigil's own words ("the timer
// …") take a capital; a name ("acme/api#7", a lowercase host) is left as
// it is written.
func capital(s string) string {
	if len(s) > 0 && s[0] >= 'a' && s[0] <= 'z' && strings.HasPrefix(s, "the ") {
		return string(s[0]-'a'+'A') + s[1:]
	}
	return s
}

// count says n things: "1 probe", "5 probes".
func count(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return fmt.Sprintf("%d %s", n, many)
}

// clip makes s one line of plain text (vigil.PlainText, its runs of white space one
// space) at most n bytes long, marking a cut with "…".
func clip(s string, n int) string {
	cut := false
	if m := 4*n + 16; len(s) > m {
		// Only the first n bytes are kept: a 1 MB title is not escaped
		// whole to keep 300 bytes of it. An escape spells a byte in at
		// most 6, so 4n raw bytes hold more than n once spelled, unless
		// white space collapses: then what is left is short anyway.
		for m > 0 && !isRuneStart(s[m]) {
			m--
		}
		s, cut = s[:m], true
	}
	s = vigil.PlainText(strings.Join(strings.Fields(s), " "))
	if len(s) <= n {
		if cut {
			s += "…"
		}
		return s
	}
	for n > 0 && !isRuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

func isRuneStart(b byte) bool { return b&0xC0 != 0x80 }
