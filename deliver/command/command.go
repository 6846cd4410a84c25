// Package command holds the exec push channels. The command channel runs a
// program with a settled watch's outcome JSON on stdin and VIGIL_WATCH_ID,
// VIGIL_STATE and VIGIL_CHAIN_DEPTH in its environment. The resume channel
// (Resume) starts a new turn in a saved agent session: it runs the
// harness's resume command (or the watch's argv template) with the
// outcome as whole arguments, stdin empty and the same environment. It runs the way command
// probes do (internal/proc's Runner): in its own process group, with a
// minimal environment, bounded output and a timeout that terminates the
// whole group. Its exit status is the receipt: 0 is delivered; any other
// exit, a timeout or a signal is undeliverable. A command is never
// retried once started: it may have done part of its work. One the daemon
// did not start because it was stopping runs at the next start.
package command

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/vigil-run/vigil/deliver"
	runner "github.com/vigil-run/vigil/internal/proc"
)

// Config configures a Channel.
type Config struct {
	// Runner runs the programs; its zero value uses the default kill grace.
	Runner runner.Runner
	// Turns, when set, makes the resumes of one session wait for each
	// other across the daemons that share a database (the replicas on
	// PostgreSQL), beside the turn Resume keeps in this process. Nil: in
	// this process only (SQLite: one daemon).
	Turns Turns
}

// Turns hands out the turns of agent sessions across daemons (on
// PostgreSQL, postgres.Store.Turn).
type Turns interface {
	// Turn waits until this daemon holds the turn key names (one at a
	// time among the daemons), or until ctx ends (its error), and returns
	// what gives it up. A daemon that dies gives its turns up. waiting,
	// when set, is called once when Turn starts to wait.
	Turn(ctx context.Context, key string, waiting func()) (release func(), err error)
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
	return run(ctx, c.cfg.Runner, "command", o.Program, d, d.Payload, o.CommandTimeout())
}

// Resume is the resume deliver.Channel: one run of the agent harness's
// resume command, as the command channel runs its program.
type Resume struct {
	cfg Config

	mu sync.Mutex
	// busy holds, by session (sessionKey), what closes when the run that
	// resumes it ends: one turn of a session at a time.
	busy map[string]chan struct{}
	// waiting, when set (tests), is called when a run waits for another
	// of its session.
	waiting func()
}

// sessionKey names the session o resumes: the adapter and the session id,
// or the template and the directory it runs in (a template names its
// session among its arguments).
func sessionKey(o *deliver.ResumeOptions) string {
	if o.Harness != "" {
		return o.Harness + "\x00" + o.Session
	}
	return strings.Join(append([]string{o.Cwd}, o.Argv...), "\x00")
}

// hold waits until no other run resumes the session key names and returns
// what lets the next one go; ctx's error when it ends first, and
// deliver.ErrStopping when stopping closes first (or has closed). With
// Config.Turns it waits first for the runs of this process, then for
// those of the other daemons: only one waiter by session asks the
// database.
func (c *Resume) hold(ctx context.Context, key string, stopping <-chan struct{}) (func(), error) {
	local, err := c.holdHere(ctx, key, stopping)
	if err != nil || c.cfg.Turns == nil {
		return local, err
	}
	tctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-stopping:
			cancel()
		case <-tctx.Done():
		}
	}()
	release, err := c.cfg.Turns.Turn(tctx, key, c.waiting)
	if err != nil {
		local()
		select {
		case <-stopping:
			return nil, deliver.ErrStopping
		default:
		}
		if cerr := ctx.Err(); cerr != nil {
			return nil, cerr
		}
		return nil, err
	}
	return func() {
		release()
		local()
	}, nil
}

