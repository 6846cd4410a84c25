package httpwatch_test

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/vigil-run/vigil"
	"github.com/vigil-run/vigil/watcher"
	httpwatch "github.com/vigil-run/vigil/watcher/http"
)

// connCounter is a local server that counts the connections made to it
// and the paths asked for.
type connCounter struct {
	srv   *httptest.Server
	mu    sync.Mutex
	conns int
	paths []string
}

func newConnCounter(t *testing.T) *connCounter {
	c := &connCounter{}
	c.srv = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c.mu.Lock()
		c.paths = append(c.paths, r.URL.Path)
		c.mu.Unlock()
		switch r.URL.Path {
		case "/missing":
			w.WriteHeader(http.StatusNotFound)
			w.Write([]byte(strings.Repeat("not here. ", 100)))
		default:
			w.Header().Set("Content-Type", "application/json")
			w.Write([]byte(`{"done":false}`))
		}
	}))
	c.srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			c.mu.Lock()
			c.conns++
			c.mu.Unlock()
		}
	}
	c.srv.Start()
	t.Cleanup(c.srv.Close)
	return c
}

func (c *connCounter) counts() (int, []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.conns, append([]string(nil), c.paths...)
}

// TestProbesReuseConnections: probes of several watches on one host share
// one kept-alive connection, whatever the answer (an unread error page is
// read away so the connection can serve again); Close ends it, and the
// next probe dials again.
func TestProbesReuseConnections(t *testing.T) {
	t.Parallel()
	c := newConnCounter(t)
	w := httpwatch.New(httpwatch.Config{})
	defer w.Close()
	preds := map[string]string{
		"a": `{"url":"` + c.srv.URL + `/a","done":{"path":"done","equals":true}}`,
		"b": `{"url":"` + c.srv.URL + `/b"}`,
		"c": `{"url":"` + c.srv.URL + `/missing"}`,
	}
	for range 4 {
		for _, id := range []string{"a", "b", "c"} {
			obs, err := w.Probe(context.Background(), watcher.Probe{WatchID: id, Kind: vigil.KindHTTP, Predicate: canon(t, w, preds[id])})
			if err != nil || obs.Verdict == vigil.VerdictUnavailable {
				t.Fatalf("Probe(%s) = %+v, %v", id, obs, err)
			}
		}
	}
	if n, paths := c.counts(); n != 1 || len(paths) != 12 {
		t.Errorf("12 probes made %d connections and %d requests, want 1 connection", n, len(paths))
	}
	w.Close()
	if _, err := w.Probe(context.Background(), watcher.Probe{WatchID: "a", Kind: vigil.KindHTTP, Predicate: canon(t, w, preds["a"])}); err != nil {
		t.Fatal(err)
	}
	if n, _ := c.counts(); n != 2 {
		t.Errorf("after Close, %d connections in all, want 2 (the probe dialled again)", n)
	}
}

// TestEveryDialChecked: with DenyPrivate, loopback is refused at each
// probe's dial; nothing kept from one probe lets the next one through.
func TestEveryDialChecked(t *testing.T) {
	t.Parallel()
	c := newConnCounter(t)
	w := httpwatch.New(httpwatch.Config{DenyPrivate: true})
	defer w.Close()
	pred := canon(t, httpwatch.New(httpwatch.Config{}), `{"url":"`+c.srv.URL+`/a"}`)
	for i := range 3 {
		obs, err := watcher.Run(context.Background(), w, watcher.Probe{WatchID: "a", Kind: vigil.KindHTTP, Predicate: pred})
		if err != nil || obs.Verdict != vigil.VerdictUnavailable || !strings.Contains(obs.Reason, "refused to connect") {
			t.Errorf("probe %d = %+v, %v; want refused to connect", i, obs, err)
		}
	}
	if n, _ := c.counts(); n != 0 {
		t.Errorf("the server saw %d connections, want 0", n)
	}
}

// TestProbeSeesItsOwnPredicate: the parsed predicate kept for a watch is
// used only for the very bytes it was parsed from.
func TestProbeSeesItsOwnPredicate(t *testing.T) {
	t.Parallel()
	c := newConnCounter(t)
	w := httpwatch.New(httpwatch.Config{})
	defer w.Close()
	for _, path := range []string{"/one", "/two", "/one"} {
		pred := canon(t, w, `{"url":"`+c.srv.URL+path+`","done":{"path":"done","equals":true}}`)
		if _, err := w.Probe(context.Background(), watcher.Probe{WatchID: "same", Kind: vigil.KindHTTP, Predicate: pred}); err != nil {
			t.Fatal(err)
		}
	}
	if _, paths := c.counts(); strings.Join(paths, " ") != "/one /two /one" {
		t.Errorf("paths asked = %v, want /one /two /one", paths)
	}
}
