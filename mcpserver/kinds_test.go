package mcpserver_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/vigil-run/vigil"
	"github.com/vigil-run/vigil/client"
	"github.com/vigil-run/vigil/daemon"
	"github.com/vigil-run/vigil/forge"
	"github.com/vigil-run/vigil/forge/forgetest"
	"github.com/vigil-run/vigil/httpapi"
	"github.com/vigil-run/vigil/watcher/kinds"
)

const kindsSHA = "0123456789abcdef0123456789abcdef01234567"

// TestKindContract runs every built-in kind through a real daemon's MCP
// endpoint: watch_create names each kind and declares its predicate's
// schema exactly as the registry (watcher/kinds) and the OpenAPI document
// do; a valid predicate passes the declared schema and the daemon; a
// predicate valid for another kind fails the schema, and the tool answers
// invalid_predicate with the path at fault, as the daemon does.
func TestKindContract(t *testing.T) {
	// The run kind starts its program under "vigil supervise": this test
	// binary, which TestMain turns into vigil when childEnv is set. So not
	// parallel.
	t.Setenv(childEnv, "1")
	gh := forgetest.New(t, forge.GitHub)
	gh.SetRef("acme/api", "main", kindsSHA)
	gh.SetTicket("acme/api", 7, forgetest.Ticket{Title: "Flaky test", State: "open"})
	web := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusAccepted) }))
	t.Cleanup(web.Close)
	root := t.TempDir()

	cfg := daemon.DefaultConfig()
	cfg.Listen = "127.0.0.1:0"
	cfg.DataDir = filepath.Join(t.TempDir(), "vigil")
	cfg.Roots = []string{root}
	cfg.AllowExec = true
	cfg.Forges = forge.Settings{GitHub: gh.Endpoint("")}
	d := runDaemon(t, cfg)

	valid := map[vigil.Kind]any{
		vigil.KindCI:       map[string]any{"repo": "acme/api", "sha": "main"},
		vigil.KindCommand:  map[string]any{"argv": []string{"true"}},
		vigil.KindFile:     map[string]any{"path": filepath.Join(root, "ready")},
		vigil.KindFolder:   map[string]any{"path": root, "settle": "1s"},
		vigil.KindHTTP:     map[string]any{"url": web.URL, "status": []any{202}},
		vigil.KindRun:      map[string]any{"argv": []string{"true"}, "tail": 100},
		vigil.KindSchedule: map[string]any{"every": "1h", "shell": "true"},
		vigil.KindTCP:      map[string]any{"address": "127.0.0.1:1"},
		vigil.KindTicket:   map[string]any{"repo": "acme/api", "number": 7},
		vigil.KindTimer:    map[string]any{"in": "1h"},
		vigil.KindToken:    map[string]any{},
	}
	reg := kinds.Builtin()
	if got, want := len(valid), reg.Len(); got != want {
		t.Fatalf("the test knows %d kinds, the registry %d: give each kind a valid predicate here", got, want)
	}

	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	transport := &mcp.StreamableClientTransport{Endpoint: d.URL() + "/mcp?recipient=agent-k",
		HTTPClient: &http.Client{Transport: bearer{d.Token(), tr}}, MaxRetries: -1}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "kinds", Version: "v0"}, nil).Connect(t.Context(), transport, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	c, err := client.New(d.Addr(), d.Token(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.CloseIdleConnections)

	// The three say the same: the registry, the tool's schema, the
	// OpenAPI document.
	input := createInputSchema(t, cs)
	var tool struct {
		Properties struct {
			Kind struct {
				Enum []vigil.Kind `json:"enum"`
			} `json:"kind"`
		} `json:"properties"`
		OneOf []any `json:"oneOf"`
	}
	var openapi struct {
		Comps struct {
			Schemas struct {
				Kind struct {
					Enum []vigil.Kind `json:"enum"`
				} `json:"Kind"`
				RegisterRequest struct {
					OneOf []any `json:"oneOf"`
				} `json:"RegisterRequest"`
			} `json:"schemas"`
		} `json:"components"`
	}
	remarshal(t, input, &tool)
	if err := json.Unmarshal(httpapi.OpenAPI(), &openapi); err != nil {
		t.Fatal(err)
	}
	var want []any
	remarshal(t, reg.RequestOneOf(), &want)
	if !reflect.DeepEqual(tool.Properties.Kind.Enum, reg.Names()) || !reflect.DeepEqual(openapi.Comps.Schemas.Kind.Enum, reg.Names()) {
		t.Errorf("kinds: tool %v, OpenAPI %v, registry %v", tool.Properties.Kind.Enum, openapi.Comps.Schemas.Kind.Enum, reg.Names())
	}
	if !reflect.DeepEqual(tool.OneOf, want) {
		t.Errorf("watch_create's oneOf differs from the registry's:\n%v\nwant\n%v", tool.OneOf, want)
	}
	if !reflect.DeepEqual(openapi.Comps.Schemas.RegisterRequest.OneOf, want) {
		t.Errorf("openapi.json's RegisterRequest oneOf differs from the registry's (go test ./httpapi -update)")
	}
	description := toolDescription(t, cs, "watch_create")
	resolved, err := input.Resolve(nil)
	if err != nil {
		t.Fatal(err)
	}

	for _, d := range reg.List() {
		k := d.Kind
		if !strings.Contains(description, "\n- "+string(k)+": ") {
			t.Errorf("watch_create's description does not name kind %s", k)
		}
		args := map[string]any{"kind": string(k), "predicate": valid[k]}
		if err := resolved.Validate(jsonValue(t, args)); err != nil {
			t.Errorf("%s: a valid predicate fails the declared schema: %v", k, err)
		}
		out := callOK[watchResult](t, cs, "watch_create", map[string]any{"kind": string(k), "predicate": valid[k], "observe": false})
		if out.Watch.Kind != k {
			t.Errorf("%s: registered %+v", k, out.Watch)
		}
		callOK[watchResult](t, cs, "watch_cancel", map[string]any{"id": out.Watch.ID})

		// Another kind's predicate: the first one this kind's schema refuses.
		var foreign vigil.Kind
		for _, o := range reg.Names() {
			if o != k && resolved.Validate(jsonValue(t, map[string]any{"kind": string(k), "predicate": valid[o]})) != nil {
				foreign = o
				break
			}
		}
		if foreign == "" {
			t.Errorf("%s: its schema accepts every other kind's predicate", k)
			continue
		}
		got := callErr(t, cs, "watch_create", map[string]any{"kind": string(k), "predicate": valid[foreign]})
		if !strings.HasPrefix(got, "invalid_predicate: predicate.") || !strings.Contains(got, "(argument predicate.") ||
			!strings.Contains(got, "predicate's schema") {
			t.Errorf("%s given a %s predicate: %q, want invalid_predicate with the path at fault", k, foreign, got)
		}
		// The daemon refuses it the same way over the HTTP API.
		raw, _ := json.Marshal(valid[foreign])
		_, err := c.Register(t.Context(), vigil.RegisterRequest{Kind: k, Recipient: "agent-k", Predicate: raw})
		if vigil.ErrorCode(err) != vigil.CodeInvalidPredicate || !strings.HasPrefix(vigil.ErrorField(err), "predicate") {
			t.Errorf("%s given a %s predicate over HTTP: %v (field %q), want invalid_predicate on a predicate field", k, foreign, err, vigil.ErrorField(err))
		}
	}
}

// runDaemon runs a daemon for cfg until the test ends.
func runDaemon(t *testing.T, cfg daemon.Config) *daemon.Daemon {
	t.Helper()
	d, err := daemon.New(t.Context(), cfg, nil)
	if err != nil {
		t.Fatalf("daemon.New: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- d.Run(ctx) }()
	select {
	case <-d.Primed():
	case err := <-errc:
		cancel()
		t.Fatalf("daemon stopped before it was primed: %v", err)
	case <-time.After(time.Minute):
		cancel()
		t.Fatal("daemon not primed in a minute")
	}
	t.Cleanup(func() {
		cancel()
		if err := <-errc; err != nil {
			t.Errorf("daemon Run = %v after shutdown, want nil", err)
		}
	})
	return d
}

func createInputSchema(t *testing.T, cs *mcp.ClientSession) *jsonschema.Schema {
	t.Helper()
	tools, err := cs.ListTools(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tool := range tools.Tools {
		if tool.Name == "watch_create" {
			var s jsonschema.Schema
			remarshal(t, tool.InputSchema, &s)
			return &s
		}
	}
	t.Fatal("no watch_create tool")
	return nil
}

func toolDescription(t *testing.T, cs *mcp.ClientSession, name string) string {
	t.Helper()
	tools, err := cs.ListTools(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tool := range tools.Tools {
		if tool.Name == name {
			return tool.Description
		}
	}
	t.Fatalf("no %s tool", name)
	return ""
}

func remarshal(t *testing.T, from, to any) {
	t.Helper()
	b, err := json.Marshal(from)
	if err == nil {
		err = json.Unmarshal(b, to)
	}
	if err != nil {
		t.Fatal(err)
	}
}

func jsonValue(t *testing.T, v any) any {
	t.Helper()
	var out any
	remarshal(t, v, &out)
	return out
}
