package daemon

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/vigil-run/vigil"
)

// TestNotReadyUntilPrimed serves requests through the daemon's handler
// before Run has loaded the pending watches: /readyz and the API answer
// 503, /healthz 200.
func TestNotReadyUntilPrimed(t *testing.T) {
	t.Parallel()
	d := unstarted(t)
	for _, tc := range []struct {
		path string
		want int
	}{
		{"/healthz", http.StatusOK},
		{"/readyz", http.StatusServiceUnavailable},
		{"/v1/watches", http.StatusServiceUnavailable},
	} {
		rec := d.get(tc.path)
		if rec.Code != tc.want {
			t.Errorf("GET %s before Run = %d, want %d (%s)", tc.path, rec.Code, tc.want, rec.Body)
		}
	}
	if d.Ready() {
		t.Error("Ready() = true before Run")
	}
}

// unstarted is a daemon made, and closed when the test ends, but not run:
// its handler serves requests through get.
func unstarted(t *testing.T) *Daemon {
	t.Helper()
	cfg := DefaultConfig()
	cfg.Listen, cfg.DataDir, cfg.Roots = "127.0.0.1:0", t.TempDir(), []string{t.TempDir()}
	d, err := New(t.Context(), cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}

// get serves GET target (a path and query) with the admin token through
// d's handler.
func (d *Daemon) get(target string) *httptest.ResponseRecorder {
	req := httptest.NewRequest(http.MethodGet, "http://localhost"+target, nil)
	req.Header.Set("Authorization", "Bearer "+d.Token())
	rec := httptest.NewRecorder()
	d.srv.Handler.ServeHTTP(rec, req)
	return rec
}

// TestReadyzStopping runs the daemon, holds a registration in flight (its
// handler reading its body over the wire) and ends Run's context: from
// then on /readyz answers 503 saying the daemon stops, /healthz 200, a
// request that reaches the handler is served (not refused as if starting),
// and the registration in flight completes.
func TestReadyzStopping(t *testing.T) {
	t.Parallel()
	d := unstarted(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	errc := make(chan error, 1)
	go func() { errc <- d.Run(ctx) }()
	select {
	case <-d.Primed():
	case err := <-errc:
		t.Fatalf("Run = %v before it was primed", err)
	}
	if rec := d.get("/readyz"); rec.Code != http.StatusOK {
		t.Fatalf("GET /readyz once primed = %d %s, want 200", rec.Code, rec.Body)
	}

	// A registration in flight: the 100 Continue says its handler reads
	// its body.
	conn, err := net.Dial("tcp", d.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	body := `{"kind":"timer","recipient":"dave","predicate":{"at":"` + vigil.FormatTime(time.Now().Add(time.Hour)) + `"}}`
	fmt.Fprintf(conn, "POST /v1/watches HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\nExpect: 100-continue\r\n\r\n",
		d.Addr(), d.Token(), len(body))
	br := bufio.NewReader(conn)
	if line, err := br.ReadString('\n'); err != nil || !strings.HasPrefix(line, "HTTP/1.1 100") {
		t.Fatalf("before the body: %q, %v; want 100 Continue", line, err)
	}
	if line, err := br.ReadString('\n'); err != nil || line != "\r\n" {
		t.Fatalf("after 100 Continue: %q, %v", line, err)
	}

	cancel()
	<-d.stopped

	rec := d.get("/readyz")
	if rec.Code != http.StatusServiceUnavailable || !strings.Contains(rec.Body.String(), `"code":"unavailable"`) || !strings.Contains(rec.Body.String(), "vigil is stopping") {
		t.Errorf("GET /readyz once stopping = %d %s, want 503 unavailable saying vigil is stopping", rec.Code, rec.Body)
	}
	if rec := d.get("/healthz"); rec.Code != http.StatusOK {
		t.Errorf("GET /healthz once stopping = %d %s, want 200", rec.Code, rec.Body)
	}
	if rec := d.get("/v1/watches"); rec.Code != http.StatusOK {
		t.Errorf("GET /v1/watches once stopping = %d %s, want 200: the API serves until the server has shut down", rec.Code, rec.Body)
	}

	if _, err := io.WriteString(conn, body); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("the registration in flight: %v", err)
	}
	got, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		t.Errorf("the registration in flight = %d %s, want 201", resp.StatusCode, got)
	}
	if err := <-errc; err != nil {
		t.Errorf("Run = %v, want nil", err)
	}
}

// TestStoreCheck: /readyz's look at the store pings it at most once per
// storePingTTL (by the injected clock), answers the ping's error as a
// stable unavailable refusal, and sees the store back at the next ping.
func TestStoreCheck(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 12, 7, 8, 0, 0, 0, time.UTC)
	var pings int
	var fail error
	c := &storeCheck{
		now:  func() time.Time { return now },
		ping: func(context.Context) error { pings++; return fail },
	}
	for range 3 {
		if err := c.check(t.Context()); err != nil {
			t.Fatalf("check = %v, want nil", err)
		}
	}
	if pings != 1 {
		t.Errorf("3 checks within the TTL pinged %d times, want 1", pings)
	}
	fail = errors.New("connection refused")
	if err := c.check(t.Context()); err != nil || pings != 1 {
		t.Errorf("check within the TTL = %v after %d pings, want the cached nil after 1", err, pings)
	}
	now = now.Add(storePingTTL)
	err := c.check(t.Context())
	if vigil.ErrorCode(err) != vigil.CodeUnavailable || vigil.ErrorMessage(err) != "vigil cannot reach its database" || pings != 2 {
		t.Errorf("check past the TTL of a failing store = %v (%s) after %d pings, want unavailable: vigil cannot reach its database, after 2", err, vigil.ErrorCode(err), pings)
	}
	fail = nil
	if err := c.check(t.Context()); err == nil {
		t.Error("check within the TTL forgot the failure")
	}
	now = now.Add(storePingTTL)
	if err := c.check(t.Context()); err != nil || pings != 3 {
		t.Errorf("check past the TTL of a store back = %v after %d pings, want nil after 3", err, pings)
	}
}

// TestReadyzStoreClosed: a daemon whose SQLite store is closed is not
// ready, and says why.
func TestReadyzStoreClosed(t *testing.T) {
	t.Parallel()
	d := unstarted(t)
	d.ready.Store(true) // as Run does once primed
	if rec := d.get("/readyz"); rec.Code != http.StatusOK {
		t.Fatalf("GET /readyz = %d %s, want 200", rec.Code, rec.Body)
	}
	d.store.Close()
	d.storeOK.at = time.Time{} // the cached answer is past
	rec := d.get("/readyz")
	if rec.Code != http.StatusServiceUnavailable || !strings.Contains(rec.Body.String(), `"message":"not ready: vigil cannot reach its database"`) {
		t.Errorf("GET /readyz on a closed store = %d %s, want 503 saying vigil cannot reach its database", rec.Code, rec.Body)
	}
}
