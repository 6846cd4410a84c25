package watcher

import (
	"context"
	"log/slog"
	"time"

	"github.com/vigil-run/vigil"
	"github.com/vigil-run/vigil/forge"
	"github.com/vigil-run/vigil/watcher/fsevent"
)

// Deps are what the daemon shares with the watchers it builds: its
// settings and the parts made before the registry. A kind's
// Descriptor.New takes the fields it needs and ignores the rest, so the
// daemon builds every kind the same way, from one Deps.
type Deps struct {
	// DenyPrivate refuses loopback, private and CGNAT addresses to
	// network probes too (the daemon's deny_private).
	DenyPrivate bool
	// Roots, when not empty, are the directories a watched path must
	// resolve inside (the daemon's roots).
	Roots []string
	// AllowExec allows the kinds that run commands (--allow-exec).
	AllowExec bool
	// MinEvery is the shortest interval a watch may ask for (min_every).
	MinEvery time.Duration
	// MaxDeadline is the longest deadline a watch may ask for
	// (max_deadline); zero means the default's. A kind that keeps files
	// for its pending watches keeps them at least that long.
	MaxDeadline time.Duration
	// DataDir is the daemon's data directory; a kind that keeps files
	// there uses a directory of its own inside it.
	DataDir string
	// Logger logs what a kind does in the background; nil discards.
	Logger *slog.Logger
	// Notifier wakes watches on file system events; nil: the file system
	// kinds poll at their interval.
	Notifier *fsevent.Notifier
	// Forges are the configured code forges, one set shared by every kind
	// that asks them (each token's cache and rate-limit state is shared);
	// nil means none.
	Forges *forge.Set
	// PokeFunc makes a watch due now (the scheduler's Poke), for a kind
	// that learns of a change between its checks; nil tells nobody.
	PokeFunc func(id string)
	// StartFunc is asked just before a run watch's program starts (see
	// run.Config.StartFunc); nil asks nobody.
	StartFunc func(ctx context.Context, id string, last, starting *vigil.Observation) (bool, error)
	// Replica is this daemon's replica id on a store with replicas, ""
	// on one daemon.
	Replica string
}

// Runner is a watcher with work of its own in the background (the run
// kind reaps ended runs and pokes their watches): the daemon calls Run
// once its pending watches are loaded, until ctx ends.
type Runner interface {
	Run(ctx context.Context) error
}
