package mcpserver_test

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/vigil-run/vigil/engine"
	"github.com/vigil-run/vigil/mcpserver"
	"github.com/vigil-run/vigil/store/memstore"
	"github.com/vigil-run/vigil/watcher"
	"github.com/vigil-run/vigil/watcher/timer"
)

// An agent registers a watch through MCP, here over in-memory transports
// to an engine in the same process; a refusal comes back as a tool error.
func Example() {
	ctx := context.Background()
	eng := engine.New(engine.Config{Store: memstore.New(), Watchers: watcher.NewRegistry(timer.New(timer.Config{}))})
	if err := eng.Prime(ctx); err != nil {
		panic(err)
	}
	srv := mcpserver.New(eng, &mcpserver.Options{DefaultRecipient: "agent-1"})
	clientT, serverT := mcp.NewInMemoryTransports()
	ss, err := srv.Connect(ctx, serverT, nil)
	if err != nil {
		panic(err)
	}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "example", Version: "v0"}, nil).Connect(ctx, clientT, nil)
	if err != nil {
		panic(err)
	}
	defer func() { cs.Close(); ss.Wait() }()

	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "watch_create", Arguments: map[string]any{
		"kind": "timer", "predicate": map[string]any{"in": "1h"}, "note": "check the deploy",
	}})
	if err != nil {
		panic(err)
	}
	var created struct{ Watch mcpserver.Watch }
	b, _ := json.Marshal(res.StructuredContent)
	_ = json.Unmarshal(b, &created)
	fmt.Println(created.Watch.Kind, created.Watch.State, created.Watch.Recipient, created.Watch.Note)

	res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "watch_create", Arguments: map[string]any{"kind": "kettle"}})
	if err != nil {
		panic(err)
	}
	fmt.Println(res.IsError, res.Content[0].(*mcp.TextContent).Text)
	// Output:
	// timer pending agent-1 check the deploy
	// true unknown_kind: unknown kind "kettle"; this daemon watches: [timer] (argument kind)
}
