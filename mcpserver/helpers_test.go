package mcpserver_test

import (
	"context"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/vigil-run/vigil"
	"github.com/vigil-run/vigil/engine"
	"github.com/vigil-run/vigil/mcpserver"
	"github.com/vigil-run/vigil/store/memstore"
	"github.com/vigil-run/vigil/watcher"
	"github.com/vigil-run/vigil/watcher/timer"
	"github.com/vigil-run/vigil/watcher/token"
	"github.com/vigil-run/vigil/watcher/watchertest"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

// startEngine runs an engine on a memory store with the real timer
// watcher, a tcp fake that never settles and an http fake that settles at
// its first probe, a file fake that never settles (a kind that may settle
// between checks) and the real token watcher, on the real clock, until the test ends.
func startEngine(t *testing.T) *engine.Engine {
	t.Helper()
	reg := watcher.NewRegistry(timer.New(timer.Config{}), watchertest.NeverSettles(vigil.KindTCP), watchertest.SettlesAfter(vigil.KindHTTP, 1),
		watchertest.NeverSettles(vigil.KindFile), token.New(token.Config{}))
	e := engine.New(engine.Config{Store: memstore.New(), Watchers: reg})
	if err := e.Prime(t.Context()); err != nil {
		t.Fatalf("Prime: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- e.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	return e
}

// connect serves srv over in-memory transports and returns a client
// session to it; both end with the test.
func connect(t *testing.T, srv *mcp.Server, opts *mcp.ClientOptions) *mcp.ClientSession {
	t.Helper()
	return connectVersion(t, srv, opts, "")
}

// connectVersion is connect asking for protocol version v ("" for the
// latest).
func connectVersion(t *testing.T, srv *mcp.Server, opts *mcp.ClientOptions, v string) *mcp.ClientSession {
	t.Helper()
	ct, st := mcp.NewInMemoryTransports()
	ss, err := srv.Connect(t.Context(), st, nil)
	if err != nil {
		t.Fatalf("server Connect: %v", err)
	}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "v0"}, opts).Connect(t.Context(), ct, &mcp.ClientSessionOptions{ProtocolVersion: v})
	if err != nil {
		t.Fatalf("client Connect: %v", err)
	}
	t.Cleanup(func() {
		cs.Close()
		ss.Wait()
	})
	return cs
}

// call calls a tool and returns its result; a protocol error fails the test.
func call(t *testing.T, cs *mcp.ClientSession, name string, args any) *mcp.CallToolResult {
	t.Helper()
	res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("CallTool(%s) protocol error: %v", name, err)
	}
	return res
}

// callOK calls a tool that must succeed and decodes its structured result.
func callOK[T any](t *testing.T, cs *mcp.ClientSession, name string, args any) T {
	t.Helper()
	res := call(t, cs, name, args)
	if res.IsError {
		t.Fatalf("CallTool(%s, %v) = tool error %q, want success", name, args, text(res))
	}
	var out T
	b, err := json.Marshal(res.StructuredContent)
	if err == nil {
		err = json.Unmarshal(b, &out)
	}
	if err != nil {
		t.Fatalf("CallTool(%s): structured content %s: %v", name, b, err)
	}
	return out
}

// callErr calls a tool that must fail as a tool error and returns its text.
func callErr(t *testing.T, cs *mcp.ClientSession, name string, args any) string {
	t.Helper()
	res := call(t, cs, name, args)
	if !res.IsError {
		t.Fatalf("CallTool(%s, %v) succeeded with %s, want a tool error", name, args, text(res))
	}
	return text(res)
}

// text joins the text contents of a result.
func text(res *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

// golden compares got with testdata/name, or rewrites it with -update.
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if diff := cmp.Diff(string(want), string(got)); diff != "" {
		t.Errorf("%s differs (-want +got; go test -update rewrites it):\n%s", path, diff)
	}
}

// Types the tools return, as a client decodes them.
type (
	watchResult struct {
		Watch      mcpserver.Watch `json:"watch"`
		Hint       string          `json:"hint"`
		Sentence   string          `json:"sentence"`
		Settled    bool            `json:"settled"`
		RetryAfter int             `json:"retry_after"`
	}
	listResult struct {
		Recipient string            `json:"recipient"`
		Watches   []mcpserver.Watch `json:"watches"`
		Next      string            `json:"next"`
	}
	inboxResult struct {
		Recipient string              `json:"recipient"`
		Reader    string              `json:"reader"`
		Messages  []mcpserver.Message `json:"messages"`
	}
)

// eventually is how long a test waits for something that happens at once.
const eventually = 10 * time.Second
