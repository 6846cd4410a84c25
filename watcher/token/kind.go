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
		Spec: vigil.KindSpec{Deadline: 24 * time.Hour},
		Doc: `{} — the result holds a completion URL; whoever finishes the work (a script, a person, another agent) POSTs ` +
			`{"status": "success"} or {"status": "failure"} to it`,
		Schema:  watcher.PredicateSchema[input](nil),
		Subject: func(map[string]any) string { return "the completion token" },
	}
}

// Descriptor returns the kind's descriptor.
func (*Watcher) Descriptor() watcher.Descriptor { return Descriptor() }
