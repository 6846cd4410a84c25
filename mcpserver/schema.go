package mcpserver

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/vigil-run/vigil/watcher"
)

// mustSchema returns the JSON schema of T as the SDK would infer it, with
// json.RawMessage as any JSON value, then edited by edit (nil for none).
// The tools declare their schemas this way so that a predicate reaches
// the service byte for byte, and so that enums and defaults can be said.
func mustSchema[T any](edit func(*jsonschema.Schema)) *jsonschema.Schema {
	s, err := jsonschema.For[T](&jsonschema.ForOptions{
		TypeSchemas: map[reflect.Type]*jsonschema.Schema{reflect.TypeFor[json.RawMessage](): {}},
	})
	if err != nil {
		panic(fmt.Sprintf("mcpserver: schema of %T: %v", *new(T), err))
	}
	if edit != nil {
		edit(s)
	}
	return s
}

func createSchema(s *jsonschema.Schema) {
	s.Properties["predicate"].Type = "object"
	s.Properties["deliver"].Type = "object"
	s.Properties["mode"].Enum = []any{"until", "unless"}
	s.Properties["observe"].Default = json.RawMessage("true")
}

func listSchema(s *jsonschema.Schema) {
	s.Properties["state"].Enum = []any{"pending", "fired", "failed", "expired", "cancelled", "errored", "unwatchable", "all"}
	s.Properties["state"].Default = json.RawMessage(`"pending"`)
}

// createDescription is watch_create's description: descCreate with one
// line per kind the daemon runs, from its descriptor.
func createDescription(ks watcher.Kinds) string {
	var b strings.Builder
	for i, d := range ks.List() {
		if i > 0 {
			b.WriteByte('\n')
		}
		doc := d.Doc
		if doc == "" {
			doc = "see the input schema"
		}
		fmt.Fprintf(&b, "- %s: %s", d.Kind, doc)
	}
	return fmt.Sprintf(descCreate, b.String())
}

// createInputSchema is the schema watch_create declares: the arguments'
// schema with kind one of the kinds the daemon runs, and a oneOf with one
// branch per kind that says its predicate (watcher.Kinds.RequestOneOf, the
// branches the OpenAPI document's RegisterRequest declares too).
func createInputSchema(ks watcher.Kinds) *jsonschema.Schema {
	s := mustSchema[createIn](createSchema)
	for _, k := range ks.Names() {
		s.Properties["kind"].Enum = append(s.Properties["kind"].Enum, string(k))
	}
	for _, b := range ks.RequestOneOf() {
		var branch jsonschema.Schema
		if err := json.Unmarshal(b, &branch); err != nil {
			panic(fmt.Sprintf("mcpserver: a kind's oneOf branch: %v", err))
		}
		s.OneOf = append(s.OneOf, &branch)
	}
	return s
}

// addCreateTool adds watch_create. It declares createInputSchema but
// validates the arguments against the schema of createIn alone, then the
// predicate against its kind's schema (watcher.Kinds.CheckPredicate): the
// SDK's own check of a oneOf would answer only that no branch matched,
// where a model needs the path at fault ("predicate.url") and a kind the
// daemon does not run needs the daemon's unknown_kind, which lists those
// it does. Otherwise it does what mcp.AddTool does for a typed handler.
func (s *server) addCreateTool(t *mcp.Tool) {
	plain, err := mustSchema[createIn](createSchema).Resolve(nil)
	if err != nil {
		panic(fmt.Sprintf("mcpserver: watch_create schema: %v", err))
	}
	t.InputSchema = createInputSchema(s.opts.Kinds)
	s.srv.AddTool(t, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		args := map[string]any{}
		if len(req.Params.Arguments) > 0 {
			if err := json.Unmarshal(req.Params.Arguments, &args); err != nil {
				return errorResult(fmt.Errorf("unmarshaling arguments: %w", err)), nil
			}
		}
		if err := plain.Validate(args); err != nil {
			return errorResult(fmt.Errorf("validating \"arguments\": %v", err)), nil
		}
		var in createIn
		if len(req.Params.Arguments) > 0 {
			if err := json.Unmarshal(req.Params.Arguments, &in); err != nil {
				return errorResult(err), nil
			}
		}
		_, out, err := s.create(ctx, req, in)
		if err != nil {
			if wire, ok := err.(*jsonrpc.Error); ok {
				return nil, wire
			}
			return errorResult(err), nil
		}
		b, err := json.Marshal(out)
		if err != nil {
			return nil, fmt.Errorf("marshaling output: %w", err)
		}
		return &mcp.CallToolResult{StructuredContent: json.RawMessage(b), Content: []mcp.Content{&mcp.TextContent{Text: string(b)}}}, nil
	})
}

func errorResult(err error) *mcp.CallToolResult {
	var r mcp.CallToolResult
	r.SetError(err)
	return &r
}
