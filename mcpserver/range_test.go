package mcpserver_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/vigil-run/vigil/mcpserver"
)

// TestArgumentsOutOfRange: a whole number the input schema takes but the
// argument's Go type cannot hold (1e30) is refused as every bad
// argument is, invalid_request naming it, not with the decoder's sentence
// about Go struct fields and no code.
func TestArgumentsOutOfRange(t *testing.T) {
	t.Parallel()
	cs := connect(t, mcpserver.New(startEngine(t), &mcpserver.Options{DefaultRecipient: "agent-1"}), nil)
	for _, tc := range []struct{ tool, args, field string }{
		{"watch_list", `{"limit": 1e30}`, "limit"},
		{"inbox_read", `{"after": 1e30}`, "after"},
		{"inbox_read", `{"limit": -1e30}`, "limit"},
		{"watch_create", `{"kind": "timer", "predicate": {"in": "1h"}, "stable": 1e30}`, "stable"},
		{"watch_create_many", `{"watches": [{"kind": "timer", "predicate": {"in": "1h"}, "max_polls": 1e30}]}`, "watches.max_polls"},
	} {
		got := callErr(t, cs, tc.tool, json.RawMessage(tc.args))
		if !strings.HasPrefix(got, "invalid_request: ") || !strings.HasSuffix(got, "(argument "+tc.field+")") || strings.Contains(got, "Go struct") {
			t.Errorf("%s(%s) = %q, want invalid_request: … (argument %s)", tc.tool, tc.args, got, tc.field)
		}
	}
}
