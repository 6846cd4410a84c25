package httpapi_test

import (
	"bufio"
	"net"
	"net/http"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/vigil-run/vigil"
	"github.com/vigil-run/vigil/httpapi"
)

// An event stream whose client keeps its connection but stops reading is
// dropped once a write cannot be taken for two heartbeats: its handler,
// its subscription and what it holds are let go.
func TestEventStreamDropsAClientThatStopsReading(t *testing.T) {
	e := newEnv(t, func(o *httpapi.Options) { o.Heartbeat = 20 * time.Millisecond })
	conn, err := net.Dial("tcp", strings.TrimPrefix(e.ts.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if err := conn.(*net.TCPConn).SetReadBuffer(4096); err != nil {
		t.Fatal(err)
	}
	req := "GET /v1/events HTTP/1.1\r\nHost: " + strings.TrimPrefix(e.ts.URL, "http://") + "\r\nAuthorization: Bearer " + adminToken + "\r\n\r\n"
	if _, err := conn.Write([]byte(req)); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /v1/events: %v %v", resp, err)
	}
	// From here on the client reads nothing.
	big := strings.Repeat("x", 32<<10)
	gone := time.After(time.Minute) // not a timing claim: a bound on a hang
	for e.fake.subscribers() > 0 {
		select {
		case <-gone:
			t.Fatal("the stream still holds its subscription a minute after its client stopped reading")
		default:
		}
		e.fake.publish(vigil.Event{Type: vigil.EventWatchProgress, WatchID: "w1", Recipient: "r", Text: big})
		runtime.Gosched() // lets the stream write what it was given
	}
}
