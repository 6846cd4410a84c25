package mcpserver

import (
	"context"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/vigil-run/vigil/httpapi"
)

// MaxSessionsPerToken bounds the live MCP sessions over HTTP of one bearer
// token (the admin's too). A token's next initialize past it ends that
// token's least recently used session, preferring one with no request
// open (no event stream held, no call running): a client that went away
// without ending its session (a crashed agent, a closed editor) leaves
// one behind, which would otherwise live until it has idled sessionIdle
// and lock its token's next agents out. A client whose session was ended
// is answered 404 and starts a new one, as the protocol has it. Another
// token's sessions are never touched.
const MaxSessionsPerToken = 32

// sessions keeps the live HTTP sessions of each token: it bounds their
// number (max, MaxSessionsPerToken) and, while a scoped token has one,
// re-checks every recheck interval that the token still authenticates
// (httpapi.TokenCheck), closing all its sessions once it does not, idle or
// not: a session of a revoked, expired or deleted token is of no use (its
// every request is refused 401) and would otherwise hold memory until
// it has idled sessionIdle.
type sessions struct {
	max int
	// ticker returns the ticks of a token's rechecks and the function
	// that stops them (time.NewTicker; tests inject their own).
	ticker func(every time.Duration) (<-chan time.Time, func())
	// closedHook, if set, is told of each session ended here once its Close
	// has returned (tests).
	closedHook func(*mcp.ServerSession)

	mu      sync.Mutex
	seq     uint64                  // orders uses, for least recently used
	byID    map[string]*liveSession // by session ID
	byToken map[string]*tokenSessions
	closed  bool
	wg      sync.WaitGroup
}

// liveSession is one session as sessions tracks it.
type liveSession struct {
	ss    *mcp.ServerSession
	token string // the token's key (TokenInfo.UserID: a hash of it)
	open  int    // requests of the session being served
	used  uint64 // sessions.seq at its last request's start or end
}

// tokenSessions are the live sessions of one token.
type tokenSessions struct {
	byID map[string]*liveSession
	// stop ends the token's recheck (nil: none runs, the admin token).
	stop context.CancelFunc
}

func newSessions() *sessions {
	return &sessions{max: MaxSessionsPerToken, byID: make(map[string]*liveSession), byToken: make(map[string]*tokenSessions),
		ticker: func(every time.Duration) (<-chan time.Time, func()) {
			t := time.NewTicker(every)
			return t.C, t.Stop
		}}
}

// track is a receiving middleware: an initialize over HTTP adds its
// session to its token's, ending that token's least recently used one
// past the bound, before the session is answered.
func (m *sessions) track(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		if method == "initialize" {
			ss, _ := req.GetSession().(*mcp.ServerSession)
			extra := req.GetExtra()
			if ss != nil && ss.ID() != "" && extra != nil && extra.TokenInfo != nil {
				c, _ := extra.TokenInfo.Extra[callerKey].(caller)
				if err := m.add(ss, extra.TokenInfo.UserID, c); err != nil {
					return nil, err
				}
			}
		}
		return next(ctx, method, req)
	}
}

// add tracks ss as a session of token.
func (m *sessions) add(ss *mcp.ServerSession, token string, c caller) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return errShuttingDown
	}
	if _, ok := m.byID[ss.ID()]; ok {
		return nil
	}
	if ts := m.byToken[token]; ts != nil {
		for len(ts.byID) >= m.max {
			victim := lru(ts)
			m.dropLocked(victim) // the token's last drops ts and its recheck
			m.closeLater(victim.ss)
		}
	}
	ts := m.byToken[token]
	if ts == nil {
		ts = &tokenSessions{byID: make(map[string]*liveSession)}
		m.byToken[token] = ts
		if c.valid != nil {
			ctx, stop := context.WithCancel(context.Background())
			ts.stop = stop
			every := c.every
			if every <= 0 {
				every = httpapi.DefaultRecheck
			}
			ticks, stopTicks := m.ticker(every)
			m.wg.Go(func() {
				defer stopTicks()
				m.recheck(ctx, token, c.valid, ticks)
			})
		}
	}
	m.seq++
	ls := &liveSession{ss: ss, token: token, used: m.seq}
	ts.byID[ss.ID()] = ls
	m.byID[ss.ID()] = ls
	m.wg.Go(func() {
		_ = ss.Wait()
		m.forget(ss)
	})
	return nil
}

// lru returns the session of ts to end first: of those with no request
// open (a client gone holds none; a live one holds its event stream), the
// least recently used, else the least recently used of all.
func lru(ts *tokenSessions) *liveSession {
	var best *liveSession
	for _, ls := range ts.byID {
		switch {
		case best == nil:
			best = ls
		case (ls.open == 0) != (best.open == 0):
			if ls.open == 0 {
				best = ls
			}
		case ls.used < best.used:
			best = ls
		}
	}
	return best
}

// recheck asks at every tick whether token still authenticates and, once
// it does not (no error: a store that cannot answer keeps the sessions),
// closes all its sessions. It ends with ctx, when the token has no
// session left.
func (m *sessions) recheck(ctx context.Context, token string, valid func(context.Context) (bool, error), ticks <-chan time.Time) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-ticks:
		}
		if ok, err := valid(ctx); err != nil || ok {
			continue
		}
		m.mu.Lock()
		ts := m.byToken[token]
		if ts != nil && ctx.Err() == nil {
			for _, ls := range ts.byID {
				m.dropLocked(ls)
				m.closeLater(ls.ss)
			}
		}
		m.mu.Unlock()
		return
	}
}

// begin and end bracket each request of session id, for lru.
func (m *sessions) begin(id string) { m.use(id, 1) }
func (m *sessions) end(id string)   { m.use(id, -1) }

func (m *sessions) use(id string, d int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if ls := m.byID[id]; ls != nil {
		m.seq++
		ls.used = m.seq
		ls.open += d
	}
}

// forget drops a session that ended.
func (m *sessions) forget(ss *mcp.ServerSession) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if ls := m.byID[ss.ID()]; ls != nil && ls.ss == ss {
		m.dropLocked(ls)
	}
}

// dropLocked stops tracking ls, and its token's recheck with its last
// session.
func (m *sessions) dropLocked(ls *liveSession) {
	id := ls.ss.ID()
	delete(m.byID, id)
	ts := m.byToken[ls.token]
	if ts == nil {
		return
	}
	delete(ts.byID, id)
	if len(ts.byID) == 0 {
		if ts.stop != nil {
			ts.stop()
		}
		delete(m.byToken, ls.token)
	}
}

// closeLater closes ss aside: Close waits for the session's calls in
// flight, which must not hold up the request that ended it.
func (m *sessions) closeLater(ss *mcp.ServerSession) {
	m.wg.Go(func() {
		_ = ss.Close()
		if m.closedHook != nil {
			m.closedHook(ss)
		}
	})
}

// count returns how many sessions token has.
func (m *sessions) count(token string) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	if ts := m.byToken[token]; ts != nil {
		return len(ts.byID)
	}
	return 0
}

// closeAll stops every recheck and refuses new sessions; wait returns
// once the sessions' goroutines have, after they are closed.
func (m *sessions) closeAll() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.closed = true
	for _, ts := range m.byToken {
		if ts.stop != nil {
			ts.stop()
		}
	}
}

func (m *sessions) wait() { m.wg.Wait() }
