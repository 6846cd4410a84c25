package timer

import (
	"time"

	"github.com/vigil-run/vigil"
	"github.com/vigil-run/vigil/watcher"
)

// Descriptor describes kind timer: answered by the clock alone, its
// default deadline a minute after its instant.
func Descriptor() watcher.Descriptor {
	return watcher.Descriptor{
		Kind:    vigil.KindTimer,
		Spec:    vigil.KindSpec{Deadline: time.Minute, DeadlineFromStart: true, Instant: true},
		DueOnly: true,
		Doc:     `{"in": "10m"} or {"at": "2026-03-01T09:00:00Z"}`,
		Schema: watcher.PredicateSchema[input](map[string]string{
			"at": "an RFC 3339 time to fire at; give at or in, not both",
			"in": "a duration from now, like 10m; give at or in, not both",
		}),
		Subject: func(p map[string]any) string {
			if t, err := vigil.ParseTime(watcher.SubjectString(p, "at")); err == nil && !t.IsZero() {
				return "the timer set for " + t.UTC().Format("2006-01-02 15:04:05 UTC")
			}
			return "the timer"
		},
	}
}

// Descriptor returns the kind's descriptor.
func (*Watcher) Descriptor() watcher.Descriptor { return Descriptor() }
