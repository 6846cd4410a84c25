// Package cli is the vigil command: cobra commands that talk to a vigil
// daemon through package client, and serve, the one command that builds a
// daemon. Writers are injected (New), so tests drive the real command tree.
//
// Exit codes: 0 success; 2 a usage, connection or authentication error, a
// request the daemon refused, or a data dir serve refuses to start from; 1
// an internal error or a daemon that stopped on an error. wait (and add --wait) exit with the watch's state:
// 0 fired, 1 failed, 4 cancelled or errored, 8 still pending when
// --timeout ran out, 124 expired.
package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/user"
	"strings"

	"github.com/mattn/go-isatty"
	"github.com/spf13/cobra"

	"github.com/vigil-run/vigil"
	"github.com/vigil-run/vigil/client"
	"github.com/vigil-run/vigil/daemon"
)

// Exit codes of the vigil command.
const (
	ExitOK          = 0
	ExitFailed      = 1 // wait: the watch failed; otherwise an internal error
	ExitUsage       = 2 // usage, connection or authentication error
	ExitStopped     = 4 // wait: the watch was cancelled or errored
	ExitPending     = 8 // wait: still pending (or unwatchable) when --timeout ran out
	ExitExpired     = 124
	ExitInterrupted = 130
)

// ExitError is an error that carries the process exit code. A nil Err
// exits quietly.
type ExitError struct {
	Code int
	Err  error
}

func (e *ExitError) Error() string {
	if e.Err == nil {
		return fmt.Sprintf("exit status %d", e.Code)
	}
	// A refusal may quote what the caller sent: escaped for the terminal.
	return term(describe(e.Err))
}

// Unwrap returns the cause.
func (e *ExitError) Unwrap() error { return e.Err }

// ExitCode returns the process exit code for an error returned by the
// command tree: 0 for nil, the code of an *ExitError, and 2 (usage) for
// anything else, such as an unknown flag.
func ExitCode(err error) int {
	if err == nil {
		return ExitOK
	}
	var e *ExitError
	if errors.As(err, &e) {
		return e.Code
	}
	return ExitUsage
}

// env is what the commands share: writers, the environment, how to tell a
// terminal, and the clock.
type env struct {
	stdout, stderr io.Writer
	getenv         func(string) string
	terminal       func(io.Writer) bool
	// clock tells the time and pauses between tries; nil is the real
	// one (clk).
	clock clock
}

// New returns the root vigil command writing to stdout and stderr. Run it
// with ExecuteContext; pass the error to ExitCode.
func New(stdout, stderr io.Writer) *cobra.Command {
	return newRoot(&env{stdout: stdout, stderr: stderr, getenv: os.Getenv, terminal: isTerminal})
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && (isatty.IsTerminal(f.Fd()) || isatty.IsCygwinTerminal(f.Fd()))
}

func newRoot(e *env) *cobra.Command {
	root := &cobra.Command{
		Use:   "vigil",
		Short: "A self-hosted watch service for agents and automation",
		Long: `vigil watches a condition for you — a timer, an HTTP endpoint, a port, a file,
a command — and delivers the outcome once, to a mailbox, when it settles or
its deadline passes. Start the daemon with "vigil serve"; every other command
talks to it.`,
		Version:       vigil.Version(),
		SilenceUsage:  true,
		SilenceErrors: false,
	}
	root.SetOut(e.stdout)
	root.SetErr(e.stderr)
	root.SetErrPrefix("vigil:")
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		return &ExitError{Code: ExitUsage, Err: fmt.Errorf("%w (see %s --help)", err, c.CommandPath())}
	})
	root.AddGroup(&cobra.Group{ID: "watch", Title: "Watches:"}, &cobra.Group{ID: "mail", Title: "Mailbox:"}, &cobra.Group{ID: "daemon", Title: "Daemon:"})
	root.AddCommand(
		newServeCmd(e),
		newAddCmd(e),
		newListCmd(e),
		newShowCmd(e),
		newWhyCmd(e),
		newCancelCmd(e),
		newCheckCmd(e),
		newRmCmd(e),
		newWaitCmd(e),
		newInboxCmd(e),
		newNoticeCmd(e),
		newNoteCmd(e),
		newStatusCmd(e),
		newServiceCmd(e),
		newBackupCmd(e),
		newMCPCmd(e),
		newTokenCmd(e),
		newSuperviseCmd(e),
		newReapCmd(),
	)
	return root
}

