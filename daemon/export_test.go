package daemon

import "github.com/vigil-run/vigil/store/sqlite"

// SQLiteStore returns the daemon's store, for tests that inject faults
// into it.
func (d *Daemon) SQLiteStore() *sqlite.Store { return d.store }
