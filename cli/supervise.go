package cli

import (
	"github.com/spf13/cobra"

	"github.com/vigil-run/vigil/watcher/run"
)

// newSuperviseCmd is `vigil supervise`, hidden: the daemon starts it to
// supervise a run watch's command (see run.Supervise), with the job on
// stdin.
func newSuperviseCmd(e *env) *cobra.Command {
	return &cobra.Command{
		Use:    "supervise",
		Short:  "Supervise a run watch's command (started by the daemon)",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if code := run.Supervise(cmd.InOrStdin(), e.stdout, e.stderr); code != 0 {
				return &ExitError{Code: code}
			}
			return nil
		},
	}
}