// clientFlags are the flags of every command that talks to the daemon.
type clientFlags struct {
	addr    string
	token   string
	dataDir string
}

func (f *clientFlags) bind(cmd *cobra.Command, persistent bool) {
	fs := cmd.Flags()
	if persistent {
		fs = cmd.PersistentFlags()
	}
	fs.StringVar(&f.addr, "addr", "", "daemon address, host:port or http:// URL (VIGIL_ADDR; default "+daemon.DefaultListen+")")
	fs.StringVar(&f.token, "token", "", "bearer token (VIGIL_TOKEN; default: the admin token in the data dir)")
	fs.StringVar(&f.dataDir, "data-dir", "", "data dir holding admin.token (VIGIL_DATA_DIR)")
}

// client returns a client of the daemon the flags and environment name.
func (f *clientFlags) client(e *env) (*client.Client, error) {
	addr := firstNonEmpty(f.addr, e.getenv("VIGIL_ADDR"), daemon.DefaultListen)
	token := firstNonEmpty(f.token, e.getenv("VIGIL_TOKEN"))
	if token == "" {
		dir := firstNonEmpty(f.dataDir, e.getenv("VIGIL_DATA_DIR"), daemon.DefaultDataDir(e.getenv))
		path := daemon.TokenPath(dir)
		t, err := daemon.ReadToken(path)
		if err != nil {
			if errors.Is(err, os.ErrNotExist) {
				return nil, usageErr(fmt.Errorf("no token: pass --token or set VIGIL_TOKEN, or start the daemon with \"vigil serve\", which writes %s", path))
			}
			return nil, usageErr(fmt.Errorf("no token: %v", describe(err)))
		}
		token = t
	}
	c, err := client.New(addr, token, nil)
	if err != nil {
		return nil, usageErr(err)
	}
	return c, nil
}

// defaultRecipient is VIGIL_RECIPIENT, else the user's name made safe for
// a recipient name.
func defaultRecipient(e *env) string {
	if r := e.getenv("VIGIL_RECIPIENT"); r != "" {
		return r
	}
	name := e.getenv("USER")
	if name == "" {
		if u, err := user.Current(); err == nil {
			name = u.Username
		}
	}
	var b strings.Builder
	for _, c := range name {
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', strings.ContainsRune("._:@+-", c):
			b.WriteRune(c)
		default:
			b.WriteByte('-')
		}
	}
	if b.Len() == 0 {
		return "me"
	}
	return b.String()
}

func firstNonEmpty(s ...string) string {
	for _, x := range s {
		if x != "" {
			return x
		}
	}
	return ""
}

// describe returns the one sentence to show for err: a *vigil.Error's
// message (with the field at fault), "internal error" for internal ones.
func describe(err error) string {
	var ve *vigil.Error
	if errors.As(err, &ve) {
		msg := vigil.ErrorMessage(err)
		if ve.Code == vigil.CodeInternal && ve.Message != "" {
			msg = ve.Message
		}
		if ve.Field != "" && !strings.Contains(msg, ve.Field) {
			msg += " (field " + ve.Field + ")"
		}
		return msg
	}
	return err.Error()
}

// usageErr marks err as a usage error (exit 2).
func usageErr(err error) error { return &ExitError{Code: ExitUsage, Err: err} }

// callErr maps an error from the daemon to an exit: an interrupted call
// exits 130 quietly, an internal error 1, anything else (unreachable,
// unauthorized, a refused request) 2.
func callErr(cmd *cobra.Command, err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, context.Canceled) && cmd.Context().Err() != nil {
		return quiet(cmd, ExitInterrupted)
	}
	if vigil.ErrorCode(err) == vigil.CodeInternal {
		return &ExitError{Code: ExitFailed, Err: err}
	}
	return &ExitError{Code: ExitUsage, Err: err}
}

// quiet returns an exit with code and no message.
func quiet(cmd *cobra.Command, code int) error {
	cmd.SilenceErrors = true
	return &ExitError{Code: code}
}

// writeJSON writes v as indented JSON, with control characters spelled
// as JSON escapes (termJSON): the same value, safe on a terminal.
func writeJSON(w io.Writer, v any) error {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return err
	}
	_, err := w.Write(termJSON(b.Bytes()))
	return err
}
