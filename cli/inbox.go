package cli

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/vigil-run/vigil"
	"github.com/vigil-run/vigil/wording"
)

// Bounds of notice: it must never hold up or fail an agent's turn.
const (
	noticeTimeout = 3 * time.Second
	noticeLimit   = 100
	noticeReader  = "notice"
	// noticeDetailLines bounds what notice shows under each message's
	// sentence (each line is bounded by wording.DetailLineBytes).
	noticeDetailLines = 4
	// inboxAckTimeout bounds how long inbox tries to ack what it wrote
	// while the daemon cannot answer: a restart takes a few seconds.
	inboxAckTimeout = time.Minute
)

func newInboxCmd(e *env) *cobra.Command {
	var (
		cf        clientFlags
		recipient string
		reader    string
		wait      string
		noAck     bool
		asJSON    bool
	)
	cmd := &cobra.Command{
		Use:     "inbox",
		Short:   "Read a recipient's new messages",
		GroupID: "mail",
		Long: `Read the messages a recipient has not yet read as --reader, and mark them
read (unless --no-ack). Each named reader sees each message once.

The messages are marked read only once they are written out: when writing
fails (a full disk, a closed pipe), inbox exits 1 and they stay unread.
While the daemon cannot answer, marking them read is tried again, as a read
is, for up to a minute; if it still fails, or the daemon refuses it, inbox
says that they will be shown again and exits non-zero (1 for the daemon's
internal error, else 2).

With --wait, while the daemon cannot answer (it is restarting, a connection
dropped, or it asks to slow down), inbox tries again after a short pause, as
vigil wait does, saying so once on stderr, until --wait passes or Ctrl-C.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var d time.Duration
			if wait != "" {
				var err error
				if d, err = vigil.ParseDuration(wait); err != nil {
					return usageErr(fmt.Errorf("--wait: %v", err))
				}
			}
			c, err := cf.client(e)
			if err != nil {
				return err
			}
			r := firstNonEmpty(recipient, defaultRecipient(e))
			// While the daemon cannot answer, the long-poll is tried
			// again as wait's is, within --wait; without it, inbox reads
			// once. A read acks nothing, so trying it again is safe.
			rt := e.retrier(cmp.Or(d, lookOnce))
			var page vigil.MessagesPage
			for {
				left := rt.deadline.Sub(rt.clk.Now())
				// Read without ack: the cursor moves only once the
				// messages are written out (below).
				req := vigil.MessagesRequest{Recipient: r, Reader: reader, Wait: min(max(left, 0), waitPoll)}
				if page, err = c.Messages(cmd.Context(), req); err != nil {
					if err := rt.pause(cmd.Context(), err); err != nil {
						return callErr(cmd, err)
					}
					continue
				}
				rt.answered()
				if len(page.Messages) > 0 || rt.over() {
					break
				}
			}
			switch {
			case asJSON:
				err = writeJSON(e.stdout, page)
			case len(page.Messages) == 0:
				_, err = fmt.Fprintf(e.stdout, "No new messages for %s.\n", term(r))
			default:
				err = printMessages(e.stdout, page.Messages)
			}
			if err != nil {
				return &ExitError{Code: ExitFailed, Err: fmt.Errorf("cannot write the messages, so they stay unread: %w", err)}
			}
			if noAck || len(page.Messages) == 0 {
				return nil
			}
			// The messages are written: an ack failed for now (the daemon
			// restarting, a dropped connection, rate_limited) is tried
			// again as the reads are, within inboxAckTimeout, or they
			// would be shown again. Sending it again is safe, also after
			// an ack that may have been made (a 503 whose commit went
			// through, a connection dropped before the answer): it is
			// the same ack, to the same seq, and an ack does nothing but
			// move the reader's cursor to seq, never back (the engine's
			// Ack calls the store's MessagesAck, which keeps the greater
			// in every store, as storetest's Mailbox holds), so a second
			// changes nothing. A refusal (a 4xx but 429) ends it at once.
			ack := vigil.AckRequest{Recipient: r, Reader: reader, Seq: page.Messages[len(page.Messages)-1].Seq}
			if err := e.retrier(inboxAckTimeout).do(cmd.Context(), func() error { return c.Ack(cmd.Context(), ack) }); err != nil {
				fmt.Fprintln(e.stderr, "vigil: the messages were written, but marking them read failed: they will be shown again.")
				return callErr(cmd, err)
			}
			return nil
		},
	}
	cf.bind(cmd, false)
	fl := cmd.Flags()
	fl.StringVar(&recipient, "for", "", "whose mailbox (VIGIL_RECIPIENT; default your user name)")
	fl.StringVar(&reader, "reader", "cli", "reader name: each reader sees each message once")
	fl.StringVar(&wait, "wait", "", "if there is nothing new, wait up to this long for a message")
	fl.BoolVar(&noAck, "no-ack", false, "do not mark the messages read")
	fl.BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

// printMessages writes a table of messages in one write, and returns its
// error.
func printMessages(out io.Writer, ms []*vigil.Message) error {
	var b bytes.Buffer
	tw := tabwriter.NewWriter(&b, 0, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "SEQ\tTYPE\tAT\tWATCH\tTEXT")
	for _, m := range ms {
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\n", m.Seq, term(string(m.Type)), timeOrEmpty(m.CreatedAt), term(firstNonEmpty(m.WatchID, "-")), oneLine(m.Text))
	}
	tw.Flush()
	_, err := out.Write(b.Bytes())
	return err
}

func newNoticeCmd(e *env) *cobra.Command {
	var (
		cf        clientFlags
		recipient string
	)
	cmd := &cobra.Command{
		Use:     "notice",
		Short:   "Print new messages as one <vigil> block for an agent's prompt, and mark them read",
		GroupID: "mail",
		Long: `Print a recipient's unread messages as one <vigil>…</vigil> block and mark
them read (reader "notice"). Meant for an agent harness hook run at the start
of each turn. Each message shows its sentence, and under it what it carries
besides (a note's body, a folder report's summary and the first lines of its
review, a failure's excerpt), a few lines at most.

It prints nothing and exits 0 when there is nothing new, and also when the
daemon is down, unreachable or busy: it never fails a turn. When it has no
token, or the daemon refuses its token (or the token is for other
recipients), it says so in one line on stderr (still exiting 0), so a
misconfigured hook shows. The messages are marked read only once the block
is written: when writing it fails, it says so on stderr (still exiting 0)
and they stay unread for the next turn. Marking them read that fails for now
is tried again, quietly, within the same 3 s; if it still fails, the next
turn shows them again.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, cancel := context.WithTimeout(cmd.Context(), noticeTimeout)
			defer cancel()
			// Its ack is tried again within the same budget, quietly.
			rt := e.retrier(noticeTimeout)
			rt.retrying = nil
			c, err := cf.client(e)
			if err != nil {
				// No token (or none readable): the hook is misconfigured.
				fmt.Fprintf(e.stderr, "vigil notice: %s\n", oneLine(err.Error()))
				return nil
			}
			defer c.CloseIdleConnections()
			r := firstNonEmpty(recipient, defaultRecipient(e))
			page, err := c.Messages(ctx, vigil.MessagesRequest{Recipient: r, Reader: noticeReader, Limit: noticeLimit})
			switch code := vigil.ErrorCode(err); {
			case err == nil:
			case code == vigil.CodeUnauthorized || code == vigil.CodeForbidden:
				fmt.Fprintf(e.stderr, "vigil notice: the daemon refused the token (%s): %s\n", code, oneLine(vigil.ErrorMessage(err)))
				return nil
			case code == vigil.CodeNotFound:
				// A mailbox is made on first use: only a token scoped to
				// other recipients gets not_found.
				fmt.Fprintf(e.stderr, "vigil notice: the token may not read %s's messages (not_found)\n", term(r))
				return nil
			}
			if err != nil || len(page.Messages) == 0 {
				return nil
			}
			if _, err := io.WriteString(e.stdout, noticeBlock(r, page.Messages)); err != nil {
				// Not shown, so not read: the next turn shows them.
				fmt.Fprintf(e.stderr, "vigil notice: cannot write the messages, so they stay unread: %s\n", oneLine(err.Error()))
				return nil
			}
			// An ack that failed for now (a dropped connection, the daemon
			// restarting, rate_limited) is tried again, as inbox's is,
			// within what is left of noticeTimeout: sending the same ack
			// again is safe (see inbox). One that still fails shows the
			// messages again next turn: better twice than never.
			ack := vigil.AckRequest{Recipient: r, Reader: noticeReader, Seq: page.Messages[len(page.Messages)-1].Seq}
			_ = rt.do(ctx, func() error { return c.Ack(ctx, ack) })
			return nil
		},
	}
	cf.bind(cmd, false)
	cmd.Flags().StringVar(&recipient, "for", "", "whose mailbox (VIGIL_RECIPIENT; default your user name)")
	return cmd
}

// noticeBlock renders messages as the one block notice prints.
func noticeBlock(recipient string, ms []*vigil.Message) string {
	var b strings.Builder
	b.WriteString("<vigil>\n")
	noun := "messages"
	if len(ms) == 1 {
		noun = "message"
	}
	fmt.Fprintf(&b, "%d new %s for %s from vigil (outcomes of your watches, notes left for you):\n", len(ms), noun, term(recipient))
	for _, m := range ms {
		fmt.Fprintf(&b, "- [%s] %s", term(string(m.Type)), oneLine(m.Text))
		if m.WatchID != "" {
			fmt.Fprintf(&b, " (watch %s)", term(m.WatchID))
		}
		b.WriteString("\n")
		for _, l := range wording.Detail(m, noticeDetailLines) {
			fmt.Fprintf(&b, "    %s\n", term(l))
		}
	}
	b.WriteString("</vigil>\n")
	return b.String()
}
