package mcpserver_test

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/vigil-run/vigil"
	"github.com/vigil-run/vigil/engine"
	"github.com/vigil-run/vigil/httpapi"
	"github.com/vigil-run/vigil/mcpserver"
)

// The tokens of the HTTP tests: the admin, and one scoped to each of the
// recipients A and B.
const (
	adminToken = "admin-token"
	tokenA     = "tok-a"
	tokenB     = "tok-b"
)

// httpEnv is the MCP handler mounted on the HTTP API of a real engine, as
// the daemon mounts it, served on a loopback port.
type httpEnv struct {
	url string
	eng *engine.Engine
}

func startHTTP(t *testing.T, opts *mcpserver.Options) *httpEnv {
	t.Helper()
	e := startEngine(t)
	api := httpapi.New(httpapi.Options{
		Service:    e,
		AdminToken: adminToken,
		AuthenticateFunc: func(_ context.Context, token string) (vigil.Scope, bool, error) {
			switch token {
			case tokenA:
				return vigil.Scope{Recipients: []string{"A"}, TokenID: "a"}, true, nil
			case tokenB:
				return vigil.Scope{Recipients: []string{"B"}, TokenID: "b"}, true, nil
			}
			return vigil.Scope{}, false, nil
		},
	})
	h := mcpserver.NewHandler(e, opts)
	api.Mount("/mcp", h)
	srv := httptest.NewServer(api.Handler())
	t.Cleanup(func() {
		h.Close()
		api.Close()
		srv.Close()
	})
	return &httpEnv{url: srv.URL + "/mcp", eng: e}
}

// bearer adds a bearer token to every request.
type bearer struct {
	token string
	next  http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.next.RoundTrip(r)
}

// dial opens an MCP session over streamable HTTP with token; it ends with
// the test.
func (h *httpEnv) dial(t *testing.T, url, token string, opts *mcp.ClientOptions) (*mcp.ClientSession, error) {
	t.Helper()
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	transport := &mcp.StreamableClientTransport{Endpoint: url, HTTPClient: &http.Client{Transport: bearer{token, tr}}, MaxRetries: -1}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "v0"}, opts).Connect(t.Context(), transport, nil)
	if err == nil {
		t.Cleanup(func() { cs.Close() })
	}
	return cs, err
}

func (h *httpEnv) connect(t *testing.T, token string, opts *mcp.ClientOptions) *mcp.ClientSession {
	t.Helper()
	cs, err := h.dial(t, h.url, token, opts)
	if err != nil {
		t.Fatalf("Connect over HTTP with %s: %v", token, err)
	}
	return cs
}

