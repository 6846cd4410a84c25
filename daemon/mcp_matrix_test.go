package daemon_test

import (
	"net/http"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/vigil-run/vigil"
)

// bearerTransport adds a bearer token to every request.
type bearerTransport struct {
	token string
	next  http.RoundTripper
}

func (b bearerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.next.RoundTrip(r)
}

// TestTenantMatrixMCP: each scoped token, over MCP at /mcp, against every
// tool with the other's resources: each answer is a tool error, and
// nothing changed.
func TestTenantMatrixMCP(t *testing.T) {
	t.Parallel()
	d := start(t, testConfig(t.TempDir(), t.TempDir()))
	admin := newClient(t, d)
	a := newTenant(t, d, admin, "agent-a", false)
	b := newTenant(t, d, admin, "agent-b", false)
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)

	for _, pair := range [][2]*tenant{{a, b}, {b, a}} {
		me, other := pair[0], pair[1]
		transport := &mcp.StreamableClientTransport{Endpoint: d.URL() + "/mcp?recipient=" + me.recipient,
			HTTPClient: &http.Client{Transport: bearerTransport{me.secret, tr}}, MaxRetries: -1}
		cs, err := mcp.NewClient(&mcp.Implementation{Name: "matrix", Version: "v0"}, nil).Connect(t.Context(), transport, nil)
		if err != nil {
			t.Fatalf("Connect as %s: %v", me.recipient, err)
		}
		for _, c := range []struct {
			tool string
			args map[string]any
		}{
			{"watch_create", map[string]any{"kind": "timer", "recipient": other.recipient, "predicate": map[string]any{"in": "1h"}}},
			{"watch_list", map[string]any{"recipient": other.recipient}},
			{"watch_get", map[string]any{"id": other.pending}},
			{"watch_why", map[string]any{"id": other.pending}},
			{"watch_wait", map[string]any{"id": other.pending, "timeout": "1s"}},
			{"watch_cancel", map[string]any{"id": other.pending}},
			{"inbox_read", map[string]any{"recipient": other.recipient, "reader": "r"}},
			{"inbox_read", map[string]any{"recipient": other.recipient, "after": 0}},
		} {
			res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: c.tool, Arguments: c.args})
			if err == nil && !res.IsError {
				t.Errorf("%s: %s(%v) succeeded, want a tool error", me.recipient, c.tool, c.args)
			}
		}
		cs.Close()
	}
	for _, tn := range []*tenant{a, b} {
		w, err := tn.c.Watch(t.Context(), tn.pending)
		if err != nil || w.State != vigil.StatePending {
			t.Errorf("%s's pending watch afterwards: %v, %v", tn.recipient, w, err)
		}
		page, err := tn.c.Messages(t.Context(), vigil.MessagesRequest{Recipient: tn.recipient, Reader: "r"})
		if err != nil || len(page.Messages) != 1 || page.Cursor != 0 {
			t.Errorf("%s's mailbox for reader r afterwards: %+v, %v; want its one message, cursor untouched", tn.recipient, page, err)
		}
	}
}
