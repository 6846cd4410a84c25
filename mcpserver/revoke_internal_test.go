package mcpserver

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/vigil-run/vigil"
	"github.com/vigil-run/vigil/httpapi"
)

// blockingWait is a service whose watch is pending and may change at any
// time, and whose Wait blocks until its context ends, saying when it
// started and when it ended.
type blockingWait struct {
	vigil.Service
	started chan struct{}
	ended   chan error
}

func (b *blockingWait) Watch(context.Context, string) (*vigil.Watch, error) {
	return &vigil.Watch{ID: "w1", Kind: vigil.KindFile, Recipient: "A", State: vigil.StatePending}, nil
}

func (b *blockingWait) Wait(ctx context.Context, _ string, _ time.Duration) (*vigil.Watch, error) {
	b.started <- struct{}{}
	<-ctx.Done()
	b.ended <- context.Cause(ctx)
	return nil, ctx.Err()
}

type bearerRT struct {
	token string
	next  http.RoundTripper
}

func (b bearerRT) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.next.RoundTrip(r)
}

// startBlocking serves NewHandler over svc behind httpapi, with tok-a
// valid until revoked is set.
func startBlocking(t *testing.T, svc *blockingWait, revoked *atomic.Bool) string {
	t.Helper()
	api := httpapi.New(httpapi.Options{
		Service: svc,
		Recheck: 20 * time.Millisecond,
		AuthenticateFunc: func(_ context.Context, token string) (vigil.Scope, bool, error) {
			if token != "tok-a" || revoked.Load() {
				return vigil.Scope{}, false, nil
			}
			return vigil.Scope{Recipients: []string{"A"}, TokenID: "a"}, true, nil
		},
	})
	h := NewHandler(svc, &Options{MaxWait: time.Hour})
	api.Mount("/mcp", h)
	srv := httptest.NewServer(api.Handler())
	t.Cleanup(func() {
		h.Close()
		api.Close()
		srv.Close()
	})
	return srv.URL + "/mcp"
}

// TestHTTPClientGoneEndsItsWait: a watch_wait whose client goes away
// (its connection closed, no notifications/cancelled sent) ends
// server-side, rather than waiting its whole window for nobody.
func TestHTTPClientGoneEndsItsWait(t *testing.T) {
	t.Parallel()
	svc := &blockingWait{started: make(chan struct{}, 1), ended: make(chan error, 1)}
	url := startBlocking(t, svc, new(atomic.Bool))
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	hc := &http.Client{Transport: tr}
	session := ""
	post := func(ctx context.Context, body string) *http.Response {
		t.Helper()
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer tok-a")
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if session != "" {
			req.Header.Set("Mcp-Session-Id", session)
			req.Header.Set("Mcp-Protocol-Version", "2025-06-18")
		}
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode/100 != 2 {
			b, _ := io.ReadAll(resp.Body)
			t.Fatalf("POST %s = %s %s", body, resp.Status, b)
		}
		return resp
	}
	resp := post(t.Context(), `{"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "test", "version": "v0"}}}`)
	session = resp.Header.Get("Mcp-Session-Id")
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	post(t.Context(), `{"jsonrpc": "2.0", "method": "notifications/initialized"}`).Body.Close()

	ctx, hangUp := context.WithCancel(t.Context())
	defer hangUp()
	// The answer's headers come with its first event: the call is made
	// aside, and its connection closed by hangUp.
	go func() {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(
			`{"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "watch_wait", "arguments": {"id": "w1"}}}`))
		if err != nil {
			return
		}
		req.Header = http.Header{"Authorization": {"Bearer tok-a"}, "Content-Type": {"application/json"},
			"Accept": {"application/json, text/event-stream"}, "Mcp-Session-Id": {session}, "Mcp-Protocol-Version": {"2025-06-18"}}
		if resp, err := hc.Do(req); err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
	}()
	select {
	case <-svc.started:
	case <-time.After(10 * time.Second):
		t.Fatal("watch_wait never reached the service")
	}
	hangUp()
	select {
	case <-svc.ended:
	case <-time.After(10 * time.Second):
		t.Fatal("watch_wait of a client gone away still runs server-side, want it ended with its request")
	}
}

