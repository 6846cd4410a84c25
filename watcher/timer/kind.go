package timer

import (
	"errors"
	"strings"
	"time"

	"github.com/vigil-run/vigil"
	"github.com/vigil-run/vigil/watcher"
)

// Descriptor describes kind timer: answered by the clock alone, its
// default deadline a minute after its instant.
func Descriptor() watcher.Descriptor {
	return watcher.Descriptor{
		Kind:    vigil.KindTimer,
		New:     fromDeps,
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
		CLI: watcher.CLI{
			Use:      "timer [DURATION | --at TIME]",
			Short:    "Fire after a duration (10m) or at a time (--at RFC 3339)",
			Examples: []string{`vigil add timer 30s --note "stretch"`},
			MaxArgs:  1,
			Flags:    []watcher.Flag{{Name: "at", Type: watcher.FlagString, Usage: "RFC 3339 time to fire at"}},
			Build: func(p map[string]any, in watcher.CLIInput) error {
				at := in.Flags.String("at")
				switch {
				case len(in.Args) == 1 && at != "":
					return errors.New("give a duration or --at, not both")
				case at != "":
					p["at"] = at
				case len(in.Args) == 1:
					if _, err := vigil.ParseTime(in.Args[0]); err == nil && strings.Contains(in.Args[0], "T") {
						p["at"] = in.Args[0]
					} else {
						p["in"] = in.Args[0]
					}
				case p["at"] == nil && p["in"] == nil:
					return errors.New("give a duration (vigil add timer 10m) or a time (--at 2026-03-01T09:00:00Z)")
				}
				return nil
			},
		},
	}
}

// Descriptor returns the kind's descriptor.
func (*Watcher) Descriptor() watcher.Descriptor { return Descriptor() }

// fromDeps builds the watcher the daemon registers, with nothing of the
// daemon.
func fromDeps(d watcher.Deps) watcher.Watcher {
	return New(Config{})
}
