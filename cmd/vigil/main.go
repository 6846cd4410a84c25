// Command vigil is the vigil watch service: "vigil serve" runs the daemon,
// and the other commands talk to it. See package cli.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/vigil-run/vigil/cli"
)

func main() {
	// This binary runs `vigil reap` (its deliveries' programs run under
	// it); a program that embeds the daemon does not say so.
	cli.ServeReap()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	// The first signal asks for a graceful shutdown; a second one ends the
	// process at once (the signals' default), whatever is still running.
	context.AfterFunc(ctx, stop)
	err := cli.New(os.Stdout, os.Stderr).ExecuteContext(ctx)
	stop()
	os.Exit(cli.ExitCode(err))
}
