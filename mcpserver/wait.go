package mcpserver

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/vigil-run/vigil"
	"github.com/vigil-run/vigil/wording"
)

type waitIn struct {
	ID      string `json:"id" jsonschema:"the watch id, as watch_create or watch_list returned it"`
	Timeout string `json:"timeout,omitempty" jsonschema:"wait at most this long, like 20s (default and most: the server's bound, 50s)"`
}

type waitOut struct {
	Watch Watch `json:"watch" jsonschema:"the watch as it is now"`
	// Settled is true when the watch has settled: not pending, nor
	// unwatchable (a kind this build has no watcher for).
	Settled bool `json:"settled" jsonschema:"the watch has settled; its outcome is in watch.outcome"`
	// RetryAfter is set while the watch is pending: whole seconds until
	// waiting again could see a change (its next check).
	RetryAfter int    `json:"retry_after,omitempty" jsonschema:"while pending: seconds until waiting again could see a change (the next check); prefer ending your turn"`
	Hint       string `json:"hint" jsonschema:"what to do next"`
}

// wait waits, bounded by MaxWait, for a watch to settle. It answers at
// once when the watch has settled, is standing, or cannot change before
// the wait would end (mayChange).
func (s *server) wait(ctx context.Context, req *mcp.CallToolRequest, in waitIn) (*mcp.CallToolResult, waitOut, error) {
	ctx, _, err := s.callContext(ctx, req.Extra)
	if err != nil {
		return nil, waitOut{}, err
	}
	window := s.opts.MaxWait
	if in.Timeout != "" {
		d, err := vigil.ParseDuration(in.Timeout)
		if err != nil {
			return nil, waitOut{}, argError("timeout", "timeout: %v", err)
		}
		window = min(d, window)
	}
	start := s.now()
	w, err := s.svc.Watch(ctx, in.ID)
	if err != nil {
		return nil, waitOut{}, s.asToolError(ctx, req.Params.Name, err)
	}
	if s.mayChange(w, start.Add(window)) && window > 0 {
		wctx, done := s.calls.Track(ctx)
		defer done()
		stop := s.progress(wctx, req, w, start, window)
		w, err = s.svc.Wait(wctx, in.ID, window)
		stop()
		if err != nil {
			return nil, waitOut{}, s.asToolError(wctx, req.Params.Name, err)
		}
	}
	return nil, s.waitResult(w), nil
}

// mayChange reports whether waiting until end could see watch w settle:
// not when it has settled, is standing, or cannot change before end (its
// next check, or for a watch of a kind this build has no watcher for,
// unwatchable, its deadline, comes later).
func (s *server) mayChange(w *vigil.Watch, end time.Time) bool {
	switch {
	case w.Standing:
		return false
	case w.State == vigil.StateUnwatchable:
		return !w.Deadline.IsZero() && !w.Deadline.After(end)
	case w.State == vigil.StatePending:
		return !(s.dueOnly(w.Kind) && w.NextDue.After(end))
	}
	return false
}

// dueOnly reports whether a watch of kind k can settle only when it is
// due (watcher.Descriptor.DueOnly), so a wait that ends before its next
// check can answer at once.
func (s *server) dueOnly(k vigil.Kind) bool {
	d, ok := s.opts.Kinds.Lookup(k)
	return ok && d.DueOnly
}

func (s *server) waitResult(w *vigil.Watch) waitOut {
	out := waitOut{Watch: watchOut(w), Settled: w.State.Terminal()}
	switch {
	case out.Settled:
		out.Hint = "Settled: " + wording.Why(w)
	case w.State == vigil.StateUnwatchable:
		// Not settled (nothing of this build probes it): it expires at
		// its deadline, mailed as every deadline is.
		if !w.Deadline.IsZero() && w.Deadline.After(s.now()) {
			out.RetryAfter = seconds(w.Deadline.Sub(s.now()))
		}
		out.Hint = fmt.Sprintf("Not settled: %s Do not wait on it; END YOUR TURN: its outcome will land in %s's inbox.", wording.Why(w), w.Recipient)
	case w.Standing:
		out.Hint = fmt.Sprintf("%s is a standing watch: it never settles by itself, and each change lands in %s's inbox. Do not wait on it; END YOUR TURN.",
			capitalize(wording.Subject(w)), w.Recipient)
	default:
		next := w.NextDue
		if next.IsZero() || !next.After(s.now()) {
			out.RetryAfter = 1
		} else {
			out.RetryAfter = seconds(next.Sub(s.now()))
		}
		out.Hint = fmt.Sprintf("Still pending: %s Rather than waiting again, END YOUR TURN: the outcome will land in %s's inbox.",
			wording.Why(w), w.Recipient)
	}
	return out
}

// progress sends a progress notification now and every ProgressEvery
// while a wait runs, when the caller asked for them (a progress token in
// the request). It returns the function that stops it.
func (s *server) progress(ctx context.Context, req *mcp.CallToolRequest, w *vigil.Watch, start time.Time, window time.Duration) (stop func()) {
	token := req.Params.GetProgressToken()
	if token == nil || req.Session == nil {
		return func() {}
	}
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(s.opts.ProgressEvery)
		defer t.Stop()
		subject := wording.Subject(w)
		for {
			elapsed := s.now().Sub(start)
			err := req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{
				ProgressToken: token,
				Progress:      float64(elapsed.Milliseconds()) / 1000,
				Total:         window.Seconds(),
				Message: fmt.Sprintf("Waiting for %s: still pending after %s (at most %s).",
					subject, vigil.FormatDuration(elapsed.Round(time.Second)), vigil.FormatDuration(window)),
			})
			if err != nil && ctx.Err() == nil {
				s.log.DebugContext(ctx, "progress notification not sent", "watch_id", w.ID, "err", err)
			}
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	})
	return func() { cancel(); wg.Wait() }
}

func capitalize(s string) string {
	if s == "" || s[0] < 'a' || s[0] > 'z' {
		return s
	}
	return string(s[0]-'a'+'A') + s[1:]
}
