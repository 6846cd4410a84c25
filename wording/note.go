package wording

import (
	"fmt"
	"strings"

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
