package web_test

import (
	"bufio"
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vigil-run/vigil"
	"github.com/vigil-run/vigil/engine"
	"github.com/vigil-run/vigil/httpapi"
	"github.com/vigil-run/vigil/store/memstore"
	"github.com/vigil-run/vigil/watcher"
	"github.com/vigil-run/vigil/web"
)

// streamEnv is a panel serving the API's event stream, over an engine on
// a memory store, on a clock the test moves.
type streamEnv struct {
	panel *web.Panel
	api   *httpapi.Server
	eng   *engine.Engine
	srv   *httptest.Server

	mu  sync.Mutex
	now time.Time
}

const (
	streamAdmin  = "vgl_admin_stream_test"
	streamScoped = "vgl_scoped_stream_test"
)

// newStreamEnv builds a streamEnv whose sessions re-check every recheck.
func newStreamEnv(t *testing.T, recheck time.Duration) *streamEnv {
	t.Helper()
	e := &streamEnv{now: time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)}
	e.eng = engine.New(engine.Config{Store: memstore.New(), Watchers: watcher.NewRegistry()})
	e.api = httpapi.New(httpapi.Options{Service: e.eng})
	auth := func(_ context.Context, token string) (vigil.Scope, bool, error) {
		return vigil.Scope{Recipients: []string{"agent-a"}}, token == streamScoped, nil
	}
	e.panel = web.New(web.Options{Service: e.eng, AdminToken: streamAdmin, AuthenticateFunc: auth, Events: e.api.EventStream(),
		NowFunc: e.clock, Recheck: recheck})
	e.srv = httptest.NewServer(e.panel.Handler())
	t.Cleanup(func() {
		e.api.Close()
		e.srv.Close()
	})
	return e
}

func (e *streamEnv) clock() time.Time { e.mu.Lock(); defer e.mu.Unlock(); return e.now }

func (e *streamEnv) advance(d time.Duration) { e.mu.Lock(); e.now = e.now.Add(d); e.mu.Unlock() }

// openStream opens the panel's event stream with a session's client and
// returns a channel of its lines, closed when the stream ends.
func openStream(t *testing.T, hc *http.Client, base string) <-chan string {
	t.Helper()
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, base+"/ui/events", nil)
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /ui/events = %d, want 200", resp.StatusCode)
	}
	lines := make(chan string, 64)
	go func() {
		defer close(lines)
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	// The stream's opening comment: it is live.
	for l := range lines {
		if strings.HasPrefix(l, ": vigil event stream") {
			return lines
		}
	}
	t.Fatal("the stream ended before its opening comment")
	return nil
}

// streamEnds waits for the stream to end.
func streamEnds(t *testing.T, lines <-chan string) {
	t.Helper()
	timeout := time.After(10 * time.Second) // a hang detector only
	for {
		select {
		case _, ok := <-lines:
			if !ok {
				return
			}
		case <-timeout:
			t.Fatal("the event stream outlived its session")
		}
	}
}

// TestSessionEndEndsEventStream: docs/panel.md says "Sign out ends the
// session on the daemon"; so does an eviction and an expiry. A tab still
// open on the panel kept its event stream, though, and went on receiving
// every outcome and note after the session was gone: the admin's was
// never re-checked, a scoped one's re-checked the token only. A
// session's streams end with it: at once when it is signed out or
// evicted (the re-check is an hour away in those cases), and at the next
// re-check once it has gone unused past its TTL.
func TestSessionEndEndsEventStream(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name    string
		token   string
		recheck time.Duration
		end     func(t *testing.T, e *streamEnv, hc *http.Client, csrf string)
	}{
		{"admin signs out", streamAdmin, time.Hour, signOut},
		{"scoped signs out", streamScoped, time.Hour, signOut},
		{"evicted", streamAdmin, time.Hour, func(t *testing.T, e *streamEnv, _ *http.Client, _ string) {
			// Newer sessions than the stream's, as many as are kept.
			e.advance(time.Second)
			e.panel.OpenSessions(web.MaxSessions)
		}},
		{"expired unused", streamAdmin, time.Millisecond, func(t *testing.T, e *streamEnv, _ *http.Client, _ string) {
			e.advance(web.DefaultSessionTTL + time.Second)
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e := newStreamEnv(t, tt.recheck)
			hc, csrf := session(t, e.srv.URL, tt.token)
			lines := openStream(t, hc, e.srv.URL)
			tt.end(t, e, hc, csrf)
			streamEnds(t, lines)
			if n := e.api.LongCalls(); n != 0 {
				t.Errorf("%d event streams still open, want none", n)
			}
		})
	}
}

func signOut(t *testing.T, e *streamEnv, hc *http.Client, csrf string) {
	t.Helper()
	if resp := post(t, hc, e.srv.URL+"/ui/signout", e.srv.URL, url.Values{"csrf": {csrf}}); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("sign out: %d, want 303", resp.StatusCode)
	}
}

// TestHeadEventsAnswersAtOnce: ServeMux serves HEAD on the GET route of
// the panel's event stream, and net/http drops a HEAD's body, so the
// stream answered to HEAD never ended, holding its connection. HEAD gets
// the stream's header at once, and the connection serves the next
// request.
func TestHeadEventsAnswersAtOnce(t *testing.T) {
	t.Parallel()
	e := newStreamEnv(t, time.Hour)
	hc, _ := session(t, e.srv.URL, streamAdmin)
	base, _ := url.Parse(e.srv.URL)
	var cookie string
	for _, c := range hc.Jar.Cookies(base) {
		if c.Name == web.CookieName {
			cookie = c.Name + "=" + c.Value
		}
	}
	conn, err := net.Dial("tcp", base.Host)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.Write([]byte("HEAD /ui/events HTTP/1.1\r\nHost: " + base.Host + "\r\nCookie: " + cookie + "\r\n\r\n" +
		"GET /ui/static/app.css HTTP/1.1\r\nHost: " + base.Host + "\r\n\r\n")); err != nil {
		t.Fatal(err)
	}
	_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second)) // a hang detector only
	br := bufio.NewReader(conn)
	head, err := http.ReadResponse(br, &http.Request{Method: http.MethodHead})
	if err != nil {
		t.Fatalf("HEAD /ui/events: %v", err)
	}
	if head.StatusCode != http.StatusOK || head.Header.Get("Content-Type") != "text/event-stream" {
		t.Errorf("HEAD /ui/events = %d %q, want 200 text/event-stream", head.StatusCode, head.Header.Get("Content-Type"))
	}
	next, err := http.ReadResponse(br, &http.Request{Method: http.MethodGet})
	if err != nil {
		t.Fatalf("the request after HEAD /ui/events on the same connection is not answered: %v (streams open: %d)", err, e.api.LongCalls())
	}
	next.Body.Close()
	if n := e.api.LongCalls(); n != 0 {
		t.Errorf("%d event streams open after the HEAD, want none", n)
	}
}
