package mcpserver_test

import (
	"strings"
	"testing"

	"github.com/vigil-run/vigil/mcpserver"
)

// TestCreateManyOverMaxBatch: a batch over 1 000 items is refused
// whole with payload_too_large (issue #18's batch rule; the engine and
// POST /v1/watches/batch both answer so, docs/api.md's table lists it),
// whatever the surface. watch_create_many answers invalid_request.
func TestCreateManyOverMaxBatch(t *testing.T) {
	t.Parallel()
	e := startEngine(t)
	cs := connect(t, mcpserver.New(e, &mcpserver.Options{DefaultRecipient: "agent-1"}), nil)
	items := make([]any, 1001)
	for i := range items {
		items[i] = map[string]any{"kind": "timer", "predicate": map[string]any{"in": "1h"}}
	}
	msg := callErr(t, cs, "watch_create_many", map[string]any{"watches": items})
	if !strings.HasPrefix(msg, "payload_too_large:") {
		t.Errorf("1 001 watches = %q, want payload_too_large", msg)
	}
}
