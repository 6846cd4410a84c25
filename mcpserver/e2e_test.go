package mcpserver_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.uber.org/goleak"

	"github.com/vigil-run/vigil"
	"github.com/vigil-run/vigil/cli"
	"github.com/vigil-run/vigil/daemon"
	"github.com/vigil-run/vigil/internal/daemontest"
	"github.com/vigil-run/vigil/mcpserver"
)

// childEnv, set in a child's environment, makes the test binary run the
// vigil command with its arguments instead of the tests: the subprocess
// tests start "vigil mcp" this way.
const childEnv = "VIGIL_MCPSERVER_TEST_VIGIL"

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) == "1" {
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		root := cli.New(os.Stdout, os.Stderr)
		root.SetArgs(os.Args[1:])
		err := root.ExecuteContext(ctx)
		stop()
		os.Exit(cli.ExitCode(err))
	}
	goleak.VerifyTestMain(m)
}

// startDaemon runs a real daemon in-process on 127.0.0.1:0 with a temp
// data dir until the test ends.
func startDaemon(t *testing.T) *daemon.Daemon {
	t.Helper()
	return daemontest.Start(t, daemontest.Config(t), nil).Daemon
}

// vigilMCP starts "vigil mcp ARGS" as a subprocess against d and returns
// an MCP client session over its stdin and stdout.
func vigilMCP(t *testing.T, d *daemon.Daemon, opts *mcp.ClientOptions, args ...string) (*mcp.ClientSession, *syncBuffer) {
	t.Helper()
	cmd := exec.Command(os.Args[0], append([]string{"mcp"}, args...)...)
	cmd.Env = []string{childEnv + "=1", "HOME=" + t.TempDir(), "USER=tester", "VIGIL_ADDR=" + d.Addr(), "VIGIL_TOKEN=" + d.Token()}
	stderr := &syncBuffer{}
	cmd.Stderr = stderr
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "v0"}, opts).Connect(t.Context(), &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatalf("starting vigil mcp: %v\nstderr: %s", err, stderr)
	}
	t.Cleanup(func() {
		if err := cs.Close(); err != nil {
			t.Errorf("closing vigil mcp: %v\nstderr: %s", err, stderr)
		}
	})
	return cs, stderr
}

// syncBuffer is a bytes.Buffer safe for a child's writes and the test's reads.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestVigilMCPStdio drives "vigil mcp", started as a real subprocess, with
// the SDK's client: it proxies every call to the running daemon.
func TestVigilMCPStdio(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	updated := make(chan string, 10)
	cs, stderr := vigilMCP(t, d, &mcp.ClientOptions{ResourceUpdatedHandler: func(_ context.Context, req *mcp.ResourceUpdatedNotificationRequest) {
		updated <- req.Params.URI
	}}, "--for", "agent-7")

	tools, err := cs.ListTools(t.Context(), nil)
	if err != nil {
		t.Fatalf("ListTools: %v", err)
	}
	if len(tools.Tools) != 7 {
		t.Errorf("vigil mcp lists %d tools, want 7", len(tools.Tools))
	}
	uri := mcpserver.InboxURI("agent-7")
	if err := cs.Subscribe(t.Context(), &mcp.SubscribeParams{URI: uri}); err != nil {
		t.Fatalf("Subscribe(%s): %v", uri, err)
	}

	w := callOK[watchResult](t, cs, "watch_create", map[string]any{"kind": "timer", "predicate": map[string]any{"in": "1s"}, "note": "look at the build"}).Watch
	if w.Recipient != "agent-7" || w.State != vigil.StatePending {
		t.Fatalf("watch_create through vigil mcp = %+v, want pending for agent-7", w)
	}
	if list := callOK[listResult](t, cs, "watch_list", map[string]any{}); len(list.Watches) != 1 || list.Watches[0].ID != w.ID {
		t.Errorf("watch_list through vigil mcp = %+v, want the one watch", list)
	}
	if got := callErr(t, cs, "watch_create", map[string]any{"kind": "bogus"}); !strings.HasPrefix(got, "unknown_kind:") {
		t.Errorf("watch_create(bogus) through vigil mcp = %q, want unknown_kind from the daemon", got)
	}
	if got := callOK[watchResult](t, cs, "watch_wait", map[string]any{"id": w.ID}); !got.Settled || got.Watch.State != vigil.StateFired {
		t.Fatalf("watch_wait through vigil mcp = %+v, want fired", got)
	}
	select {
	case got := <-updated:
		if got != uri {
			t.Errorf("resources/updated for %s, want %s", got, uri)
		}
	case <-time.After(eventually):
		t.Error("no resources/updated through vigil mcp after the watch fired")
	}
	inbox := callOK[inboxResult](t, cs, "inbox_read", map[string]any{})
	if len(inbox.Messages) != 1 || inbox.Messages[0].WatchID != w.ID || !strings.Contains(inbox.Messages[0].Text, "look at the build") {
		t.Errorf("inbox_read through vigil mcp = %+v, want the fired message", inbox)
	}
	if again := callOK[inboxResult](t, cs, "inbox_read", map[string]any{}); len(again.Messages) != 0 {
		t.Errorf("second inbox_read = %+v, want nothing new", again.Messages)
	}
	if s := stderr.String(); s != "" {
		t.Errorf("vigil mcp wrote to stderr:\n%s", s)
	}
}

