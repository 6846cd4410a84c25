// Package command is the command push channel: it runs a program with a
// settled watch's outcome JSON on stdin and VIGIL_WATCH_ID, VIGIL_STATE
// and VIGIL_CHAIN_DEPTH in its environment. It runs the way command
// probes do (internal/proc's Runner): in its own process group, with a
// minimal environment, bounded output and a timeout that terminates the
// whole group. Its exit status is the receipt: 0 is delivered; any other
// exit, a timeout or a signal is undeliverable. A command is never
// retried: it may have done part of its work.
package command

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strconv"
	"strings"

	"github.com/vigil-run/vigil/deliver"
	runner "github.com/vigil-run/vigil/internal/proc"
)

// Config configures a Channel.
type Config struct {
	// Runner runs the programs; its zero value uses the default kill grace.
	Runner runner.Runner
}

// Channel is the command deliver.Channel.
type Channel struct {
	cfg Config
}

var _ deliver.Channel = (*Channel)(nil)

// New returns a command channel.
func New(cfg Config) *Channel { return &Channel{cfg: cfg} }

// Send implements deliver.Channel: one run of the program.
func (c *Channel) Send(ctx context.Context, d *deliver.Delivery) (bool, error) {
	o := d.Options.Command.For(d.Watch.State)
	if o == nil {
		return false, errors.New("no command in the delivery options runs for a " + string(d.Watch.State) + " outcome")
	}
	p := o.Program
	p.Env = maps.Clone(p.Env)
	if p.Env == nil {
		p.Env = map[string]string{}
	}
	p.Env["VIGIL_WATCH_ID"] = d.Watch.ID
	p.Env["VIGIL_STATE"] = string(d.Watch.State)
	p.Env["VIGIL_MESSAGE_ID"] = d.MessageID
	p.Env["VIGIL_CHAIN_DEPTH"] = strconv.Itoa(d.Watch.ChainDepth + 1)
	out, err := c.cfg.Runner.Run(ctx, p, d.Payload, o.CommandTimeout())
	if err != nil {
		return false, fmt.Errorf("the command could not be run: %v", err)
	}
	if out.Ended != "" {
		return false, errors.New("the command " + out.Ended)
	}
	if out.ExitCode != 0 {
		msg := fmt.Sprintf("exit status %d", out.ExitCode)
		if s := lastLine(out.Stderr); s != "" {
			msg += ": " + s
		}
		return false, errors.New(msg)
	}
	return false, nil
}

func lastLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		s = s[i+1:]
	}
	if len(s) > 200 {
		s = s[:200] + "…"
	}
	return s
}
