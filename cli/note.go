package cli

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/vigil-run/vigil"
)

func newNoteCmd(e *env) *cobra.Command {
	var (
		cf        clientFlags
		recipient string
		asJSON    bool
	)
	cmd := &cobra.Command{
		Use:     "note --for R TITLE [BODY]",
		Short:   "Leave a note in a recipient's mailbox, without a watch",
		GroupID: "mail",
		Long: `Leave a note — a one-line TITLE and an optional BODY — in --for's mailbox. It
is delivered like a watch's outcome: "vigil notice", inbox_read and the MCP
channel push show it once to each reader. A BODY of "-" is read from stdin.
A recurring job uses it to leave its findings for the next session:

  vigil note --for my-project "nightly: 2 flaky tests" "$(cat report.txt)"

The title is at most 200 bytes of one line, the body at most 16 KiB.`,
		Args: cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			r := vigil.NoteRequest{Recipient: firstNonEmpty(recipient, defaultRecipient(e)), Title: args[0]}
			if len(args) == 2 {
				r.Body = args[1]
				if r.Body == "-" {
					// One byte over the bound is enough for the daemon to refuse it.
					b, err := io.ReadAll(io.LimitReader(cmd.InOrStdin(), vigil.MaxNoteBodyBytes+1))
					if err != nil {
						return fmt.Errorf("reading the body from stdin: %w", err)
					}
					r.Body = string(b)
				}
			}
			if err := vigil.ValidNote(r.Title, r.Body); err != nil {
				return usageErr(err)
			}
			c, err := cf.client(e)
			if err != nil {
				return err
			}
			m, err := c.Note(cmd.Context(), r)
			if err != nil {
				return callErr(cmd, err)
			}
			if asJSON {
				return writeJSON(e.stdout, m)
			}
			fmt.Fprintf(e.stdout, "Left a note for %s (message %d): %s\n", term(m.Recipient), m.Seq, oneLine(m.Text))
			return nil
		},
	}
	cf.bind(cmd, false)
	cmd.Flags().StringVar(&recipient, "for", "", "whose mailbox (VIGIL_RECIPIENT; default your user name)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the message as JSON")
	return cmd
}