// TestHTTPWaitAndInbox drives the tools over real streamable HTTP: a wait
// on a watch that is not due answers at once with retry_after, a wait on
// one due in a second answers settled, and the inbox gives the message
// once per reader.
func TestHTTPWaitAndInbox(t *testing.T) {
	t.Parallel()
	h := startHTTP(t, &mcpserver.Options{ProgressEvery: 200 * time.Millisecond})
	progress := make(chan *mcp.ProgressNotificationParams, 100)
	cs := h.connect(t, tokenA, &mcp.ClientOptions{ProgressNotificationHandler: func(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
		progress <- req.Params
	}})

	later := callOK[watchResult](t, cs, "watch_create", map[string]any{"kind": "timer", "predicate": map[string]any{"in": "10m"}}).Watch
	if later.Recipient != "A" {
		t.Errorf("watch_create with a token for A made a watch for %q, want A", later.Recipient)
	}
	start := time.Now()
	waited := callOK[watchResult](t, cs, "watch_wait", map[string]any{"id": later.ID})
	if d := time.Since(start); d >= 5*time.Second {
		t.Errorf("watch_wait on a watch due in 10m took %s, want well before 50s", d)
	}
	if waited.Settled || waited.Watch.State != vigil.StatePending || waited.RetryAfter < 590 || waited.RetryAfter > 601 {
		t.Errorf("watch_wait = settled %v, %s, retry_after %d; want pending, retry_after about 600", waited.Settled, waited.Watch.State, waited.RetryAfter)
	}
	// A tcp watch is next checked in 5s: a wait of 300ms cannot see a
	// change either, and answers at once.
	tcp := callOK[watchResult](t, cs, "watch_create", map[string]any{"kind": "tcp", "predicate": map[string]any{"address": "db:5432"}}).Watch
	waited = callOK[watchResult](t, cs, "watch_wait", map[string]any{"id": tcp.ID, "timeout": "300ms"})
	if waited.Settled || waited.RetryAfter < 1 || waited.RetryAfter > 5 {
		t.Errorf("watch_wait(tcp, 300ms) = settled %v, retry_after %d; want pending, retry_after at most 5", waited.Settled, waited.RetryAfter)
	}
	// A file watch may change between checks: the wait lasts its timeout.
	file := callOK[watchResult](t, cs, "watch_create", map[string]any{"kind": "file", "predicate": map[string]any{"path": "/tmp/x"}}).Watch
	start = time.Now()
	waited = callOK[watchResult](t, cs, "watch_wait", map[string]any{"id": file.ID, "timeout": "300ms"})
	if d := time.Since(start); d < 250*time.Millisecond || d > 5*time.Second {
		t.Errorf("watch_wait(file, 300ms) took %s, want about 300ms", d)
	}
	if waited.Settled || waited.RetryAfter < 1 {
		t.Errorf("watch_wait(file, 300ms) = settled %v, retry_after %d; want pending with a retry_after", waited.Settled, waited.RetryAfter)
	}

	soon := callOK[watchResult](t, cs, "watch_create", map[string]any{"kind": "timer", "predicate": map[string]any{"in": "1s"}, "note": "check the deploy"}).Watch
	params := &mcp.CallToolParams{Name: "watch_wait", Arguments: map[string]any{"id": soon.ID}}
	params.SetProgressToken("wait-http")
	res, err := cs.CallTool(t.Context(), params)
	if err != nil || res.IsError {
		t.Fatalf("watch_wait = %v, %+v", err, res)
	}
	var settled watchResult
	b, _ := json.Marshal(res.StructuredContent)
	if err := json.Unmarshal(b, &settled); err != nil {
		t.Fatal(err)
	}
	if !settled.Settled || settled.Watch.State != vigil.StateFired || settled.RetryAfter != 0 {
		t.Fatalf("watch_wait on a timer due in 1s = settled %v, %s, retry_after %d; want fired", settled.Settled, settled.Watch.State, settled.RetryAfter)
	}
	// Progress reached the client over the call's stream while it waited.
	select {
	case p := <-progress:
		if p.ProgressToken != "wait-http" {
			t.Errorf("progress token = %v, want wait-http", p.ProgressToken)
		}
	case <-time.After(eventually):
		t.Error("watch_wait over HTTP sent no progress notification, want some")
	}

	for _, reader := range []string{"agent", "panel"} {
		got := callOK[inboxResult](t, cs, "inbox_read", map[string]any{"reader": reader})
		if len(got.Messages) != 1 || got.Messages[0].WatchID != soon.ID || !strings.Contains(got.Messages[0].Text, "check the deploy") {
			t.Errorf("inbox_read(reader %s) = %+v, want the fired message of %s once", reader, got.Messages, soon.ID)
		}
		if again := callOK[inboxResult](t, cs, "inbox_read", map[string]any{"reader": reader}); len(again.Messages) != 0 {
			t.Errorf("second inbox_read(reader %s) = %+v, want nothing new", reader, again.Messages)
		}
	}
}

