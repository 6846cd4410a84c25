package web_test

import (
	"bufio"
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
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
