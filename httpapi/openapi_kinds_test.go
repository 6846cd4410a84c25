package httpapi

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"testing"

	"github.com/vigil-run/vigil/watcher"
	"github.com/vigil-run/vigil/watcher/kinds"
)

var (
	kindSchemaPath = []string{"components", "schemas", "Kind"}
	oneOfPath      = []string{"components", "schemas", "RegisterRequest", "oneOf"}
)

// kindSchemas returns, from the kind registry, the Kind schema (the
// enum of kinds) and RegisterRequest's oneOf (one branch per kind with
// its predicate's schema): the parts of openapi.json made from it.
func kindSchemas(t *testing.T, ks watcher.Kinds) (kind, oneOf json.RawMessage) {
	t.Helper()
	kind, err := json.Marshal(map[string]any{"type": "string", "enum": ks.Names()})
	if err != nil {
		t.Fatal(err)
	}
	if oneOf, err = json.Marshal(ks.RequestOneOf()); err != nil {
		t.Fatal(err)
	}
	return kind, oneOf
}

// TestOpenAPIKinds keeps openapi.json's kind enum and predicate schemas
// equal to the kind registry (watcher/kinds): go test -update rewrites
// them from it.
func TestOpenAPIKinds(t *testing.T) {
	t.Parallel()
	kind, oneOf := kindSchemas(t, kinds.Builtin())
	if f := flag.Lookup("update"); f != nil && f.Value.String() == "true" {
		doc, err := replaceJSONValue(openAPI, kindSchemaPath, kind)
		if err == nil {
			doc, err = replaceJSONValue(doc, oneOfPath, oneOf)
		}
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile("openapi.json", doc, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	for _, c := range []struct {
		path []string
		want json.RawMessage
	}{{kindSchemaPath, kind}, {oneOfPath, oneOf}} {
		got, err := replaceJSONValue(openAPI, c.path, c.want)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, openAPI) {
			t.Errorf("openapi.json's %v differs from the kind registry (go test ./httpapi -run TestOpenAPIKinds -update rewrites it)", c.path)
		}
	}
	// Every kind field says a kind by the one Kind schema.
	var doc struct {
		Comps struct {
			Schemas map[string]struct {
				Properties map[string]json.RawMessage `json:"properties"`
			} `json:"schemas"`
		} `json:"components"`
	}
	if err := json.Unmarshal(openAPI, &doc); err != nil {
		t.Fatal(err)
	}
	if got := string(doc.Comps.Schemas["RegisterRequest"].Properties["kind"]); !bytes.Contains([]byte(got), []byte(`#/components/schemas/Kind`)) {
		t.Errorf("RegisterRequest.kind = %s, want a $ref to #/components/schemas/Kind", got)
	}
}
