package wording

import (
	"fmt"
	"strings"
	"time"

	"github.com/vigil-run/vigil"
)

// Note is the sentence of a standing watch's "note" message (a schedule's
// fire): what ran and how it went, as its watcher summarised it.
func Note(w *vigil.Watch, obs *vigil.Observation) string {
	if obs == nil || obs.Summary == "" {
		return capital(Subject(w)) + " ran."
	}
	return fmt.Sprintf("%s ran: %s.", capital(Subject(w)), clip(strings.TrimRight(obs.Summary, "."), 2*maxSummary))
}

// LateBaseline is the sentence of the "note" a standing watch leaves when
// its baseline was read at at, later than it was registered (its first
// checks could not tell, or came late): a change made in between is part
// of that baseline and is never reported, so the recipient is told when
// the watch started comparing, and may look for itself.
func LateBaseline(w *vigil.Watch, at time.Time) string {
	from := w.CreatedAt
	if w.StartAt.After(from) {
		from = w.StartAt
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s was first read at %s, %s after the watch was registered", capital(Subject(w)), Time(at), at.Sub(from).Round(time.Second))
	if w.Errors > 0 {
		fmt.Fprintf(&b, " (%s before could not tell)", count(w.Errors, "check", "checks"))
	}
	b.WriteString(": changes are reported from then on; one made between the registration and then is part of that first read and is not reported.")
	return b.String()
}