// holdHere is hold among the runs of this process.
func (c *Resume) holdHere(ctx context.Context, key string, stopping <-chan struct{}) (func(), error) {
	for {
		select {
		case <-stopping:
			return nil, deliver.ErrStopping
		default:
		}
		c.mu.Lock()
		busy, held := c.busy[key]
		if !held {
			if c.busy == nil {
				c.busy = map[string]chan struct{}{}
			}
			busy = make(chan struct{})
			c.busy[key] = busy
			c.mu.Unlock()
			return func() {
				c.mu.Lock()
				delete(c.busy, key)
				c.mu.Unlock()
				close(busy)
			}, nil
		}
		c.mu.Unlock()
		if c.waiting != nil {
			c.waiting()
		}
		select {
		case <-busy:
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-stopping:
			return nil, deliver.ErrStopping
		}
	}
}

var (
	_ deliver.Channel = (*Resume)(nil)
	_ deliver.Waiter  = (*Resume)(nil)
)

// Wait implements deliver.Waiter: it waits until no other run resumes the
// session d resumes, and returns what lets the next one go.
func (c *Resume) Wait(ctx context.Context, d *deliver.Delivery) (func(), error) {
	o := d.Options.Resume
	if o == nil {
		return func() {}, nil
	}
	return c.hold(ctx, sessionKey(o), d.Stopping)
}

// NewResume returns a resume channel.
func NewResume(cfg Config) *Resume { return &Resume{cfg: cfg} }

// Send implements deliver.Channel: one resumed turn. Like a command it is
// never retried: the agent may have done part of its work.
func (c *Resume) Send(ctx context.Context, d *deliver.Delivery) (bool, error) {
	o := d.Options.Resume
	if o == nil || !o.Runs(d.Watch.State) {
		return false, errors.New("the delivery options resume no session for a " + string(d.Watch.State) + " outcome")
	}
	p := deliver.NewPayload(d.Watch, d.MessageID)
	prog, err := o.Program(&p)
	if err != nil {
		return false, err
	}
	// Two turns of one session at once would both start from the same
	// history, each blind to the other's outcome: the second waits (here,
	// unless the dispatcher waited already: Wait). One whose turn comes
	// once the daemon is stopping starts nothing: the grace is for the
	// runs in flight, and would cut a turn it started.
	if !d.Waited {
		release, err := c.hold(ctx, sessionKey(o), d.Stopping)
		if err != nil {
			// Nothing ran: it may be tried again.
			return true, fmt.Errorf("waiting for another resume of the same session: %w", err)
		}
		defer release()
	}
	return run(ctx, c.cfg.Runner, "resume command", prog, d, nil, o.ResumeTimeout())
}

// run runs p once for d with the VIGIL_ variables added to its
// environment, and says what its exit means: nil for status 0, never a
// retry once it started. One whose turn comes once the daemon is stopping
// (d.Stopping), or whose context has ended, starts nothing and may be
// tried again (the next start runs it): the grace is for the runs in
// flight, and would cut one it started, which may have done its work and
// is never run again.
func run(ctx context.Context, r runner.Runner, what string, p runner.Program, d *deliver.Delivery, stdin []byte, timeout time.Duration) (bool, error) {
	select {
	case <-d.Stopping:
		return true, deliver.ErrStopping
	default:
	}
	if err := ctx.Err(); err != nil {
		return true, fmt.Errorf("the %s was not started: %w", what, err)
	}
	p.Env = maps.Clone(p.Env)
	if p.Env == nil {
		p.Env = map[string]string{}
	}
	p.Env["VIGIL_WATCH_ID"] = d.Watch.ID
	p.Env["VIGIL_STATE"] = string(d.Watch.State)
	p.Env["VIGIL_MESSAGE_ID"] = d.MessageID
	p.Env["VIGIL_CHAIN_DEPTH"] = strconv.Itoa(d.Watch.ChainDepth + 1)
	out, err := r.Run(ctx, p, stdin, timeout)
	if err != nil {
		if cerr := ctx.Err(); cerr != nil && errors.Is(err, cerr) {
			// Its context ended as it was started: it never ran.
			return true, fmt.Errorf("the %s was not started: %w", what, cerr)
		}
		return false, fmt.Errorf("the %s could not be run: %v", what, err)
	}
	if out.Ended != "" {
		return false, errors.New("the " + what + " " + out.Ended)
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
