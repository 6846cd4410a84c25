package daemon

import (
	"time"

	"github.com/vigil-run/vigil/store/sqlite"
)

// SQLiteStore returns the daemon's store, for tests that inject faults
// into it; nil on another store.
func (d *Daemon) SQLiteStore() *sqlite.Store {
	st, _ := d.store.(*sqlite.Store)
	return st
}

// TickFiles fires the file system notifier's wakes due at now, as its own
// loop does when now comes: a test brings the notifier's time forward.
func (d *Daemon) TickFiles(now time.Time) int { return d.fs.n.Tick(now) }

// FilesWatched lists the directories the file system notifier watches
// for watch id.
func (d *Daemon) FilesWatched(id string) []string { return d.fs.n.Watched(id) }
