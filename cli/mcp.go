package cli

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"strconv"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/spf13/cobra"

	"github.com/vigil-run/vigil"
	"github.com/vigil-run/vigil/mcpserver"
)

func newMCPCmd(e *env) *cobra.Command {
	var (
		cf        clientFlags
		recipient string
		channel   bool
	)
	cmd := &cobra.Command{
		Use:   "mcp",
		Short: "Serve vigil's MCP tools over stdio, for an agent (proxies to the running daemon)",
		Long: `Serve vigil's Model Context Protocol tools (watch_create, watch_create_many,
watch_list, watch_get, watch_why, watch_cancel, watch_wait, inbox_read, note_write) and the inbox resource over
stdin and stdout, for an MCP client that starts its servers as commands. Every
call goes to the running daemon, found as the other commands find it (--addr,
--token, --data-dir and their VIGIL_… variables).

Tools act for --for (VIGIL_RECIPIENT, else your user name) unless a call names
another recipient. Give each agent session or project its own, and read the
same one in the harness hook:

  claude mcp add vigil -- vigil mcp --for my-project
  vigil notice --for my-project      # as a session-start / prompt-submit hook

With --channel it is also a Claude Code channel (a research preview of
Claude Code 2.1.80 and later): each new message of --for is pushed into the
running session as it lands, once. It speaks MCP up to 2025-11-25 (on
2026-07-28 Claude Code skips a channel), and leaves what it pushed unread
for the notice hook, which shows it again at the next prompt: Claude Code
drops the events unless launched with the channel enabled, and cannot say.

  claude mcp add vigil -- vigil mcp --channel --for my-project
  claude --dangerously-load-development-channels server:vigil

The daemon also serves the same tools over streamable HTTP at /mcp. See
docs/agents.md.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := cf.client(e)
			if err != nil {
				return err
			}
			defer c.CloseIdleConnections()
			depth, _ := strconv.Atoi(e.getenv("VIGIL_CHAIN_DEPTH"))
			opts := &mcpserver.Options{
				DefaultRecipient: firstNonEmpty(recipient, defaultRecipient(e)),
				// stdout carries the protocol: only warnings, on stderr.
				Logger:     slog.New(slog.NewTextHandler(e.stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
				Version:    vigil.Version(),
				ChainDepth: max(depth, 0),
				Channel:    channel,
			}
			if wd, err := os.Getwd(); err == nil {
				// A harness starts its MCP servers in its project: a
				// session named by watch_create's wake resumes there.
				opts.WakeDir = wd
			}
			err = mcpserver.Run(cmd.Context(), c, opts, &mcp.IOTransport{Reader: io.NopCloser(cmd.InOrStdin()), Writer: nopWriteCloser{e.stdout}})
			if err == nil || cmd.Context().Err() != nil || errors.Is(err, context.Canceled) || errors.Is(err, io.EOF) || errors.Is(err, mcp.ErrConnectionClosed) {
				// The client went away or asked us to stop.
				return nil
			}
			return &ExitError{Code: ExitFailed, Err: err}
		},
	}
	cf.bind(cmd, false)
	cmd.Flags().BoolVar(&channel, "channel", false, "push each new message of --for into the session as a Claude Code channel event (research preview)")
	cmd.Flags().StringVar(&recipient, "for", "", "recipient the tools act for unless a call names one (VIGIL_RECIPIENT; default your user name)")
	return cmd
}

// nopWriteCloser is a writer whose Close does nothing: the command does
// not own its stdout.
type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }
