package daemon

import (
	"context"
	"log/slog"
	"math/rand/v2"
	"time"

	"github.com/vigil-run/vigil"
	"github.com/vigil-run/vigil/scheduler"
	"github.com/vigil-run/vigil/watcher"
	"github.com/vigil-run/vigil/watcher/folder"
	"github.com/vigil-run/vigil/watcher/fsevent"
)

// FolderDir names the directory in the data dir where folder watches keep
// the previous contents of the files they diff against.
const FolderDir = folder.BlobDirName

// fsWake is the file system side of the daemon: ONE notifier that wakes
// folder and file watches on file system events. The folder watcher
// registers with it to let go of the contents a forgotten watch kept
// (fsevent.Notifier.OnDrop).
type fsWake struct {
	log *slog.Logger
	n   *fsevent.Notifier
}

// keptContents is what the daemon needs of the folder watcher at start:
// letting go of the contents of watches that are no longer pending.
type keptContents interface {
	Sweep(keep func(id string) bool) error
}

// newFSWake makes the notifier, which pokes the watches it wakes in sched.
func newFSWake(logger *slog.Logger, sched *scheduler.Scheduler) *fsWake {
	f := &fsWake{log: logger.With("component", "fsevent")}
	f.n = fsevent.New(fsevent.Config{
		Logger:   logger,
		PokeFunc: sched.Poke,
		ActiveFunc: func(id string) bool {
			_, _, ok := sched.Info(id)
			return ok
		},
	})
	return f
}

// run wakes every pending folder watch (spread over the polling interval:
// the scheduler re-arms them inside their long event-driven interval, and
// nothing watches their folders until they are probed), lets go of the
// kept contents of watches that are gone (in each of watchers that keeps
// contents), and then runs the notifier until ctx ends. Call it once the
// engine is primed.
func (f *fsWake) run(ctx context.Context, folders []string, watchers []watcher.Watcher) error {
	// The ids come from the primed scheduler: listing every pending row
	// again here held a second copy of them all at start-up (at 1 000 000
	// pending watches, 130 MB of resident memory the process kept).
	pending := make(map[string]bool, len(folders))
	now := time.Now()
	for _, id := range folders {
		pending[id] = true
		f.n.WakeAt(id, now.Add(time.Duration(rand.Int64N(int64(folder.PollEvery)))))
	}
	for _, w := range watchers {
		if k, ok := w.(keptContents); ok {
			if err := k.Sweep(func(id string) bool { return pending[id] }); err != nil {
				f.log.Warn("removing the kept contents of ended folder watches", "err", err)
			}
		}
	}
	return f.n.Run(ctx)
}

// adopt wakes the folder watches of a shard this replica took, as run
// wakes those primed at start: each is probed at a random point of the
// polling interval (the scheduler armed it inside its long event-driven
// one), and that probe registers its folder with the notifier. Without it
// the watch would wait for its interval, deaf to events.
func (f *fsWake) adopt(rows []vigil.ScheduleEntry, now time.Time) int {
	n := 0
	for i := range rows {
		if rows[i].Kind == vigil.KindFolder {
			f.n.WakeAt(rows[i].ID, now.Add(time.Duration(rand.Int64N(int64(folder.PollEvery)))))
			n++
		}
	}
	return n
}

// drop forgets the watches of a shard another replica took: their
// directories are no longer watched here, their wakes are cancelled, and
// the watchers let go of what they kept for them.
func (f *fsWake) drop(ids []string) {
	for _, id := range ids {
		f.n.Drop(id)
	}
}
