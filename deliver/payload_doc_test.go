package deliver_test

import (
	"encoding/json"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/vigil-run/vigil"
	"github.com/vigil-run/vigil/deliver"
	"github.com/vigil-run/vigil/wording"
)

// TestPayloadAsDocumented: the webhook body docs/delivery.md shows is the
// one NewPayload makes of the watch it describes, field for field, names,
// types and all (no field documented that is not sent, none sent that is
// not documented).
func TestPayloadAsDocumented(t *testing.T) {
	t.Parallel()
	doc, err := os.ReadFile("../docs/delivery.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(doc), "## Webhooks\n")
	if !ok {
		t.Fatal("docs/delivery.md has no Webhooks section")
	}
	_, rest, ok = strings.Cut(rest, "```json\n")
	block, _, ok2 := strings.Cut(rest, "```")
	if !ok || !ok2 {
		t.Fatal("the Webhooks section shows no JSON body")
	}
	var want any
	if err := json.Unmarshal([]byte(block), &want); err != nil {
		t.Fatalf("the documented body is not JSON: %v\n%s", err, block)
	}
	at := time.Date(2026, 11, 30, 12, 0, 3, 120e6, time.UTC)
	w := &vigil.Watch{ID: "01JD3M2A7X2B1NQ8K0W3G5H6FD", Kind: vigil.KindHTTP, Recipient: "agent-7", State: vigil.StateFired,
		Predicate: json.RawMessage(`{"url":"https://api.example.com/health"}`), Note: "merge PR 41 when green",
		Labels: map[string]string{"task": "T-19"}, SettledAt: at,
		Outcome: &vigil.Outcome{State: vigil.StateFired, Reason: "satisfied",
			Observation: &vigil.Observation{Verdict: vigil.VerdictSatisfied, At: at, Summary: `HTTP 200; status = "ok"`, Facts: map[string]any{"status": 200}}}}
	// The sentence is the one the engine words at settlement.
	w.Outcome.Sentence = wording.Outcome(w, w.Outcome)
	b, err := json.Marshal(deliver.NewPayload(w, "01JD3M6T9M2Q9V9R0C6S4J0Y5E"))
	if err != nil {
		t.Fatal(err)
	}
	var got any
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("the body NewPayload makes differs from docs/delivery.md's (-doc +code):\n%s", diff)
	}
	// A field the example leaves out (one sent only when true) is named
	// in the section all the same.
	section, _, _ := strings.Cut(rest, "\n## ")
	ty := reflect.TypeFor[deliver.Payload]()
	for i := range ty.NumField() {
		name, _, _ := strings.Cut(ty.Field(i).Tag.Get("json"), ",")
		if !strings.Contains(block, `"`+name+`"`) && !strings.Contains(section, "`"+name+"`") {
			t.Errorf("the webhook body's field %q is neither in docs/delivery.md's example nor named in its section", name)
		}
	}
}