// TestVigilMCPNoDaemon: with the daemon gone, vigil mcp still serves, and
// each call is a tool error saying the daemon is not reachable.
func TestVigilMCPNoDaemon(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	cs, _ := vigilMCP(t, d, nil, "--for", "agent-7", "--addr", "127.0.0.1:1")
	if got := callErr(t, cs, "watch_list", map[string]any{}); !strings.HasPrefix(got, "unavailable: vigil daemon not reachable at 127.0.0.1:1") {
		t.Errorf("watch_list with no daemon = %q, want unavailable", got)
	}
}

// TestDaemonMCP: the daemon serves the tools at /mcp with its tokens.
func TestDaemonMCP(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	connect := func(token string) (*mcp.ClientSession, error) {
		transport := &mcp.StreamableClientTransport{Endpoint: d.URL() + "/mcp?recipient=agent-9",
			HTTPClient: &http.Client{Transport: bearer{token, tr}}, MaxRetries: -1}
		return mcp.NewClient(&mcp.Implementation{Name: "test", Version: "v0"}, nil).Connect(t.Context(), transport, nil)
	}
	if _, err := connect("wrong"); err == nil {
		t.Error("Connect to /mcp with a wrong token = nil error, want it refused")
	}
	cs, err := connect(d.Token())
	if err != nil {
		t.Fatalf("Connect to /mcp: %v", err)
	}
	defer cs.Close()
	w := callOK[watchResult](t, cs, "watch_create", map[string]any{"kind": "timer", "predicate": map[string]any{"in": "1h"}}).Watch
	if w.Recipient != "agent-9" {
		t.Errorf("watch_create at /mcp?recipient=agent-9 is for %q", w.Recipient)
	}
	callOK[watchResult](t, cs, "watch_cancel", map[string]any{"id": w.ID})
	if got := callOK[inboxResult](t, cs, "inbox_read", map[string]any{}); len(got.Messages) != 1 {
		t.Errorf("inbox_read at /mcp = %+v, want the cancel line", got.Messages)
	}
}

// TestHTTPSessionBoundToToken: a session opened with one token cannot be
// used with another.
func TestHTTPSessionBoundToToken(t *testing.T) {
	t.Parallel()
	h := startHTTP(t, nil)
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	hc := &http.Client{Transport: tr}
	post := func(token, session, body string) *http.Response {
		t.Helper()
		req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, h.url, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Mcp-Protocol-Version", legacyVersion)
		if session != "" {
			req.Header.Set("Mcp-Session-Id", session)
		}
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp
	}
	resp := post(tokenA, "", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"`+legacyVersion+`","capabilities":{},"clientInfo":{"name":"t","version":"0"}}}`)
	session := resp.Header.Get("Mcp-Session-Id")
	if resp.StatusCode != http.StatusOK || session == "" {
		t.Fatalf("initialize = %s, session %q", resp.Status, session)
	}
	if resp := post(tokenA, session, `{"jsonrpc":"2.0","method":"notifications/initialized"}`); resp.StatusCode != http.StatusAccepted {
		t.Fatalf("notifications/initialized = %s", resp.Status)
	}
	list := `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`
	if resp := post(tokenB, session, list); resp.StatusCode != http.StatusForbidden {
		t.Errorf("tools/list in A's session with B's token = %s, want 403", resp.Status)
	}
	if resp := post(tokenA, session, list); resp.StatusCode != http.StatusOK {
		t.Errorf("tools/list in A's session with A's token = %s, want 200", resp.Status)
	}
	del, _ := http.NewRequestWithContext(t.Context(), http.MethodDelete, h.url, nil)
	del.Header.Set("Authorization", "Bearer "+tokenA)
	del.Header.Set("Mcp-Session-Id", session)
	if resp, err := hc.Do(del); err == nil {
		resp.Body.Close()
	}
}
