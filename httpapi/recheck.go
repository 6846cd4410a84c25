package httpapi

import (
	"context"
	"sync"
	"time"

	"github.com/vigil-run/vigil"
)

// DefaultRecheck is how often a request that outlives it (an event stream,
// a long-poll, an MCP session) re-checks the scoped token it came with: a
// token revoked or expired meanwhile ends it within this long.
const DefaultRecheck = 2 * time.Second

// errRevoked ends a request whose token stopped being valid while it ran.
var errRevoked = &vigil.Error{Code: vigil.CodeUnauthorized, Message: "the token of this request was revoked or has expired"}

// recheck returns ctx cancelled (cause errRevoked) once token no longer
// authenticates, checked every s.recheck while the request runs, and the
// function that stops checking.
func (s *Server) recheck(ctx context.Context, token string) (context.Context, func()) {
	return Recheck(ctx, s.recheckEvery, func(ctx context.Context) (bool, error) {
		_, ok, err := s.auth(ctx, token)
		return ok, err
	})
}

// Recheck returns ctx cancelled (cause: an unauthorized error) once valid
// answers false with no error, asked every `every` while the request runs,
// and the function that stops asking. An error (a store that cannot be
// read) keeps the request and asks again later. A timer, not a goroutine,
// waits between checks, so short requests cost nothing. The web panel's
// sessions use it for their event streams, as the API does for its own.
func Recheck(ctx context.Context, every time.Duration, valid func(context.Context) (bool, error)) (context.Context, func()) {
	if every <= 0 {
		every = DefaultRecheck
	}
	ctx, cancel := context.WithCancelCause(ctx)
	var (
		mu      sync.Mutex
		t       *time.Timer
		stopped bool
	)
	var check func()
	check = func() {
		ok, err := valid(ctx)
		mu.Lock()
		defer mu.Unlock()
		switch {
		case stopped:
		case err == nil && !ok:
			cancel(errRevoked)
		default:
			t = time.AfterFunc(every, check)
		}
	}
	mu.Lock()
	t = time.AfterFunc(every, check)
	mu.Unlock()
	return ctx, func() {
		mu.Lock()
		stopped = true
		t.Stop()
		mu.Unlock()
		cancel(context.Canceled)
	}
}

type tokenCheckKey struct{}

// tokenCheck is what authenticate keeps of a scoped request's token for
// TokenCheck.
type tokenCheck struct {
	valid func(context.Context) (bool, error)
	every time.Duration
}

// TokenCheck returns, for a request authenticated with a scoped token,
// the function that asks whether that token still authenticates (through
// the same AuthenticateFunc as every request; false once it is revoked or
// has expired, an error when the store cannot tell) and how often the
// server re-checks its own long requests. A mounted handler whose work
// outlives the request (the MCP server's inbox subscriptions) re-checks
// with it. ok is false for the admin token and for a request that did not
// pass authenticate.
func TokenCheck(ctx context.Context) (valid func(context.Context) (bool, error), every time.Duration, ok bool) {
	c, ok := ctx.Value(tokenCheckKey{}).(tokenCheck)
	if !ok {
		return nil, 0, false
	}
	return c.valid, c.every, true
}

// withTokenCheck returns ctx carrying token's check for TokenCheck.
func (s *Server) withTokenCheck(ctx context.Context, token string) context.Context {
	return context.WithValue(ctx, tokenCheckKey{}, tokenCheck{every: s.recheckEvery, valid: func(ctx context.Context) (bool, error) {
		_, ok, err := s.auth(ctx, token)
		if vigil.ErrorCode(err) == vigil.CodeUnauthorized {
			return false, nil
		}
		return ok, err
	}})
}
