package httpapi_test

import (
	"bufio"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestHeadOnLongRoutesAnswersAtOnce: ServeMux serves HEAD on a GET route,
// and net/http drops a HEAD's body, so an event stream answered to HEAD
// would write heartbeats nobody reads and never end, holding its
// connection (a keep-alive client's next request on it was never
// answered) and counting as a long call for good. HEAD on the event
// stream and the long-polls answers the headers at once: the stream's,
// the watch's, or the mailbox page's without waiting and without moving
// the reader's cursor (ack is for a body that is read).
func TestHeadOnLongRoutesAnswersAtOnce(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	// Were the service called to wait, it would wait the full minute.
	e.fake.set(func(f *fake) { f.block = true })
	host := strings.TrimPrefix(e.ts.URL, "http://")
	for _, tt := range []struct {
		path        string
		contentType string
	}{
		{"/v1/events?recipient=agent-7", "text/event-stream"},
		{"/v1/watches/w1/wait?timeout=60s", "application/json"},
		{"/v1/recipients/agent-7/messages?reader=r&wait=60s&ack=true", "application/json"},
	} {
		conn, err := net.Dial("tcp", host)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		// HEAD, then another request on the same connection.
		if _, err := conn.Write([]byte("HEAD " + tt.path + " HTTP/1.1\r\nHost: " + host + "\r\nAuthorization: Bearer " + adminToken + "\r\n\r\n" +
			"GET /healthz HTTP/1.1\r\nHost: " + host + "\r\n\r\n")); err != nil {
			t.Fatal(err)
		}
		_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second)) // a hang detector only
		br := bufio.NewReader(conn)
		head, err := http.ReadResponse(br, &http.Request{Method: http.MethodHead})
		if err != nil {
			t.Fatalf("HEAD %s: %v", tt.path, err)
		}
		if head.StatusCode != http.StatusOK || head.Header.Get("Content-Type") != tt.contentType {
			t.Errorf("HEAD %s = %d %q, want 200 %q", tt.path, head.StatusCode, head.Header.Get("Content-Type"), tt.contentType)
		}
		next, err := http.ReadResponse(br, &http.Request{Method: http.MethodGet})
		if err != nil {
			t.Fatalf("after HEAD %s, the next request on the connection is not answered: %v (long calls open: %d)", tt.path, err, e.api.LongCalls())
		}
		next.Body.Close()
		if next.StatusCode != http.StatusOK {
			t.Errorf("GET /healthz after HEAD %s = %d, want 200", tt.path, next.StatusCode)
		}
	}
	if n := e.api.LongCalls(); n != 0 {
		t.Errorf("%d long calls open after the HEADs, want 0", n)
	}
	got := e.fake.snapshot()
	if n := e.fake.subscribers(); n != 0 || got.filter.Recipient != "" {
		t.Errorf("HEAD /v1/events subscribed (%d open, filter %+v), want no subscription", n, got.filter)
	}
	if got.waited != 0 {
		t.Errorf("HEAD .../wait waited %s, want no wait", got.waited)
	}
	if got.messages.Wait != 0 || got.messages.Ack || got.messages.Reader != "r" {
		t.Errorf("HEAD .../messages read %+v, want reader r without wait or ack", got.messages)
	}
}
