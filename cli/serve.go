package cli

import (
	"errors"
	"log/slog"

	"github.com/spf13/cobra"

	"github.com/vigil-run/vigil/daemon"
	"github.com/vigil-run/vigil/internal/proc"
)

func newServeCmd(e *env) *cobra.Command {
	cmd := &cobra.Command{
		Use:     "serve",
		Short:   "Run the vigil daemon",
		GroupID: "daemon",
		Long: `Run the vigil daemon in the foreground until interrupted.

Each setting is read from, in increasing precedence: its default, the JSON
config file (--config or VIGIL_CONFIG), its VIGIL_… environment variable, and
its flag. The first start creates the data directory and writes the admin
token to <data-dir>/admin.token (mode 0600); clients on this machine find it
there.

It refuses to start, with exit code 2 and a sentence saying what to do, when
another vigil serves the same data dir, when the database is damaged, and
when it is empty or missing in a data dir that was used before (one holding
admin.token or webhook.secret): restore a backup, or remove what is named to
start afresh. On PostgreSQL it also refuses when its webhook.secret shares no
line with a live replica's, or its link.key, webhook_secrets, webhooks or
public_url differ: every replica signs with the same files, copied from a
running replica, and the same settings. A replica whose lease lapsed (frozen)
compares them again before it takes a shard, and stops, exit code 2, if they
differ.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			// Every file this process was started with from fd 3 up (a
			// shell's redirection, a socket, a pipe its parent waits on
			// to close) is marked close-on-exec before anything else, so
			// no program the daemon starts (a probe, a delivery, a resumed
			// agent, a supervisor) inherits it: os/exec hands a child every
			// file not so marked. The daemon uses none of them; the flag
			// is this process's descriptor's, so whoever holds a copy
			// keeps it as it was.
			proc.CloseOnExecFrom(3)
			cfg, err := daemon.Load(cmd.Flags(), e.getenv)
			if err != nil {
				return usageErr(err)
			}
			if err := cfg.Validate(); err != nil {
				return usageErr(err)
			}
			// The vigil binary (ServeReap) runs each command and resume
			// delivery's program under its own `reap`; nil elsewhere.
			cfg.Reaper = proc.SelfReaper()
			log := slog.New(slog.NewTextHandler(e.stderr, nil))
			if err := daemon.Run(cmd.Context(), cfg, log); err != nil {
				if errors.Is(err, daemon.ErrRefused) {
					// A data dir it must not start from: the operator acts.
					return usageErr(err)
				}
				return &ExitError{Code: ExitFailed, Err: err}
			}
			return nil
		},
	}
	daemon.BindFlags(cmd.Flags())
	return cmd
}