// TestHTTPRevokedTokenEndsItsWait: a watch_wait over HTTP whose token is
// revoked while it waits ends server-side, as the HTTP API's long-polls
// do, rather than waiting its whole window for a caller whose stream was
// cut; and a call made after the revocation is refused.
func TestHTTPRevokedTokenEndsItsWait(t *testing.T) {
	t.Parallel()
	svc := &blockingWait{started: make(chan struct{}, 1), ended: make(chan error, 1)}
	var revoked atomic.Bool
	url := startBlocking(t, svc, &revoked)
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	transport := &mcp.StreamableClientTransport{Endpoint: url, HTTPClient: &http.Client{Transport: bearerRT{"tok-a", tr}}, MaxRetries: -1}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "v0"}, nil).Connect(t.Context(), transport, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })

	go func() {
		_, _ = cs.CallTool(context.WithoutCancel(t.Context()), &mcp.CallToolParams{Name: "watch_wait", Arguments: map[string]any{"id": "w1"}})
	}()
	select {
	case <-svc.started:
	case <-time.After(10 * time.Second):
		t.Fatal("watch_wait never reached the service")
	}
	revoked.Store(true)
	select {
	case cause := <-svc.ended:
		if vigil.ErrorCode(cause) != vigil.CodeUnauthorized {
			t.Errorf("the wait ended with %v, want the HTTP API's unauthorized", cause)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("watch_wait of a revoked token still runs server-side, want it ended with its request")
	}
	if res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "watch_get", Arguments: map[string]any{"id": "w1"}}); err == nil {
		t.Errorf("watch_get after the token was revoked = %+v, want refused", res)
	}
}

// inboxFollower is blockingWait with an inbox to subscribe to: empty, and
// whose event stream lasts until its context ends.
type inboxFollower struct {
	blockingWait
	unsubscribed chan struct{}
}

func (f *inboxFollower) Messages(context.Context, vigil.MessagesRequest) (vigil.MessagesPage, error) {
	return vigil.MessagesPage{Messages: []*vigil.Message{}}, nil
}

func (f *inboxFollower) Subscribe(ctx context.Context, _ vigil.EventFilter) (<-chan vigil.Event, error) {
	ch := make(chan vigil.Event)
	context.AfterFunc(ctx, func() {
		close(ch)
		f.unsubscribed <- struct{}{}
	})
	return ch, nil
}

// TestHTTPRevokedTokenEndsItsSession: a session whose token is revoked
// while its event stream is open is closed, and with it its inbox
// listener, rather than kept for the day a session may idle with nothing
// but refusals to come.
func TestHTTPRevokedTokenEndsItsSession(t *testing.T) {
	t.Parallel()
	svc := &inboxFollower{unsubscribed: make(chan struct{}, 1)}
	var revoked atomic.Bool
	api := httpapi.New(httpapi.Options{
		Service: svc,
		Recheck: 20 * time.Millisecond,
		AuthenticateFunc: func(_ context.Context, token string) (vigil.Scope, bool, error) {
			if token != "tok-a" || revoked.Load() {
				return vigil.Scope{}, false, nil
			}
			return vigil.Scope{Recipients: []string{"A"}, TokenID: "a"}, true, nil
		},
	})
	h := NewHandler(svc, nil)
	api.Mount("/mcp", h)
	srv := httptest.NewServer(api.Handler())
	t.Cleanup(func() {
		h.Close()
		api.Close()
		srv.Close()
	})
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	transport := &mcp.StreamableClientTransport{Endpoint: srv.URL + "/mcp", HTTPClient: &http.Client{Transport: bearerRT{"tok-a", tr}}, MaxRetries: -1}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "v0"}, &mcp.ClientOptions{
		ResourceUpdatedHandler: func(context.Context, *mcp.ResourceUpdatedNotificationRequest) {},
	}).Connect(t.Context(), transport, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	if err := cs.Subscribe(t.Context(), &mcp.SubscribeParams{URI: InboxURI("A")}); err != nil {
		t.Fatal(err)
	}
	revoked.Store(true)
	select {
	case <-svc.unsubscribed:
	case <-time.After(10 * time.Second):
		t.Fatal("the inbox listener of a revoked token's session still runs, want its session closed")
	}
}
