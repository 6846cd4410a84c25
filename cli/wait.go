package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/spf13/cobra"

	"github.com/vigil-run/vigil"
	"github.com/vigil-run/vigil/client"
	"github.com/vigil-run/vigil/wording"
)

// waitPoll bounds one long-poll of wait; the daemon bounds it too.
const waitPoll = 30 * time.Second

// liveWidth bounds the live status line so it never wraps on a common
// terminal (wrapping would break updating it in place).
const liveWidth = 78

func newWaitCmd(e *env) *cobra.Command {
	var (
		cf      clientFlags
		timeout string
		asJSON  bool
	)
	cmd := &cobra.Command{
		Use:     "wait ID",
		Short:   "Wait until a watch settles; the exit code says how",
		GroupID: "watch",
		Long: `Wait until a watch settles, or --timeout passes, and print how it settled.
On a terminal a live status line is shown while waiting.

While the daemon cannot answer (it is restarting, a connection dropped, or it
asks to slow down), wait tries again after a short pause, saying so once on
stderr, and reads the watch first, so an outcome settled meanwhile is
reported: until the watch settles, --timeout passes or Ctrl-C. A wait begun
while the daemon cannot answer tries its first read so too.

Exit codes:
    0  fired
    1  failed
    2  usage or authentication error, a refused request, or no answer from
       the daemon still when --timeout ran out (with 0s, at the one look)
    4  cancelled or errored
    8  still pending (or unwatchable: a kind the daemon has no watcher for)
       when --timeout ran out
  124  expired`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var d time.Duration
			if timeout != "" {
				var err error
				if d, err = vigil.ParseDuration(timeout); err != nil {
					return usageErr(fmt.Errorf("--timeout: %v", err))
				}
				if d == 0 {
					d = lookOnce
				}
			}
			c, err := cf.client(e)
			if err != nil {
				return err
			}
			// The timeout bounds the first read's tries too.
			rt := e.retrier(d)
			w, err := readWatch(cmd.Context(), rt, c, args[0])
			if err != nil {
				return waitErr(cmd, err)
			}
			return waitAndReport(cmd, e, c, w, rt, asJSON)
		},
	}
	cf.bind(cmd, false)
	cmd.Flags().StringVar(&timeout, "timeout", "", "give up after this long (exit 8); 0s looks once without waiting; default: wait until the watch settles")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the watch as JSON")
	return cmd
}

// waitErr maps an error while waiting: 130 if interrupted, else 2, so no
// error is mistaken for an outcome.
func waitErr(cmd *cobra.Command, err error) error {
	if errors.Is(err, context.Canceled) && cmd.Context().Err() != nil {
		return quiet(cmd, ExitInterrupted)
	}
	return &ExitError{Code: ExitUsage, Err: err}
}

// lookOnce, as the timeout of a retrier, ends its tries at once: the
// watch is reported as it was read, without waiting: wait --timeout 0s.
const lookOnce time.Duration = -1

// waitAndReport waits for w to settle (or rt's deadline to pass), prints
// the result and returns the exit for its state.
func waitAndReport(cmd *cobra.Command, e *env, c *client.Client, w *vigil.Watch, rt *retrier, asJSON bool) error {
	ctx := cmd.Context()
	stop := func() {}
	if !asJSON && w.State == vigil.StatePending && !rt.over() && e.terminal(e.stdout) {
		stop = startLive(ctx, e.stdout, c, w)
	}
	final, err := waitFor(ctx, rt, c, w)
	stop()
	if err != nil {
		return waitErr(cmd, err)
	}
	if asJSON {
		if err := writeJSON(e.stdout, final); err != nil {
			return err
		}
	} else {
		fmt.Fprintln(e.stdout, resultLine(final))
	}
	if code := exitFor(final.State); code != ExitOK {
		return quiet(cmd, code)
	}
	return nil
}

