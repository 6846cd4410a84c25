package cli

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/vigil-run/vigil/daemon"
)

func newBackupCmd(e *env) *cobra.Command {
	cmd := &cobra.Command{
		Use:     "backup DEST",
		Short:   "Write a consistent copy of the database to DEST (safe while vigil serve runs)",
		GroupID: "daemon",
		Long: `Write a consistent, compact copy of the SQLite database to DEST, a file that
must not exist yet. It reads the database in the data dir (--data-dir,
VIGIL_DATA_DIR, or the default) directly and read-only, with SQLite's VACUUM
INTO, so it works whether or not the daemon is running, and the daemon
carries on meanwhile. It writes nothing to the database and migrates
nothing: the copy keeps the database's schema version. To restore, stop the
daemon and put the copy in place of vigil.db.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg, err := daemon.Load(cmd.Flags(), e.getenv)
			if err != nil {
				return usageErr(err)
			}
			if err := daemon.Backup(cmd.Context(), cfg, args[0]); err != nil {
				return &ExitError{Code: ExitFailed, Err: err}
			}
			fmt.Fprintf(e.stdout, "Backed up %s to %s.\n", cfg.DatabasePath(), args[0])
			return nil
		},
	}
	cmd.Flags().String("data-dir", "", "data dir holding vigil.db (VIGIL_DATA_DIR)")
	cmd.Flags().String("store", "", "store, if not SQLite in the data dir: sqlite:PATH (VIGIL_STORE)")
	cmd.Flags().String("config", "", "JSON config file (VIGIL_CONFIG)")
	return cmd
}
