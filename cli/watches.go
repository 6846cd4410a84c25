package cli

import (
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/vigil-run/vigil"
	"github.com/vigil-run/vigil/client"
	"github.com/vigil-run/vigil/deliver"
	"github.com/vigil-run/vigil/watcher/command"
	"github.com/vigil-run/vigil/wording"
)

// listPage is the page size ls asks for.
const listPage = 500

func newListCmd(e *env) *cobra.Command {
	var (
		cf        clientFlags
		recipient string
		state     string
		kind      string
		labels    []string
		limit     int
		asJSON    bool
	)
	cmd := &cobra.Command{
		Use:     "ls",
		Aliases: []string{"list"},
		Short:   "List watches, newest first",
		GroupID: "watch",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ls, err := parseLabels(labels)
			if err != nil {
				return err
			}
			if limit < 1 {
				return usageErr(fmt.Errorf("--limit must be at least 1"))
			}
			c, err := cf.client(e)
			if err != nil {
				return err
			}
			q := vigil.ListRequest{Recipient: recipient, State: vigil.State(state), Kind: vigil.Kind(kind), Labels: ls}
			var all []*vigil.Watch
			for len(all) < limit {
				q.Limit = min(listPage, limit-len(all))
				page, err := c.Watches(cmd.Context(), q)
				if err != nil {
					return callErr(cmd, err)
				}
				all = append(all, page.Watches...)
				if page.Next == "" || len(page.Watches) == 0 {
					break
				}
				q.After = page.Next
			}
			if all == nil {
				all = []*vigil.Watch{}
			}
			if asJSON {
				return writeJSON(e.stdout, vigil.WatchPage{Watches: all})
			}
			if len(all) == 0 {
				fmt.Fprintln(e.stdout, "No watches.")
				return nil
			}
			printWatchTable(e.stdout, all)
			return nil
		},
	}
	cf.bind(cmd, false)
	fl := cmd.Flags()
	fl.StringVar(&recipient, "for", "", "only this recipient's watches")
	fl.StringVar(&state, "state", "", "only watches in this state (pending, fired, failed, expired, cancelled, errored, unwatchable)")
	fl.StringVar(&kind, "kind", "", "only watches of this kind")
	fl.StringArrayVar(&labels, "label", nil, "only watches with this label key=value (repeatable)")
	fl.IntVar(&limit, "limit", 100, "list at most this many")
	fl.BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

