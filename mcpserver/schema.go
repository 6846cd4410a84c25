package mcpserver

import (
	"encoding/json"
	"fmt"
	"reflect"

	"github.com/google/jsonschema-go/jsonschema"
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
