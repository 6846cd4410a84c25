package daemon_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/vigil-run/vigil"
)

// TestLongCallsBoundedPerTokenAcrossSurfaces: through the daemon's wiring,
// max_streams_per_token counts a token's event streams and its MCP
// requests together: with both slots held by streams, the token's MCP
// request is refused 429 rate_limited with Retry-After, another token's is
// not, and the admin's streams are not bounded.
func TestLongCallsBoundedPerTokenAcrossSurfaces(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t.TempDir(), t.TempDir())
	cfg.MaxStreamsPerToken = 2
	d := start(t, cfg)
	admin := newClient(t, d)
	a := newTenant(t, d, admin, "agent-a", false)
	b := newTenant(t, d, admin, "agent-b", false)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	for i := range cfg.MaxStreamsPerToken {
		if _, err := a.c.Subscribe(ctx, vigil.EventFilter{}); err != nil {
			t.Fatalf("stream %d of A: %v", i+1, err)
		}
	}
	if _, err := a.c.Subscribe(ctx, vigil.EventFilter{}); vigil.ErrorCode(err) != vigil.CodeRateLimited {
		t.Errorf("A's stream past the bound = %v, want rate_limited", err)
	}
	mcp := func(secret string) *http.Response {
		t.Helper()
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+d.Addr()+"/mcp", strings.NewReader(
			`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+secret)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp
	}
	if resp := mcp(a.secret); resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") == "" {
		t.Errorf("A's MCP request with its streams all open: %s (Retry-After %q), want 429 with Retry-After", resp.Status, resp.Header.Get("Retry-After"))
	}
	if resp := mcp(b.secret); resp.StatusCode != http.StatusOK {
		t.Errorf("B's MCP request: %s, want 200", resp.Status)
	}
	for i := range cfg.MaxStreamsPerToken + 1 {
		if _, err := admin.Subscribe(ctx, vigil.EventFilter{}); err != nil {
			t.Errorf("admin stream %d: %v, want the admin not bounded", i+1, err)
		}
	}
}
