package mcpserver

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestRunClientGoneEndsItsWait: over one transport (stdio for "vigil
// mcp"), a client that goes away while a watch_wait waits ends that wait,
// and Run returns, rather than both lasting the wait's whole window.
func TestRunClientGoneEndsItsWait(t *testing.T) {
	t.Parallel()
	svc := &blockingWait{started: make(chan struct{}, 1), ended: make(chan error, 1)}
	ct, st := mcp.NewInMemoryTransports()
	done := make(chan error, 1)
	go func() {
		done <- Run(context.Background(), svc, &Options{MaxWait: time.Hour, DefaultRecipient: "A"}, st)
	}()
	// The client is a bare connection, which goes away by closing, as a
	// process that exits does.
	conn, err := ct.Connect(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range []struct {
		id     int64
		method string
		params string
	}{
		{1, "initialize", `{"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "test", "version": "v0"}}`},
		{0, "notifications/initialized", `{}`},
		{2, "tools/call", `{"name": "watch_wait", "arguments": {"id": "w1"}}`},
	} {
		req := &jsonrpc.Request{Method: m.method, Params: json.RawMessage(m.params)}
		if m.id != 0 {
			req.ID, _ = jsonrpc.MakeID(float64(m.id))
		}
		if err := conn.Write(t.Context(), req); err != nil {
			t.Fatal(err)
		}
	}
	select {
	case <-svc.started:
	case <-time.After(10 * time.Second):
		t.Fatal("watch_wait never reached the service")
	}
	_ = conn.Close()
	select {
	case <-svc.ended:
	case <-time.After(10 * time.Second):
		t.Fatal("watch_wait of a client gone away still runs, want it ended")
	}
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return after its client went away")
	}
}
