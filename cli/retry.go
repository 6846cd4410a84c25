package cli

import (
	"cmp"
	"context"
	"fmt"
	"time"

	"github.com/vigil-run/vigil"
	"github.com/vigil-run/vigil/client"
)

// Pauses of a command between tries while the daemon cannot answer: a
// backoff from retryFirst doubling up to retryMax, or the wait the daemon
// asks for (Retry-After), bounded by retryAfterMax.
const (
	retryFirst    = 500 * time.Millisecond
	retryMax      = 5 * time.Second
	retryAfterMax = 30 * time.Second
)

// retrier returns the pacing of a command's tries while the daemon cannot
// answer, until timeout passes (if positive; lookOnce: at once; zero:
// never), telling stderr once an outage that it is trying again.
func (e *env) retrier(timeout time.Duration) *retrier {
	rt := &retrier{clk: e.clk(), retrying: func(err error) {
		fmt.Fprintf(e.stderr, "vigil: %s; trying again (Ctrl-C to stop)\n", term(oneLine(describe(err))))
	}}
	switch {
	case timeout == lookOnce:
		rt.deadline = rt.clk.Now()
	case timeout > 0:
		rt.deadline = rt.clk.Now().Add(timeout)
	}
	return rt
}

// retrier paces a command's tries while the daemon cannot answer for now
// (retryable): it pauses before each (nextPause) until its deadline, if
// any, passes or ctx ends. retrying, if set, is told of the first error of
// each outage; an outage goes on until answered is called.
type retrier struct {
	clk      clock
	deadline time.Time // zero: no deadline
	// afterMax bounds the wait the daemon asks for; zero: retryAfterMax.
	afterMax time.Duration
	retrying func(error)
	backoff  time.Duration // of the outage under way; zero when none
}

// pause waits before the next try after err and returns nil, or returns
// the error that ends the tries: err when it is not retryable, ctx has
// ended or the deadline has passed, or ctx's error when it ends during the
// pause, which stops at the deadline.
func (r *retrier) pause(ctx context.Context, err error) error {
	if ctx.Err() != nil || !retryable(err) {
		return err
	}
	p, next := nextPause(r.backoff, err, cmp.Or(r.afterMax, retryAfterMax))
	if !r.deadline.IsZero() {
		left := r.deadline.Sub(r.clk.Now())
		if left <= 0 {
			return err
		}
		p = min(p, left)
	}
	if r.backoff == 0 && r.retrying != nil {
		r.retrying(err)
	}
	r.backoff = next
	return r.clk.Sleep(ctx, p)
}

// do calls try until it returns nil, pausing (pause) after each error,
// and returns the error that ends the tries. The outage it rides out goes
// on after it returns, until answered is called.
func (r *retrier) do(ctx context.Context, try func() error) error {
	for {
		err := try()
		if err == nil {
			return nil
		}
		if err := r.pause(ctx, err); err != nil {
			return err
		}
	}
}

// answered ends the outage under way: the backoff starts over, and the
// next error is told.
func (r *retrier) answered() { r.backoff = 0 }

// over reports whether the deadline has passed.
func (r *retrier) over() bool {
	return !r.deadline.IsZero() && !r.clk.Now().Before(r.deadline)
}

// retryable reports whether err is the daemon not answering for now:
// unavailable (stopping, starting, unreachable, a dropped connection) or
// rate_limited.
func retryable(err error) bool {
	switch vigil.ErrorCode(err) {
	case vigil.CodeUnavailable, vigil.CodeRateLimited:
		return true
	}
	return false
}

// nextPause returns the pause before the next try after err, and the
// backoff after it: the wait the daemon asked for (Retry-After, at most
// afterMax), else the backoff, which starts at retryFirst and doubles up
// to retryMax.
func nextPause(backoff time.Duration, err error, afterMax time.Duration) (pause, next time.Duration) {
	next = min(max(backoff*2, retryFirst), retryMax)
	if d, ok := client.RetryAfter(err); ok && d > 0 {
		return min(d, afterMax), next
	}
	return next, next
}