// TestHTTPTokenWatch: a token watch's result holds its completion URL on
// the daemon, and a POST there settles it.
func TestHTTPTokenWatch(t *testing.T) {
	t.Parallel()
	h := startHTTP(t, nil)
	cs := h.connect(t, tokenA, nil)
	created := callOK[watchResult](t, cs, "watch_create", map[string]any{"kind": "token"})
	w := created.Watch
	base := strings.TrimSuffix(h.url, "/mcp")
	if w.CompletionToken == "" || w.CompletionURL != base+httpapi.CompletionPath(w.CompletionToken) {
		t.Fatalf("watch_create(token) = token %q, url %q; want the token and its URL on %s", w.CompletionToken, w.CompletionURL, base)
	}
	if !strings.Contains(created.Hint, w.CompletionURL) {
		t.Errorf("watch_create(token) hint = %q, want it to give the URL", created.Hint)
	}
	if got := callOK[watchResult](t, cs, "watch_get", map[string]any{"id": w.ID}); got.Watch.CompletionToken != "" || got.Watch.CompletionURL != "" {
		t.Errorf("watch_get shows the completion token again: %+v", got.Watch)
	}
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr}).Post(w.CompletionURL, "application/json", strings.NewReader(`{"status": "success"}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("POST %s = %s", w.CompletionURL, resp.Status)
	}
	if got := callOK[watchResult](t, cs, "watch_wait", map[string]any{"id": w.ID, "timeout": "5s"}); !got.Settled || got.Watch.State != vigil.StateFired {
		t.Errorf("watch_wait after the completion = %+v, want fired", got)
	}
}

// TestHTTPScopedToken: a token scoped to A cannot list, read, wait on,
// cancel or subscribe to B's watches and inbox, nor register for B.
func TestHTTPScopedToken(t *testing.T) {
	t.Parallel()
	h := startHTTP(t, &mcpserver.Options{DefaultRecipient: "ada"})
	a := h.connect(t, tokenA, nil)
	b := h.connect(t, tokenB, nil)

	// The configured default is not A's: a token for A acts for A.
	wa := callOK[watchResult](t, a, "watch_create", map[string]any{"kind": "timer", "predicate": map[string]any{"in": "1h"}}).Watch
	wb := callOK[watchResult](t, b, "watch_create", map[string]any{"kind": "timer", "predicate": map[string]any{"in": "1h"}}).Watch
	if wa.Recipient != "A" || wb.Recipient != "B" {
		t.Fatalf("recipients = %s, %s; want A, B", wa.Recipient, wb.Recipient)
	}
	callOK[watchResult](t, b, "watch_cancel", map[string]any{"id": callOK[watchResult](t, b, "watch_create",
		map[string]any{"kind": "timer", "predicate": map[string]any{"in": "2h"}}).Watch.ID}) // a line in B's inbox

	for _, args := range []map[string]any{{}, {"state": "all"}, {"recipient": "B"}, {"recipient": "B", "state": "all"}} {
		res := call(t, a, "watch_list", args)
		if res.IsError {
			if got := text(res); args["recipient"] != "B" || !strings.HasPrefix(got, "not_found:") {
				t.Errorf("watch_list(%v) with A's token = %q", args, got)
			}
			continue
		}
		b, _ := json.Marshal(res.StructuredContent)
		var list listResult
		if err := json.Unmarshal(b, &list); err != nil {
			t.Fatal(err)
		}
		for _, w := range list.Watches {
			if w.Recipient != "A" {
				t.Errorf("watch_list(%v) with A's token shows %s's watch %s", args, w.Recipient, w.ID)
			}
		}
	}
	for _, tool := range []string{"watch_get", "watch_why", "watch_wait", "watch_cancel"} {
		if got := callErr(t, a, tool, map[string]any{"id": wb.ID}); !strings.HasPrefix(got, "not_found:") {
			t.Errorf("%s(B's watch) with A's token = %q, want not_found", tool, got)
		}
	}
	if got := callErr(t, a, "inbox_read", map[string]any{"recipient": "B"}); !strings.HasPrefix(got, "not_found:") {
		t.Errorf("inbox_read(B) with A's token = %q, want not_found", got)
	}
	if got := callErr(t, a, "watch_create", map[string]any{"kind": "timer", "predicate": map[string]any{"in": "3h"}, "recipient": "B"}); !strings.HasPrefix(got, "unauthorized:") && !strings.HasPrefix(got, "not_found:") {
		t.Errorf("watch_create(for B) with A's token = %q, want it refused (unauthorized or not_found)", got)
	}
	if err := a.Subscribe(t.Context(), &mcp.SubscribeParams{URI: mcpserver.InboxURI("B")}); err == nil {
		t.Error("Subscribe(B's inbox) with A's token = nil, want an error")
	}
	if _, err := a.ReadResource(t.Context(), &mcp.ReadResourceParams{URI: mcpserver.InboxURI("B")}); err == nil {
		t.Error("ReadResource(B's inbox) with A's token = nil, want an error")
	}

	// B's watch is untouched, nothing was registered for B, and B's inbox
	// is unread.
	if got := callOK[watchResult](t, b, "watch_get", map[string]any{"id": wb.ID}); got.Watch.State != vigil.StatePending {
		t.Errorf("B's watch is %s after A's attempts, want pending", got.Watch.State)
	}
	if got := callOK[listResult](t, b, "watch_list", map[string]any{}); len(got.Watches) != 1 {
		t.Errorf("B has %d pending watches after A's attempts, want its 1", len(got.Watches))
	}
	if got := callOK[inboxResult](t, b, "inbox_read", map[string]any{"ack": false}); len(got.Messages) != 1 {
		t.Errorf("B's inbox = %+v, want its one line still unread", got.Messages)
	}

	// The admin acts for the configured default, or for whom it names.
	admin := h.connect(t, adminToken, nil)
	if w := callOK[watchResult](t, admin, "watch_create", map[string]any{"kind": "timer", "predicate": map[string]any{"in": "1h"}}).Watch; w.Recipient != "ada" {
		t.Errorf("the admin's watch is for %q, want the default ada", w.Recipient)
	}
	if got := callOK[watchResult](t, admin, "watch_get", map[string]any{"id": wb.ID}); got.Watch.ID != wb.ID {
		t.Errorf("the admin's watch_get(B's watch) = %+v", got.Watch)
	}
}

// TestHTTPConnection: no token or a wrong one is refused before any MCP
// is spoken; ?recipient= names the connection's default recipient.
func TestHTTPConnection(t *testing.T) {
	t.Parallel()
	h := startHTTP(t, nil)
	for _, token := range []string{"", "wrong"} {
		if _, err := h.dial(t, h.url, token, nil); err == nil {
			t.Errorf("Connect with token %q = nil error, want it refused", token)
		}
	}
	cs, err := h.dial(t, h.url+"?recipient=agent-7", adminToken, nil)
	if err != nil {
		t.Fatalf("Connect: %v", err)
	}
	if w := callOK[watchResult](t, cs, "watch_create", map[string]any{"kind": "timer", "predicate": map[string]any{"in": "1h"}}).Watch; w.Recipient != "agent-7" {
		t.Errorf("watch_create on /mcp?recipient=agent-7 is for %q, want agent-7", w.Recipient)
	}
	if list := callOK[listResult](t, cs, "watch_list", map[string]any{}); list.Recipient != "agent-7" || len(list.Watches) != 1 {
		t.Errorf("watch_list on /mcp?recipient=agent-7 = %+v, want agent-7's one watch", list)
	}
	// Without a default, the admin must name a recipient.
	plain := h.connect(t, adminToken, nil)
	if got := callErr(t, plain, "watch_list", map[string]any{}); !strings.HasPrefix(got, "invalid_request: no recipient") {
		t.Errorf("watch_list with no recipient anywhere = %q, want invalid_request", got)
	}
}

// TestHTTPSubscription: a client subscribed over HTTP is told when a
// message lands in the inbox.
func TestHTTPSubscription(t *testing.T) {
	t.Parallel()
	h := startHTTP(t, nil)
	updated := make(chan string, 10)
	cs := h.connect(t, tokenA, &mcp.ClientOptions{ResourceUpdatedHandler: func(_ context.Context, req *mcp.ResourceUpdatedNotificationRequest) {
		updated <- req.Params.URI
	}})
	uri := mcpserver.InboxURI("A")
	if err := cs.Subscribe(t.Context(), &mcp.SubscribeParams{URI: uri}); err != nil {
		t.Fatalf("Subscribe(%s): %v", uri, err)
	}
	settleUntilNotified(t, cs, updated, uri)
}

// TestHTTPStreamsSayRetry: every event stream /mcp answers with (a POST's,
// and the GET stream of server messages) opens with a "retry:" field, so a
// client that loses one knows when to come back (the MCP conformance
// suite's server-sse-polling warns without it); a JSON answer is left as
// it is.
func TestHTTPStreamsSayRetry(t *testing.T) {
	t.Parallel()
	h := startHTTP(t, nil)
	post := func(session, body, accept string) *http.Response {
		t.Helper()
		req, _ := http.NewRequestWithContext(t.Context(), "POST", h.url, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+adminToken)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", accept)
		req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
		if session != "" {
			req.Header.Set("Mcp-Session-Id", session)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { resp.Body.Close() })
		return resp
	}
	firstLine := func(resp *http.Response) string {
		t.Helper()
		line, err := bufio.NewReader(resp.Body).ReadString('\n')
		if err != nil {
			t.Fatalf("reading the stream: %v", err)
		}
		return line
	}
	opened := post("", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`,
		"application/json, text/event-stream")
	if ct := opened.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("initialize answered %s, want an event stream", ct)
	}
	if got := firstLine(opened); got != "retry: 2000\n" {
		t.Errorf("the initialize stream begins %q, want retry: 2000", got)
	}
	session := opened.Header.Get("Mcp-Session-Id")
	post(session, `{"jsonrpc":"2.0","method":"notifications/initialized"}`, "application/json, text/event-stream")

	list := post(session, `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`, "application/json, text/event-stream")
	if got := firstLine(list); got != "retry: 2000\n" {
		t.Errorf("the tools/list stream begins %q, want retry: 2000", got)
	}

	req, _ := http.NewRequestWithContext(t.Context(), "GET", h.url, nil)
	req.Header.Set("Authorization", "Bearer "+adminToken)
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Mcp-Session-Id", session)
	req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
	get, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer get.Body.Close()
	if get.StatusCode != http.StatusOK {
		t.Fatalf("GET /mcp = %s", get.Status)
	}
	if got := firstLine(get); got != "retry: 2000\n" {
		t.Errorf("the GET stream begins %q, want retry: 2000", got)
	}
}
