package httpapi

import (
	"context"
	"net/http"
	"strconv"
	"sync"

	"github.com/vigil-run/vigil"
	"github.com/vigil-run/vigil/internal/longcall"
)

// DefaultMaxLongCalls is how many long-lived requests (event streams,
// long-polls, MCP requests) one scoped token may have open at once.
const DefaultMaxLongCalls = 64

// longRetryAfter is the Retry-After, in seconds, of a long-lived request
// refused for being past its token's bound: a slot frees when one of the
// token's own requests ends, which the server cannot foresee.
const longRetryAfter = 5

// longLimit counts each scoped token's long-lived requests in flight.
type longLimit struct {
	max int // <= 0: no bound
	mu  sync.Mutex
	by  map[string]int // token id → requests in flight
}

// take holds a slot of key, or reports that its max are all held.
func (l *longLimit) take(key string) bool {
	if l.max <= 0 {
		return true
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.by[key] >= l.max {
		return false
	}
	if l.by == nil {
		l.by = map[string]int{}
	}
	l.by[key]++
	return true
}

// put frees a slot take held.
func (l *longLimit) put(key string) {
	if l.max <= 0 {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.by[key]--; l.by[key] <= 0 {
		delete(l.by, key)
	}
}

// holdLong holds one of the caller's slots of long-lived requests for as
// long as the request runs, until the returned function is called; past
// the bound it answers 429 rate_limited with Retry-After. The admin holds
// none: the operator's token is not bounded.
func (s *Server) holdLong(w http.ResponseWriter, ctx context.Context) (func(), error) {
	sc, scoped := vigil.ScopeFrom(ctx)
	if !scoped {
		return func() {}, nil
	}
	key := sc.TokenID
	if !s.long.take(key) {
		w.Header().Set("Retry-After", strconv.Itoa(longRetryAfter))
		return nil, vigil.Errorf(vigil.CodeRateLimited, "this token has %d event streams, long-polls and MCP requests open, as many as it may at once: close one, or try again in %d s",
			s.long.max, longRetryAfter)
	}
	var once sync.Once
	return func() { once.Do(func() { s.long.put(key) }) }, nil
}

// track holds a slot of the caller's long-lived requests (holdLong) and
// tracks the call in set (ended by Close); done frees both.
func (s *Server) track(w http.ResponseWriter, r *http.Request, set *longcall.Set) (context.Context, func(), error) {
	release, err := s.holdLong(w, r.Context())
	if err != nil {
		return nil, nil, err
	}
	ctx, done := set.Track(r.Context())
	return ctx, func() { release(); done() }, nil
}

// Bounded returns h with each of its requests counted among its token's
// long-lived requests, refused 429 rate_limited past the bound: for
// surfaces mounted beside the API whose requests may last (the MCP
// streams and tool calls at /mcp). Mount it behind authentication (Mount).
func (s *Server) Bounded(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		release, err := s.holdLong(w, r.Context())
		if err != nil {
			s.fail(w, r, err)
			return
		}
		defer release()
		h.ServeHTTP(w, r)
	})
}
