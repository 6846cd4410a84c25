package mcpserver_test

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/vigil-run/vigil"
	"github.com/vigil-run/vigil/client"
	"github.com/vigil-run/vigil/mcpserver"
)

// TestResourcesListOwnInbox checks resources/list shows the connection's
// own inbox, over stdio-like and HTTP connections, and nothing for a
// connection that names no recipient.
func TestResourcesListOwnInbox(t *testing.T) {
	t.Parallel()
	e := startEngine(t)
	uris := func(cs *mcp.ClientSession) []string {
		t.Helper()
		res, err := cs.ListResources(t.Context(), nil)
		if err != nil {
			t.Fatalf("ListResources: %v", err)
		}
		var out []string
		for _, r := range res.Resources {
			out = append(out, r.URI)
		}
		return out
	}
	cs := connect(t, mcpserver.New(e, &mcpserver.Options{DefaultRecipient: "agent-1"}), nil)
	if got := uris(cs); len(got) != 1 || got[0] != "vigil://inbox/agent-1" {
		t.Errorf("resources/list = %v, want agent-1's inbox", got)
	}
	if res, err := cs.ReadResource(t.Context(), &mcp.ReadResourceParams{URI: "vigil://inbox/agent-1"}); err != nil || len(res.Contents) != 1 {
		t.Errorf("reading the listed inbox = %v, %v", res, err)
	}
	if got := uris(connect(t, mcpserver.New(e, nil), nil)); len(got) != 0 {
		t.Errorf("resources/list with no recipient = %v, want none", got)
	}

	h := startHTTP(t, nil)
	hs, err := h.dial(t, h.url+"?recipient=agent-7", adminToken, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := uris(hs); len(got) != 1 || got[0] != "vigil://inbox/agent-7" {
		t.Errorf("resources/list over HTTP ?recipient=agent-7 = %v, want agent-7's inbox", got)
	}
	// A scoped token's one recipient is its own inbox.
	if got := uris(h.connect(t, tokenA, nil)); len(got) != 1 || got[0] != "vigil://inbox/A" {
		t.Errorf("resources/list with the token of A = %v, want A's inbox", got)
	}
}

// TestProtocolErrorCodes checks a protocol error carries a valid
// JSON-RPC code and vigil's code in its data: a resource read with the
// daemon down, and a resource that is not there.
func TestProtocolErrorCodes(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	down := ln.Addr().String()
	ln.Close()
	c, err := client.New(down, "x", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.CloseIdleConnections()
	cs := connect(t, mcpserver.New(c, &mcpserver.Options{DefaultRecipient: "agent-1"}), nil)
	check := func(what string, err error, wantCode int64, wantData string) {
		t.Helper()
		var je *jsonrpc.Error
		if !errors.As(err, &je) {
			t.Fatalf("%s = %v, want a JSON-RPC error", what, err)
		}
		var data struct {
			Code string `json:"code"`
		}
		_ = json.Unmarshal(je.Data, &data)
		if je.Code != wantCode || data.Code != wantData {
			t.Errorf("%s = code %d, data %s (%q); want code %d, data code %q", what, je.Code, je.Data, je.Message, wantCode, wantData)
		}
	}
	_, err = cs.ReadResource(t.Context(), &mcp.ReadResourceParams{URI: "vigil://inbox/agent-1"})
	check("resources/read with the daemon down", err, jsonrpc.CodeInternalError, "unavailable")
	_, err = cs.ReadResource(t.Context(), &mcp.ReadResourceParams{URI: "vigil://elsewhere"})
	check("resources/read of an unknown URI", err, jsonrpc.CodeInvalidParams, "")
}

// TestInboxResourceReservedName: a recipient name may hold ':', '@' and
// '+'; the inbox URI resources/list gives for it is one the template
// matches, so resources/read answers it, and a subscription to it is told
// when a message lands.
func TestInboxResourceReservedName(t *testing.T) {
	t.Parallel()
	e := startEngine(t)
	const r = "dev@host:proj+1"
	if _, err := e.Note(t.Context(), vigil.NoteRequest{Recipient: r, Title: "first"}); err != nil {
		t.Fatal(err)
	}
	updated := make(chan string, 10)
	cs := connectVersion(t, mcpserver.New(e, &mcpserver.Options{DefaultRecipient: r}), &mcp.ClientOptions{
		ResourceUpdatedHandler: func(_ context.Context, req *mcp.ResourceUpdatedNotificationRequest) { updated <- req.Params.URI }}, legacyVersion)
	list, err := cs.ListResources(t.Context(), nil)
	if err != nil || len(list.Resources) == 0 {
		t.Fatalf("ListResources = %+v, %v", list, err)
	}
	uri := list.Resources[0].URI
	res, err := cs.ReadResource(t.Context(), &mcp.ReadResourceParams{URI: uri})
	if err != nil {
		t.Fatalf("ReadResource(%s), the URI resources/list gave for %s: %v", uri, r, err)
	}
	var inbox inboxResult
	if len(res.Contents) != 1 || json.Unmarshal([]byte(res.Contents[0].Text), &inbox) != nil || inbox.Recipient != r || len(inbox.Messages) != 1 {
		t.Fatalf("ReadResource(%s) = %+v, want %s's one message", uri, res.Contents, r)
	}
	if err := cs.Subscribe(t.Context(), &mcp.SubscribeParams{URI: uri}); err != nil {
		t.Fatalf("Subscribe(%s): %v", uri, err)
	}
	if _, err := e.Note(t.Context(), vigil.NoteRequest{Recipient: r, Title: "second"}); err != nil {
		t.Fatal(err)
	}
	// Blocks until told (go test's -timeout ends a test never told).
	if got := <-updated; got != uri {
		t.Errorf("resources/updated for %s, want %s", got, uri)
	}
}
