package longcall

import (
	"context"
	"errors"
	"testing"
)

func TestCloseCancelsLiveCallsWithItsCause(t *testing.T) {
	var s Set
	cause := errors.New("shutting down")
	a, doneA := s.Track(t.Context())
	b, doneB := s.Track(t.Context())
	doneB() // finished before Close: not cancelled by it
	if s.Len() != 1 {
		t.Fatalf("Len = %d, want 1", s.Len())
	}
	s.Close(cause)
	if got := context.Cause(a); got != cause {
		t.Errorf("Cause of a live call = %v, want %v", got, cause)
	}
	if got := context.Cause(b); !errors.Is(got, context.Canceled) {
		t.Errorf("Cause of a finished call = %v, want context.Canceled", got)
	}
	doneA() // after Close: harmless
	if s.Len() != 0 {
		t.Errorf("Len after Close = %d, want 0", s.Len())
	}
}

func TestTrackAfterCloseIsCancelled(t *testing.T) {
	var s Set
	cause := errors.New("shutting down")
	s.Close(cause)
	s.Close(errors.New("second")) // the first cause stays
	ctx, done := s.Track(t.Context())
	defer done()
	if got := context.Cause(ctx); got != cause {
		t.Errorf("Cause = %v, want %v", got, cause)
	}
	if s.Len() != 0 {
		t.Errorf("Len = %d, want 0", s.Len())
	}
}

func TestParentCancelReachesTheCall(t *testing.T) {
	var s Set
	parent, cancel := context.WithCancel(t.Context())
	ctx, done := s.Track(parent)
	defer done()
	cancel()
	if ctx.Err() == nil {
		t.Error("the call's context outlived its parent")
	}
}
