package mcpserver

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/vigil-run/vigil"
	"github.com/vigil-run/vigil/httpapi"
)

// sessionRig serves NewHandler behind httpapi with tok-a and tok-b
// scoped to A until revoked, and speaks raw HTTP to it. httpapi's own
// recheck of running requests is an hour away.
type sessionRig struct {
	t   *testing.T
	h   *Handler
	url string
	hc  *http.Client

	mu      sync.Mutex
	revoked map[string]bool
	broken  bool // the store cannot answer

	tickers chan chan time.Time     // each token's recheck ticks, in the order made
	closed  chan *mcp.ServerSession // sessions ended by the handler
}

func newSessionRig(t *testing.T, max int) *sessionRig {
	t.Helper()
	rig := &sessionRig{t: t, revoked: map[string]bool{}, tickers: make(chan chan time.Time, 10), closed: make(chan *mcp.ServerSession, 10)}
	svc := &sharedInbox{events: make(chan vigil.Event)}
	api := httpapi.New(httpapi.Options{
		Service: svc,
		Recheck: time.Hour,
		AuthenticateFunc: func(_ context.Context, token string) (vigil.Scope, bool, error) {
			rig.mu.Lock()
			defer rig.mu.Unlock()
			if rig.broken {
				return vigil.Scope{}, false, errors.New("the store cannot be read")
			}
			if token != "tok-a" && token != "tok-b" || rig.revoked[token] {
				return vigil.Scope{}, false, nil
			}
			return vigil.Scope{Recipients: []string{"A"}, TokenID: token}, true, nil
		},
	})
	rig.h = NewHandler(svc, nil)
	rig.h.sess.max = max
	rig.h.sess.ticker = func(time.Duration) (<-chan time.Time, func()) {
		c := make(chan time.Time)
		rig.tickers <- c
		return c, func() {}
	}
	rig.h.sess.closedHook = func(ss *mcp.ServerSession) { rig.closed <- ss }
	api.Mount("/mcp", rig.h)
	srv := httptest.NewServer(api.Handler())
	tr := &http.Transport{}
	rig.hc = &http.Client{Transport: tr}
	rig.url = srv.URL + "/mcp"
	t.Cleanup(func() {
		tr.CloseIdleConnections()
		rig.h.Close()
		api.Close()
		srv.Close()
	})
	return rig
}

