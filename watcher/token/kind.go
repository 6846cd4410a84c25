package token

import (
	"time"

	"github.com/vigil-run/vigil"
	"github.com/vigil-run/vigil/watcher"
)

// Descriptor describes kind token: settled from outside, by a POST to its
// completion URL, within 24 h by default.
func Descriptor() watcher.Descriptor {
	return watcher.Descriptor{
		Kind: vigil.KindToken,
		New:  fromDeps,
		Spec: vigil.KindSpec{Deadline: 24 * time.Hour},
		Doc: `{} — the result holds a completion URL; whoever finishes the work (a script, a person, another agent) POSTs ` +
			`{"status": "success"} or {"status": "failure"} to it`,
		Schema:  watcher.PredicateSchema[input](nil),
		Subject: func(map[string]any) string { return "the completion token" },
		CLI: watcher.CLI{
			Use:   "token",
			Short: "Make a completion URL that settles the watch when called",
			Long: `Register a watch that something else settles by calling its completion URL
once: POST {"status": "success"} fires it, {"status": "failure"} fails it, and
"data" (a JSON object) goes into the outcome. The URL holds a secret and is
shown only now; it expires with the watch (24h by default).`,
			Examples: []string{`vigil add token --note "deploy finished" --deadline 2h`},
			MaxArgs:  0,
			Build:    func(map[string]any, watcher.CLIInput) error { return nil },
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
