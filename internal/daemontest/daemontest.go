// Package daemontest starts a real vigil daemon in-process for tests: on
// 127.0.0.1:0, with a temporary data directory, run until the test ends
// and shut down cleanly (a goroutine leak check after the tests sees
// nothing of it). The cli, daemon and mcpserver tests share it. Only tests
// import it (arch_test.go holds that).
package daemontest

import (
	"context"
	"log/slog"
	"path/filepath"
	"sync"
	"testing"

	"github.com/vigil-run/vigil/daemon"
)

// Config returns the configuration tests start from: the defaults,
// listening on 127.0.0.1:0, a new temporary data directory, one new
// temporary directory as the only root, and 4 probe workers.
func Config(t testing.TB) daemon.Config {
	t.Helper()
	cfg := daemon.DefaultConfig()
	cfg.Listen = "127.0.0.1:0"
	cfg.DataDir = filepath.Join(t.TempDir(), "vigil")
	cfg.Roots = []string{t.TempDir()}
	cfg.ProbeWorkers = 4
	return cfg
}

// Daemon is a daemon running in-process until the test ends or Stop.
type Daemon struct {
	*daemon.Daemon
	// Config is the configuration it was started with.
	Config daemon.Config

	once    sync.Once
	cancel  context.CancelFunc
	errc    chan error
	stopErr error
}

// Start makes a daemon for cfg (a nil logger discards) and runs it until
// the test ends; it returns once the daemon is primed. A daemon that
// cannot be made, or stops before it is primed, fails the test. At the
// end of the test it is stopped, and a Run that did not end cleanly fails
// the test (unless the test called Stop itself and so saw the error).
func Start(t testing.TB, cfg daemon.Config, logger *slog.Logger) *Daemon {
	t.Helper()
	d, err := daemon.New(t.Context(), cfg, logger)
	if err != nil {
		t.Fatalf("daemon.New: %v", err)
	}
	r := Run(t, d)
	r.Config = cfg
	return r
}

// Run runs d, made by the caller, as Start does.
func Run(t testing.TB, d *daemon.Daemon) *Daemon {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	r := &Daemon{Daemon: d, cancel: cancel, errc: make(chan error, 1)}
	go func() { r.errc <- d.Run(ctx) }()
	select {
	case <-d.Primed():
	case err := <-r.errc:
		cancel()
		t.Fatalf("the daemon stopped before it was primed: %v", err)
	}
	t.Cleanup(func() {
		var stopped bool
		r.once.Do(func() { stopped = true; r.stopErr = r.wait() })
		if stopped && r.stopErr != nil {
			t.Errorf("daemon Run = %v after shutdown, want nil", r.stopErr)
		}
	})
	return r
}

// Stop shuts the daemon down and returns what its Run returned; later
// calls return the same.
func (r *Daemon) Stop() error {
	r.once.Do(func() { r.stopErr = r.wait() })
	return r.stopErr
}

func (r *Daemon) wait() error {
	r.cancel()
	return <-r.errc
}