// post sends body on session (none: a new one) and returns the answer's
// status and session header, the body read.
func (rig *sessionRig) post(token, session, body string) (int, string) {
	rig.t.Helper()
	req, err := http.NewRequestWithContext(rig.t.Context(), http.MethodPost, rig.url, strings.NewReader(body))
	if err != nil {
		rig.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if session != "" {
		req.Header.Set(sessionHeader, session)
		req.Header.Set("Mcp-Protocol-Version", "2025-06-18")
	}
	resp, err := rig.hc.Do(req)
	if err != nil {
		rig.t.Fatal(err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode, resp.Header.Get(sessionHeader)
}

// open makes a session of token and returns its ID.
func (rig *sessionRig) open(token string) string {
	rig.t.Helper()
	code, id := rig.post(token, "", `{"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "test", "version": "v0"}}}`)
	if code != http.StatusOK || id == "" {
		rig.t.Fatalf("initialize with %s = %d, session %q", token, code, id)
	}
	if code, _ := rig.post(token, id, `{"jsonrpc": "2.0", "method": "notifications/initialized"}`); code != http.StatusAccepted {
		rig.t.Fatalf("notifications/initialized = %d", code)
	}
	return id
}

// ping returns the status of a ping on session id with token.
func (rig *sessionRig) ping(token, id string) int {
	rig.t.Helper()
	code, _ := rig.post(token, id, `{"jsonrpc": "2.0", "id": 2, "method": "ping"}`)
	return code
}

// session returns the server session of id.
func (rig *sessionRig) session(id string) *mcp.ServerSession {
	rig.t.Helper()
	for ss := range rig.h.Server().Sessions() {
		if ss.ID() == id {
			return ss
		}
	}
	rig.t.Fatalf("no session %s", id)
	return nil
}

// waitClosed waits until the handler has ended want.
func (rig *sessionRig) waitClosed(want ...*mcp.ServerSession) {
	rig.t.Helper()
	left := map[*mcp.ServerSession]bool{}
	for _, ss := range want {
		left[ss] = true
	}
	for len(left) > 0 {
		select {
		case ss := <-rig.closed:
			if !left[ss] {
				rig.t.Fatalf("session %s was ended, want only %d others", ss.ID(), len(left))
			}
			delete(left, ss)
		case <-time.After(10 * time.Second):
			rig.t.Fatalf("%d sessions are still open, want them ended", len(left))
		}
	}
}

func tokenKey(token string) string {
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:16])
}

// TestHTTPSessionsPerTokenBounded: past the bound, a token's initialize
// ends that token's least recently used session with no request open
// (a1, the oldest, holds an event stream: a client still there), which
// is then answered 404; the new session and the others of the token work,
// and another token's session is not touched.
func TestHTTPSessionsPerTokenBounded(t *testing.T) {
	t.Parallel()
	if MaxSessionsPerToken != 32 {
		t.Errorf("MaxSessionsPerToken = %d, want 32 as docs/security.md says", MaxSessionsPerToken)
	}
	if newSessions().max != MaxSessionsPerToken {
		t.Errorf("the default bound is %d, want MaxSessionsPerToken", newSessions().max)
	}
	rig := newSessionRig(t, 3)
	b1 := rig.open("tok-b")
	a1 := rig.open("tok-a")
	// a1's client holds its event stream open.
	ctx, hangUp := context.WithCancel(t.Context())
	defer hangUp()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, rig.url, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer tok-a")
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set(sessionHeader, a1)
	req.Header.Set("Mcp-Protocol-Version", "2025-06-18")
	stream, err := rig.hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer stream.Body.Close()
	if stream.StatusCode != http.StatusOK {
		t.Fatalf("GET stream of a1 = %s", stream.Status)
	}
	a2 := rig.open("tok-a")
	a3 := rig.open("tok-a")
	if code := rig.ping("tok-a", a3); code != http.StatusOK {
		t.Fatalf("ping a3 = %d", code)
	}
	if code := rig.ping("tok-a", a2); code != http.StatusOK {
		t.Fatalf("ping a2 = %d", code)
	}
	// a1 is the least recently used, but in use; a3 is the least
	// recently used of those idle.
	ss3 := rig.session(a3)
	a4 := rig.open("tok-a")
	rig.waitClosed(ss3)
	if n := rig.h.sess.count(tokenKey("tok-a")); n != 3 {
		t.Errorf("tok-a has %d sessions, want 3", n)
	}
	if code := rig.ping("tok-a", a3); code != http.StatusNotFound {
		t.Errorf("ping of the ended a3 = %d, want 404 (the client then starts a new session)", code)
	}
	for _, id := range []string{a1, a2, a4} {
		if code := rig.ping("tok-a", id); code != http.StatusOK {
			t.Errorf("ping of tok-a's session %s = %d, want 200", id, code)
		}
	}
	if code := rig.ping("tok-b", b1); code != http.StatusOK {
		t.Errorf("ping of tok-b's session = %d, want 200: another token's sessions do not count", code)
	}
	// Each initialize past the bound ends one session of the token.
	for range 5 {
		rig.open("tok-a")
		select {
		case <-rig.closed:
		case <-time.After(10 * time.Second):
			t.Fatal("an initialize past the bound ended no session")
		}
	}
	if n := rig.h.sess.count(tokenKey("tok-a")); n != 3 {
		t.Errorf("tok-a has %d sessions after 5 more, want 3", n)
	}
}

// TestHTTPSessionsOfRevokedTokenClosed: idle sessions (no request open,
// so httpapi's recheck of running requests has nothing to cut) of a
// token revoked are closed at the token's next recheck; a recheck that
// finds the token valid, or cannot reach the store, closes nothing, and
// another token's session lives on.
func TestHTTPSessionsOfRevokedTokenClosed(t *testing.T) {
	t.Parallel()
	rig := newSessionRig(t, MaxSessionsPerToken)
	a1 := rig.open("tok-a")
	ticksA := <-rig.tickers
	a2 := rig.open("tok-a")
	b1 := rig.open("tok-b")
	ticksB := <-rig.tickers
	tick := func(c chan time.Time) {
		t.Helper()
		// The second tick is taken once the first has been handled.
		for range 2 {
			select {
			case c <- time.Now():
			case <-time.After(10 * time.Second):
				t.Fatal("the token's recheck does not run")
			}
		}
	}
	tick(ticksA)
	rig.mu.Lock()
	rig.broken = true
	rig.mu.Unlock()
	tick(ticksA)
	rig.mu.Lock()
	rig.broken = false
	rig.mu.Unlock()
	select {
	case ss := <-rig.closed:
		t.Fatalf("session %s was closed while its token is valid or the store could not tell", ss.ID())
	default:
	}
	for _, id := range []string{a1, a2} {
		if code := rig.ping("tok-a", id); code != http.StatusOK {
			t.Fatalf("ping %s = %d, want 200", id, code)
		}
	}

	ss1, ss2 := rig.session(a1), rig.session(a2)
	rig.mu.Lock()
	rig.revoked["tok-a"] = true
	rig.mu.Unlock()
	select {
	case ticksA <- time.Now():
	case <-time.After(10 * time.Second):
		t.Fatal("the token's recheck does not run")
	}
	rig.waitClosed(ss1, ss2)
	if n := rig.h.sess.count(tokenKey("tok-a")); n != 0 {
		t.Errorf("the revoked tok-a has %d sessions, want none", n)
	}
	for ss := range rig.h.Server().Sessions() {
		if ss == ss1 || ss == ss2 {
			t.Errorf("session %s of the revoked token is still served", ss.ID())
		}
	}
	tick(ticksB)
	if code := rig.ping("tok-b", b1); code != http.StatusOK {
		t.Errorf("ping of tok-b's session = %d, want 200", code)
	}
}