// printWatchTable writes the ls table.
func printWatchTable(out io.Writer, ws []*vigil.Watch) {
	tw := tabwriter.NewWriter(out, 0, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tKIND\tSTATE\tRECIPIENT\tNEXT/SETTLED\tSUBJECT")
	for _, w := range ws {
		subject := oneLine(wording.Subject(w))
		if w.Unreadable != "" {
			subject = "cannot be read: " + oneLine(w.Unreadable)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", term(w.ID), term(string(w.Kind)), stateCell(w), term(w.Recipient), nextOrSettled(w), subject)
	}
	tw.Flush()
}

// stateCell is the state, marked with each push receipt that did not end
// delivered ("fired, webhook undeliverable").
func stateCell(w *vigil.Watch) string {
	s := string(w.State)
	if w.Unreadable != "" {
		s += ", unreadable"
	}
	for _, r := range w.Receipts {
		if r.Status != vigil.ReceiptDelivered {
			s += ", " + r.Channel + " " + r.Status
		}
	}
	return term(s)
}

func nextOrSettled(w *vigil.Watch) string {
	switch {
	case w.State.Terminal() && !w.SettledAt.IsZero():
		return wording.Time(w.SettledAt)
	case w.State == vigil.StatePending && !w.NextDue.IsZero():
		return wording.Time(w.NextDue)
	}
	return "-"
}

// oneLine flattens s for a table cell, escaped for a terminal (term).
func oneLine(s string) string { return term(strings.Join(strings.Fields(s), " ")) }

func newShowCmd(e *env) *cobra.Command {
	cmd := &cobra.Command{
		Use:     "show ID",
		Short:   "Show one watch",
		GroupID: "watch",
		Args:    cobra.ExactArgs(1),
	}
	return withClient(e, cmd, "print JSON", func(cmd *cobra.Command, c *client.Client, args []string, asJSON bool) error {
		w, err := c.Watch(cmd.Context(), args[0])
		if err != nil {
			return callErr(cmd, err)
		}
		if asJSON {
			return writeJSON(e.stdout, w)
		}
		printWatch(e.stdout, w)
		return nil
	})
}

// printWatch writes one watch, a field a line.
func printWatch(out io.Writer, w *vigil.Watch) {
	tw := tabwriter.NewWriter(out, 0, 8, 2, ' ', 0)
	// Every value is escaped for the terminal: most hold what a caller
	// wrote.
	row := func(k, v string) {
		if v != "" {
			fmt.Fprintf(tw, "%s:\t%s\n", k, term(v))
		}
	}
	row("ID", w.ID)
	row("Kind", string(w.Kind))
	row("Subject", oneLine(wording.Subject(w)))
	row("State", string(w.State))
	row("Unreadable", oneLine(w.Unreadable))
	row("Recipient", w.Recipient)
	row("Mode", string(w.Mode))
	row("Predicate", string(w.Predicate))
	if w.Every > 0 {
		row("Every", vigil.FormatDuration(w.Every))
	}
	row("Created", timeOrEmpty(w.CreatedAt))
	if w.StartAt.After(w.CreatedAt) {
		row("Starts", timeOrEmpty(w.StartAt))
	}
	row("Deadline", timeOrEmpty(w.Deadline))
	if w.State == vigil.StatePending {
		row("Next check", timeOrEmpty(w.NextDue))
	}
	row("Settled", timeOrEmpty(w.SettledAt))
	row("Polls", strconv.Itoa(w.Polls))
	if w.Errors > 0 {
		row("Errors", wording.Errors(w))
	}
	row("Note", oneLine(w.Note))
	row("Labels", formatLabels(w.Labels))
	if o := w.LastObservation; o != nil {
		text := observationText(o)
		if at := lastCheck(w); at.After(o.At) {
			text += " (the same since " + wording.Time(o.At) + ")"
		}
		row("Last check", timeOrEmpty(lastCheck(w))+"  "+oneLine(text))
	}
	if w.Outcome != nil {
		row("Outcome", oneLine(w.Outcome.Sentence))
	} else if w.State != vigil.StatePending {
		row("Outcome", oneLine(wording.Why(w)))
	}
	if len(w.Deliver) > 0 {
		row("Deliver", string(w.Deliver))
		if o, err := deliver.ParseOptions(w.Deliver); err == nil {
			for _, c := range o.Command {
				row("Command", commandLine(c.Program)+" (runs when the watch "+c.RunsFor()+")")
			}
			if r := o.Resume; r != nil {
				c := deliver.CommandOptions{On: r.On}
				row("Resume", strings.Join(r.Template(), " ")+" (runs when the watch "+c.RunsFor()+")")
			}
		}
	}
	for _, r := range w.Receipts {
		row("Receipt", receiptText(r))
	}
	if w.AnsweredAtCreation {
		row("Answered", "at creation (nothing was mailed)")
	}
	tw.Flush()
}

// commandLine is a delivery command as a person reads it: its shell line,
// or its argv joined.
func commandLine(p command.Program) string {
	if p.Shell != "" {
		return p.Shell
	}
	return strings.Join(p.Argv, " ")
}

// receiptText is one push receipt in a line: "webhook undeliverable after
// 1 attempt: HTTP 410 Gone (at …)".
func receiptText(r vigil.Receipt) string {
	s := r.Channel + " " + r.Status
	if r.Attempts > 0 {
		s += " after " + strconv.Itoa(r.Attempts) + " attempt"
		if r.Attempts > 1 {
			s += "s"
		}
	}
	if r.Detail != "" {
		s += ": " + oneLine(r.Detail)
	}
	if !r.UpdatedAt.IsZero() {
		s += " (" + wording.Time(r.UpdatedAt) + ")"
	}
	return s
}

// lastCheck is when w was last probed: the live time the daemon reports,
// or, for a watch stored before it was kept, its last observation's.
func lastCheck(w *vigil.Watch) time.Time {
	if o := w.LastObservation; o != nil && o.At.After(w.CheckedAt) {
		return o.At
	}
	return w.CheckedAt
}

func timeOrEmpty(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return wording.Time(t)
}

func formatLabels(ls map[string]string) string {
	if len(ls) == 0 {
		return ""
	}
	ks := make([]string, 0, len(ls))
	for k := range ls {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	for i, k := range ks {
		ks[i] = k + "=" + ls[k]
	}
	return strings.Join(ks, " ")
}

func newWhyCmd(e *env) *cobra.Command {
	cmd := &cobra.Command{
		Use:     "why ID",
		Short:   "Say, in one sentence, why a watch has not settled (or how it did)",
		GroupID: "watch",
		Args:    cobra.ExactArgs(1),
	}
	return withClient(e, cmd, "print JSON", func(cmd *cobra.Command, c *client.Client, args []string, asJSON bool) error {
		why, err := c.Why(cmd.Context(), args[0])
		if err != nil {
			return callErr(cmd, err)
		}
		if asJSON {
			return writeJSON(e.stdout, why)
		}
		fmt.Fprintln(e.stdout, oneLine(why.Sentence))
		if w := why.Watch; w != nil {
			if o := w.LastObservation; o != nil {
				fmt.Fprintf(e.stdout, "Last check, %s: %s\n", timeOrEmpty(lastCheck(w)), oneLine(observationText(o)))
			} else if w.Kind != vigil.KindTimer {
				fmt.Fprintln(e.stdout, "No check has been made yet.")
			}
			// A pending watch's sentence says it already.
			if w.Errors > 0 && w.State != vigil.StatePending {
				fmt.Fprintf(e.stdout, "Errors: %s.\n", oneLine(wording.Errors(w)))
			}
		}
		return nil
	})
}

func newCancelCmd(e *env) *cobra.Command {
	cmd := &cobra.Command{
		Use:     "cancel ID",
		Short:   "Stop a pending watch (leaves one neutral line in its mailbox)",
		GroupID: "watch",
		Args:    cobra.ExactArgs(1),
	}
	return withClient(e, cmd, "print the watch as JSON", func(cmd *cobra.Command, c *client.Client, args []string, asJSON bool) error {
		before, err := c.Watch(cmd.Context(), args[0])
		if err != nil {
			return callErr(cmd, err)
		}
		w, err := c.Cancel(cmd.Context(), args[0])
		if err != nil {
			return callErr(cmd, err)
		}
		if asJSON {
			return writeJSON(e.stdout, w)
		}
		if !before.State.Terminal() && w.State == vigil.StateCancelled {
			fmt.Fprintf(e.stdout, "Cancelled %s: %s\n", term(w.ID), oneLine(outcomeSentence(w)))
		} else {
			fmt.Fprintf(e.stdout, "%s had already settled (%s): %s\n", term(w.ID), term(string(w.State)), oneLine(outcomeSentence(w)))
		}
		return nil
	})
}

func newCheckCmd(e *env) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "check ID",
		Short: "Probe a pending watch now, once, and show what it found",
		Long: `Probe a pending watch now, once, instead of at its next check, and print
what that probe found (the watch's state and its last observation). A watch
that has already settled is refused (conflict), as is a timer, which the clock
alone answers.`,
		GroupID: "watch",
		Args:    cobra.ExactArgs(1),
	}
	return withClient(e, cmd, "print the watch as JSON", func(cmd *cobra.Command, c *client.Client, args []string, asJSON bool) error {
		w, err := c.Check(cmd.Context(), args[0])
		if err != nil {
			return callErr(cmd, err)
		}
		if asJSON {
			return writeJSON(e.stdout, w)
		}
		if w.State.Terminal() {
			fmt.Fprintf(e.stdout, "Checked %s: %s: %s\n", term(w.ID), term(string(w.State)), oneLine(outcomeSentence(w)))
			return nil
		}
		summary := "no observation yet"
		if o := w.LastObservation; o != nil {
			summary = o.Summary
			if summary == "" {
				summary = o.Reason
			}
		}
		fmt.Fprintf(e.stdout, "Checked %s: still %s after %d checks: %s\n", term(w.ID), term(string(w.State)), w.Polls, oneLine(summary))
		return nil
	})
}

func newRmCmd(e *env) *cobra.Command {
	var cf clientFlags
	cmd := &cobra.Command{
		Use:     "rm ID",
		Short:   "Remove a watch (a pending one is cancelled first); its messages stay",
		GroupID: "watch",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := cf.client(e)
			if err != nil {
				return err
			}
			if err := c.Delete(cmd.Context(), args[0]); err != nil {
				return callErr(cmd, err)
			}
			fmt.Fprintf(e.stdout, "Removed %s.\n", term(args[0]))
			return nil
		},
	}
	cf.bind(cmd, false)
	return cmd
}

// withClient completes cmd as a command that calls the daemon: the client
// flags, --json (described by jsonHelp), and a RunE that makes the client
// from them and hands it to run.
func withClient(e *env, cmd *cobra.Command, jsonHelp string, run func(cmd *cobra.Command, c *client.Client, args []string, asJSON bool) error) *cobra.Command {
	var (
		cf     clientFlags
		asJSON bool
	)
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		c, err := cf.client(e)
		if err != nil {
			return err
		}
		return run(cmd, c, args, asJSON)
	}
	cf.bind(cmd, false)
	cmd.Flags().BoolVar(&asJSON, "json", false, jsonHelp)
	return cmd
}
