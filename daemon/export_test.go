package daemon

import (
	"time"

	"github.com/vigil-run/vigil/store/postgres"
	"github.com/vigil-run/vigil/store/sqlite"
	"github.com/vigil-run/vigil/watcher"
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

// PostgresStore returns the daemon's store, for tests that drive its
// fence; nil on another store.
func (d *Daemon) PostgresStore() *postgres.Store {
	st, _ := d.store.(*postgres.Store)
	return st
}

// Forget drops watches from the schedule as the engine does when a
// settlement loses.
func (d *Daemon) Forget(ids ...string) { d.eng.Forget(ids...) }

// Scheduled reports whether watch id is on the schedule.
func (d *Daemon) Scheduled(id string) bool {
	_, ok := d.sched.Live(id)
	return ok
}

// Deafen makes a replica drop every database event it hears (lost
// notifications) until it is called with false.
func (d *Daemon) Deafen(on bool) { d.shards.deaf.Store(on) }

// Resync hands a replica the event its listener hears after it connected
// again.
func (d *Daemon) Resync() { d.shards.heard(postgres.Event{Kind: postgres.EventResync}) }

// SetCreateHook has f called at each step of a first start's making of
// its database, named (createDatabase), and as it writes a key file
// (writeNewFile, with the file's name); nil stops it.
func SetCreateHook(f func(step string)) { createHook = f }

// OnCloseWatchers has f called as Close closes the watchers, as a
// watcher's Close would be. Call it before Run.
func (d *Daemon) OnCloseWatchers(f func()) {
	d.watchers = append(d.watchers, closingWatcher{d.watchers[0], f})
}

type closingWatcher struct {
	watcher.Watcher
	f func()
}

func (c closingWatcher) Close() error { c.f(); return nil }

// SetReadyClock makes /readyz's look at the store read the time from now,
// so that a test moves past the cached answer; call it before Run.
func (d *Daemon) SetReadyClock(now func() time.Time) { d.storeOK.now = now }

// SetDrainWait makes the shutdown wait out shutdown_drain on what wait
// returns, so that a test ends the drain itself; call it before Run.
func (d *Daemon) SetDrainWait(wait func(time.Duration) <-chan time.Time) { d.drainWait = wait }

// Stopping is closed once Run's context has ended.
func (d *Daemon) Stopping() <-chan struct{} { return d.stopped }

// SMTPImplicitTLS reports whether email delivery speaks TLS from the
// connection's first byte under c (smtp.tls, or port 465).
func SMTPImplicitTLS(c Config) bool { return c.Delivery.SMTP.implicitTLS() }

// RenewLeasesAsRows has the daemons started on the store cfg names renew
// their leases as rows, as on a server before PostgreSQL 14, not hold
// them as their sessions.
func RenewLeasesAsRows(cfg *Config) { rowLeases.Store(cfg.Store, true) }