// waitFor long-polls until w settles or rt's deadline passes.
//
// While the daemon cannot answer — it is stopping or starting (503
// unavailable), a long-poll's connection dropped, or it asks to slow down
// (429 rate_limited) — waitFor pauses (rt) and reads the watch again, so
// that a settlement in the gap is seen, then long-polls again: until the
// watch settles, the deadline passes or ctx ends. An outage ends once a
// long-poll answers. Every call is a GET, safe to repeat. Any other error
// (unauthorized, not_found, invalid_request) ends it at once, as does one
// once the deadline has passed.
func waitFor(ctx context.Context, rt *retrier, c *client.Client, w *vigil.Watch) (*vigil.Watch, error) {
	for unsettled(w.State) {
		poll := waitPoll
		if !rt.deadline.IsZero() {
			left := rt.deadline.Sub(rt.clk.Now())
			if left <= 0 {
				return w, nil
			}
			poll = min(poll, left)
		}
		next, err := c.Wait(ctx, w.ID, poll)
		if err != nil {
			if err := rt.pause(ctx, err); err != nil {
				return nil, err
			}
			if w, err = readWatch(ctx, rt, c, w.ID); err != nil {
				return nil, err
			}
			continue
		}
		w = next
		rt.answered()
	}
	return w, nil
}

// readWatch reads the watch id, trying again while the daemon cannot
// answer (rt.pause).
func readWatch(ctx context.Context, rt *retrier, c *client.Client, id string) (*vigil.Watch, error) {
	var w *vigil.Watch
	err := rt.do(ctx, func() (err error) {
		w, err = c.Watch(ctx, id)
		return err
	})
	if err != nil {
		return nil, err
	}
	return w, nil
}

// exitFor is wait's exit code for a state.
func exitFor(s vigil.State) int {
	switch s {
	case vigil.StateFired:
		return ExitOK
	case vigil.StateFailed:
		return ExitFailed
	case vigil.StateExpired:
		return ExitExpired
	case vigil.StatePending, vigil.StateUnwatchable:
		return ExitPending
	}
	return ExitStopped // cancelled, errored
}

// unsettled reports whether a watch in state s may still settle: pending,
// or unwatchable (a kind the daemon has no watcher for, which expires at
// its deadline; a cancel may end it sooner).
func unsettled(s vigil.State) bool {
	return s == vigil.StatePending || s == vigil.StateUnwatchable
}

// resultLine is the one line wait prints: the state and its sentence.
func resultLine(w *vigil.Watch) string {
	if w.State.Terminal() {
		return term(string(w.State)) + ": " + oneLine(outcomeSentence(w))
	}
	return term(string(w.State)) + ": " + oneLine(wording.Why(w))
}

// startLive shows a one-line status of w, updated in place from the event
// stream and once a second, until the returned stop is called; stop
// clears the line.
func startLive(ctx context.Context, out io.Writer, c *client.Client, w *vigil.Watch) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		start := time.Now()
		subject := wording.Subject(w)
		polls := w.Polls
		text := ""
		if o := w.LastObservation; o != nil {
			text = firstNonEmpty(o.Summary, o.Reason)
		}
		frames := []string{"⠋", "⠙", "⠹", "⠸", "⠼", "⠴", "⠦", "⠧", "⠇", "⠏"}
		frame := 0
		render := func() {
			line := fmt.Sprintf("%s waiting %s for %s", frames[frame%len(frames)], vigil.FormatDuration(time.Since(start).Truncate(time.Second)), subject)
			switch {
			case polls == 1:
				line += " · 1 check"
			case polls > 1:
				line += fmt.Sprintf(" · %d checks", polls)
			}
			if text != "" {
				line += " · " + text
			}
			fmt.Fprint(out, "\r\x1b[2K"+clipRunes(oneLine(line), liveWidth))
			frame++
		}
		events := make(chan vigil.Event)
		subDone := make(chan struct{})
		defer func() { <-subDone }()
		go func() {
			defer close(subDone)
			// Subscribing may take a moment; the line renders meanwhile.
			ch, err := c.Subscribe(ctx, vigil.EventFilter{WatchID: w.ID})
			if err != nil {
				return
			}
			for ev := range ch {
				select {
				case events <- ev:
				case <-ctx.Done():
					return
				}
			}
		}()
		tick := time.NewTicker(250 * time.Millisecond)
		defer tick.Stop()
		render()
		for {
			select {
			case <-ctx.Done():
				fmt.Fprint(out, "\r\x1b[2K")
				return
			case ev := <-events:
				if ev.Polls > 0 {
					polls = ev.Polls
				}
				if ev.Text != "" && !ev.Done {
					text = ev.Text
				}
				render()
			case <-tick.C:
				render()
			}
		}
	}()
	return func() {
		cancel()
		<-done
	}
}

func clipRunes(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return strings.TrimRight(string(r[:n-1]), " ") + "…"
}
