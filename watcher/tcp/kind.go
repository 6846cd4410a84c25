package tcp

import (
	"errors"
	"time"

	"github.com/vigil-run/vigil"
	"github.com/vigil-run/vigil/watcher"
)

// Descriptor describes kind tcp: checked every 5 s, for 30 min by default.
func Descriptor() watcher.Descriptor {
	return watcher.Descriptor{
		Kind:    vigil.KindTCP,
		New:     fromDeps,
		Spec:    vigil.KindSpec{Every: 5 * time.Second, Deadline: 30 * time.Minute},
		DueOnly: true,
		Doc:     `{"address": "db.internal:5432"}`,
		Schema: watcher.PredicateSchema[predicate](map[string]string{
			"address": "HOST:PORT to connect to",
			"timeout": "timeout of one connect; default 3s",
		}),
		Subject: func(p map[string]any) string { return "TCP " + watcher.SubjectString(p, "address") },
		CLI: watcher.CLI{
			Use:      "tcp HOST:PORT",
			Short:    "Watch for a TCP port to accept connections",
			Examples: []string{"vigil add tcp localhost:5432"},
			MaxArgs:  1,
			Flags:    []watcher.Flag{{Name: "timeout", Type: watcher.FlagString, Usage: "timeout of one connect (default 3s)"}},
			Build: func(p map[string]any, in watcher.CLIInput) error {
				if len(in.Args) == 1 {
					p["address"] = in.Args[0]
				} else if p["address"] == nil {
					return errors.New("give the address to watch: vigil add tcp HOST:PORT")
				}
				watcher.SetString(p, in, "timeout", "timeout")
				return nil
			},
		},
	}
}

// Descriptor returns the kind's descriptor.
func (*Watcher) Descriptor() watcher.Descriptor { return Descriptor() }

// fromDeps builds the watcher the daemon registers, with the daemon's
// deny_private.
func fromDeps(d watcher.Deps) watcher.Watcher {
	return New(Config{DenyPrivate: d.DenyPrivate})
}
