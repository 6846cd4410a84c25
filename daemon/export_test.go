package daemon

import "github.com/vigil-run/vigil/store/sqlite"

// SQLiteStore returns the daemon's store, for tests that inject faults
// into it; nil on another store.
func (d *Daemon) SQLiteStore() *sqlite.Store {
	st, _ := d.store.(*sqlite.Store)
	return st
}
