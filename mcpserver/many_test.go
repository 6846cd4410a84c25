package mcpserver_test

import (
	"strings"
	"testing"

	"github.com/vigil-run/vigil/mcpserver"
)

type createManyResult struct {
	Results []struct {
		Status string
		Watch  *struct{ ID, Recipient, State string }
		Error  string
	}
	Created, Existing, Refused int
	Hint                       string
}

// TestCreateMany registers several watches in one call through the engine:
// each answered in its place, a refused one not stopping the others.
func TestCreateMany(t *testing.T) {
	t.Parallel()
	e := startEngine(t)
	cs := connect(t, mcpserver.New(e, &mcpserver.Options{DefaultRecipient: "agent-1"}), nil)
	timer := func(in string) map[string]any {
		return map[string]any{"kind": "timer", "predicate": map[string]any{"in": in}}
	}
	got := callOK[createManyResult](t, cs, "watch_create_many", map[string]any{"watches": []any{
		timer("1h"), timer("1h"), map[string]any{"kind": "bogus"}, timer("2h"),
		map[string]any{"kind": "timer", "predicate": map[string]any{"in": "3h"}, "recipient": "agent-2", "note": "other"},
	}})
	want := []string{"created", "existing", "refused", "created", "created"}
	if len(got.Results) != len(want) {
		t.Fatalf("watch_create_many = %d results, want %d", len(got.Results), len(want))
	}
	for i, w := range want {
		if got.Results[i].Status != w {
			t.Errorf("item %d = %s %q, want %s", i, got.Results[i].Status, got.Results[i].Error, w)
		}
	}
	if !strings.HasPrefix(got.Results[2].Error, "unknown_kind:") {
		t.Errorf("item 2 error = %q, want unknown_kind", got.Results[2].Error)
	}
	if got.Results[0].Watch.ID != got.Results[1].Watch.ID || got.Results[0].Watch.Recipient != "agent-1" || got.Results[4].Watch.Recipient != "agent-2" {
		t.Errorf("results = %+v %+v %+v; want items 0 and 1 the same watch of agent-1, item 4 agent-2's", got.Results[0].Watch, got.Results[1].Watch, got.Results[4].Watch)
	}
	if got.Created != 3 || got.Existing != 1 || got.Refused != 1 || !strings.Contains(got.Hint, "END YOUR TURN") {
		t.Errorf("counts %d/%d/%d, hint %q; want 3/1/1 and the end-your-turn hint", got.Created, got.Existing, got.Refused, got.Hint)
	}
	for _, w := range []string{got.Results[0].Watch.ID, got.Results[3].Watch.ID} {
		if gw, err := e.Watch(t.Context(), w); err != nil || gw.State != "pending" {
			t.Errorf("Watch(%s) = %+v, %v; want pending", w, gw, err)
		}
	}
	if msg := callErr(t, cs, "watch_create_many", map[string]any{"watches": []any{}}); !strings.HasPrefix(msg, "invalid_request:") {
		t.Errorf("no watches = %q, want invalid_request", msg)
	}
}

// TestCreateManyArgumentNames: a schema refusal of an item names the
// argument at fault once per level (watches.note), not once per step of
// the validator's path (watches.watches.watches.note).
func TestCreateManyArgumentNames(t *testing.T) {
	t.Parallel()
	cs := connect(t, mcpserver.New(startEngine(t), &mcpserver.Options{DefaultRecipient: "agent-1"}), nil)
	for _, tc := range []struct {
		tool string
		args map[string]any
		want string
	}{
		{"watch_create_many", map[string]any{"watches": []any{map[string]any{"kind": "timer", "note": 5}}}, `(argument watches.note)`},
		{"watch_create_many", map[string]any{"watches": []any{map[string]any{"kind": "timer", "bogus": 1}}}, `unknown argument "bogus" (argument watches.bogus)`},
		{"watch_create_many", map[string]any{"watches": []any{map[string]any{"note": "x"}}}, `missing argument "kind" (argument watches.kind)`},
		{"watch_create", map[string]any{"kind": "timer", "labels": map[string]any{"a": 1}}, `(argument labels)`},
	} {
		if got := callErr(t, cs, tc.tool, tc.args); !strings.HasSuffix(got, tc.want) {
			t.Errorf("%s(%v) = %q, want it to end %q", tc.tool, tc.args, got, tc.want)
		}
	}
}
