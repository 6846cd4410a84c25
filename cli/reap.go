package cli

import (
	"github.com/spf13/cobra"

	"github.com/vigil-run/vigil/internal/proc"
)

// ServeReap says that this program is the vigil binary as far as `reap`
// goes: its main hands its arguments to New's command, whose hidden
// `reap` runs a program as a child subreaper (Linux). The daemons its
// `serve` starts then run each command and resume delivery's program
// under `<this executable> reap`, so that what the program leaves outside
// its process group (setsid, a daemon) is killed with it. Call it first
// in main, and only where os.Args reach New's command: a program that
// embeds package daemon, or runs New's command with arguments of its own
// choosing, must not, or its daemon would start it with "reap"; without
// it deliveries end only the program's process group.
func ServeReap() { proc.ServeReap() }

// newReapCmd is `vigil reap`, hidden: the daemon starts it to run one
// command or resume delivery's program as a child subreaper (see
// proc.Reap), when this program called ServeReap.
func newReapCmd() *cobra.Command {
	return &cobra.Command{
		Use:                "reap",
		Short:              "Run a program and end what it leaves behind (started by the daemon)",
		Hidden:             true,
		DisableFlagParsing: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			if code := proc.Reap(args); code != 0 {
				return &ExitError{Code: code}
			}
			return nil
		},
	}
}
