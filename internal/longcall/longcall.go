// Package longcall ends long calls (long-polls, event streams, bounded
// waits) when their server shuts down, so that a graceful shutdown need not
// wait for calls that would otherwise run to their own end.
package longcall

import (
	"context"
	"sync"
)

// Set is the long calls in flight. Its zero value is ready to use; it is
// safe for concurrent use.
type Set struct {
	mu     sync.Mutex
	closed error // the cause given to Close; nil while open
	live   map[uint64]context.CancelCauseFunc
	nextID uint64
}

// Track returns a context for a long call, derived from parent, that Close
// cancels with its cause, and the function to call when the call is done.
// After Close, the context it returns is already cancelled.
func (s *Set) Track(parent context.Context) (context.Context, func()) {
	ctx, cancel := context.WithCancelCause(parent)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed != nil {
		cancel(s.closed)
		return ctx, func() {}
	}
	if s.live == nil {
		s.live = make(map[uint64]context.CancelCauseFunc)
	}
	id := s.nextID
	s.nextID++
	s.live[id] = cancel
	return ctx, func() {
		s.mu.Lock()
		delete(s.live, id)
		s.mu.Unlock()
		cancel(context.Canceled)
	}
}

// Close cancels every call in flight with cause (which must not be nil),
// and every call tracked later at once. Only the first Close's cause is
// kept.
func (s *Set) Close(cause error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed == nil {
		s.closed = cause
	}
	for id, cancel := range s.live {
		cancel(s.closed)
		delete(s.live, id)
	}
}

// Len is the number of calls in flight.
func (s *Set) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.live)
}
