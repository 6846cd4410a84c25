// Package kinds lists the kinds built into vigil: one line per kind, the
// descriptor its package exports. The CLI, the OpenAPI document, wording
// and the MCP server's defaults read this list, and the daemon builds its
// registry from it (watcher.Build: each descriptor's New makes the kind's
// watcher), so a kind is registered by its one line here.
package kinds

import (
	"sync"

	"github.com/vigil-run/vigil"
	"github.com/vigil-run/vigil/watcher"
	"github.com/vigil-run/vigil/watcher/ci"
	"github.com/vigil-run/vigil/watcher/command"
	"github.com/vigil-run/vigil/watcher/file"
	"github.com/vigil-run/vigil/watcher/folder"
	httpwatch "github.com/vigil-run/vigil/watcher/http"
	"github.com/vigil-run/vigil/watcher/run"
	"github.com/vigil-run/vigil/watcher/schedule"
	"github.com/vigil-run/vigil/watcher/tcp"
	"github.com/vigil-run/vigil/watcher/ticket"
	"github.com/vigil-run/vigil/watcher/timer"
	"github.com/vigil-run/vigil/watcher/token"
)

// builtin is built once: the descriptors are fixed, and resolving their
// schemas is not free.
var builtin = sync.OnceValue(func() watcher.Kinds {
	return watcher.NewKinds(
		timer.Descriptor(),
		httpwatch.Descriptor(),
		tcp.Descriptor(),
		file.Descriptor(),
		folder.Descriptor(),
		command.Descriptor(),
		run.Descriptor(),
		schedule.Descriptor(),
		token.Descriptor(),
		ci.Descriptor(),
		ticket.Descriptor(),
	)
})

// Builtin returns the descriptors of every kind built into vigil.
func Builtin() watcher.Kinds { return builtin() }

// Lookup returns the built-in descriptor of k.
func Lookup(k vigil.Kind) (watcher.Descriptor, bool) { return builtin().Lookup(k) }
