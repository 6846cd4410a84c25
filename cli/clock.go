package cli

import (
	"context"
	"time"
)

// clock is how commands tell the time and pause between tries: the real
// one, or a test's, which need not wait.
type clock interface {
	Now() time.Time
	// Sleep waits d, or until ctx ends and returns its error.
	Sleep(ctx context.Context, d time.Duration) error
}

// realClock is the time of day, and real waits.
type realClock struct{}

func (realClock) Now() time.Time { return time.Now() }

func (realClock) Sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// clk returns the commands' clock: the real one unless a test set one.
func (e *env) clk() clock {
	if e.clock == nil {
		return realClock{}
	}
	return e.clock
}
