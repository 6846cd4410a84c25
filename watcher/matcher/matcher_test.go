package matcher_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/vigil-run/vigil"
	"github.com/vigil-run/vigil/watcher/matcher"
)

const doc = `{
  "status": {"phase": "Ready", "replicas": 3, "ratio": 0.5, "ok": true, "off": false, "none": null,
             "empty": "", "zero": 0, "list": [], "obj": {}},
  "labels": ["blue", "green"],
  "spec": {"b": 2, "a": 1},
  "message": "deploy 42 finished"
}`

func TestMatch(t *testing.T) {
	t.Parallel()
	tests := []struct {
		matcher string
		want    bool
	}{
		{`{"path":"status.phase","equals":"Ready"}`, true},
		{`{"path":"status.phase","equals":"ready"}`, false},
		{`{"path":"status.replicas","equals":3.0}`, true},
		{`{"path":"status.replicas","equals":"3"}`, false},
		{`{"path":"spec","equals":{"a":1,"b":2}}`, true},
		{`{"path":"spec","equals":{"a":1}}`, false},
		{`{"path":"status.none","equals":null}`, true},
		{`{"path":"status.missing","equals":null}`, false},
		{`{"path":"status.phase","not_equals":"Failed"}`, true},
		{`{"path":"status.phase","not_equals":"Ready"}`, false},
		{`{"path":"status.missing","not_equals":"Ready"}`, false},
		{`{"path":"message","contains":"finished"}`, true},
		{`{"path":"message","contains":"failed"}`, false},
		{`{"path":"labels","contains":"green"}`, true},
		{`{"path":"labels","contains":"gre"}`, false},
		{`{"path":"status.replicas","contains":"3"}`, false},
		{`{"path":"message","matches":"^deploy \\d+ fin"}`, true},
		{`{"path":"message","matches":"^\\d+"}`, false},
		{`{"path":"status.replicas","matches":"^3$"}`, true},
		{`{"path":"status","matches":"Ready"}`, false},
		{`{"path":"status.phase","exists":true}`, true},
		{`{"path":"status.missing","exists":true}`, false},
		{`{"path":"status.missing","exists":false}`, true},
		{`{"path":"status.phase","exists":false}`, false},
		{`{"path":"status.ok","truthy":true}`, true},
		{`{"path":"status.replicas","truthy":true}`, true},
		{`{"path":"labels","truthy":true}`, true},
		{`{"path":"status.off","truthy":true}`, false},
		{`{"path":"status.off","truthy":false}`, true},
		{`{"path":"status.none","truthy":false}`, true},
		{`{"path":"status.empty","truthy":false}`, true},
		{`{"path":"status.zero","truthy":false}`, true},
		{`{"path":"status.list","truthy":false}`, true},
		{`{"path":"status.obj","truthy":false}`, true},
		{`{"path":"status.missing","truthy":false}`, false},
		{`{"path":"status.replicas","gt":2}`, true},
		{`{"path":"status.replicas","gt":3}`, false},
		{`{"path":"status.replicas","gte":3}`, true},
		{`{"path":"status.replicas","gte":3.5}`, false},
		{`{"path":"status.ratio","lt":1}`, true},
		{`{"path":"status.ratio","lt":0.5}`, false},
		{`{"path":"status.ratio","lte":0.5}`, true},
		{`{"path":"status.ratio","lte":0.4}`, false},
		{`{"path":"status.phase","gt":0}`, false},
		{`{"path":"status.missing","gt":0}`, false},
		{`{"path":"labels.#","equals":2}`, true},
	}
	for _, tt := range tests {
		t.Run(tt.matcher, func(t *testing.T) {
			t.Parallel()
			m, err := matcher.Parse(json.RawMessage(tt.matcher), "done")
			if err != nil {
				t.Fatalf("Parse(%s) = %v", tt.matcher, err)
			}
			if got := m.Match([]byte(doc)).Matched; got != tt.want {
				t.Errorf("Parse(%s).Match(doc) = %v, want %v", tt.matcher, got, tt.want)
			}
		})
	}
}

func TestMatchNotJSON(t *testing.T) {
	t.Parallel()
	for _, raw := range []string{`{"path":"a","exists":false}`, `{"path":"a","contains":"x"}`} {
		m, err := matcher.Parse(json.RawMessage(raw), "done")
		if err != nil {
			t.Fatal(err)
		}
		if got := m.Match([]byte(`<html>x</html>`)); got.Matched || got.Found {
			t.Errorf("Parse(%s).Match(html) = %+v, want no match", raw, got)
		}
	}
}

func TestParseRefusals(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in, field, msgHas string
	}{
		{`{"path":"a","equals":1,"contains":"x"}`, "predicate.done", "exactly one operator"},
		{`{"equals":1}`, "predicate.done.path", "required"},
		{`{"path":"","equals":1}`, "predicate.done.path", "empty"},
		{`{"path":"` + strings.Repeat("a", matcher.MaxPath+1) + `","equals":1}`, "predicate.done.path", "longer"},
		{`{"path":"a","eq":1}`, "predicate.done.eq", "not a known field"},
		{`{"path":"a","matches":"(unclosed"}`, "predicate.done.matches", "RE2"},
		{`{"path":"a","matches":"(?=lookahead)"}`, "predicate.done.matches", "RE2"},
		{`{"path":"a","matches":"` + strings.Repeat("a", matcher.MaxPattern+1) + `"}`, "predicate.done.matches", "longer"},
		{`{"path":"a","contains":1}`, "predicate.done.contains", "string"},
		{`{"path":"a","contains":""}`, "predicate.done.contains", "empty"},
		{`{"path":"a","exists":"yes"}`, "predicate.done.exists", "true or false"},
		{`{"path":"a","truthy":null}`, "predicate.done.truthy", "true or false"},
		{`{"path":"a","gt":"3"}`, "predicate.done.gt", "number"},
		{`{"path":"a","lte":null}`, "predicate.done.lte", "number"},
		{`{"path":"a","equals":"` + strings.Repeat("a", matcher.MaxValue) + `"}`, "predicate.done.equals", "longer"},
		{`{"path":"a","path":"b","equals":1}`, "predicate.done.path", "twice"},
	}
	for _, tt := range tests {
		_, err := matcher.Parse(json.RawMessage(tt.in), "done")
		if vigil.ErrorCode(err) != vigil.CodeInvalidPredicate || vigil.ErrorField(err) != tt.field || !strings.Contains(vigil.ErrorMessage(err), tt.msgHas) {
			t.Errorf("Parse(%.60s) = %v (field %q), want invalid_predicate on %s mentioning %q", tt.in, err, vigil.ErrorField(err), tt.field, tt.msgHas)
		}
	}
}

func TestParseListRefusals(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in, field string
	}{
		{`[{"path":"a","equals":1},{"path":"b","matches":"("}]`, "predicate.done[1].matches"},
		{`[]`, "predicate.done"},
		{`"a"`, "predicate.done"},
		{`[` + strings.Repeat(`{"path":"a","exists":true},`, matcher.MaxList) + `{"path":"a","exists":true}]`, "predicate.done"},
	}
	for _, tt := range tests {
		_, err := matcher.ParseList(json.RawMessage(tt.in), "done")
		if vigil.ErrorCode(err) != vigil.CodeInvalidPredicate || vigil.ErrorField(err) != tt.field {
			t.Errorf("ParseList(%.60s) = %v (field %q), want invalid_predicate on %s", tt.in, err, vigil.ErrorField(err), tt.field)
		}
	}
}

func TestParseListCanonical(t *testing.T) {
	t.Parallel()
	spellings := []string{
		`[{"path":"b","gte":1.0},{"equals":{"y":1,"x":[1.50]},"path":"a"},{"path":"b","gte":1}]`,
		`[ {"path":"a","equals":{"x":[1.5],"y":1e0}}, {"gte":1,"path":"b"} ]`,
	}
	const want = `[{"equals":{"x":[1.5],"y":1},"path":"a"},{"gte":1,"path":"b"}]`
	for _, s := range spellings {
		ms, err := matcher.ParseList(json.RawMessage(s), "done")
		if err != nil {
			t.Fatalf("ParseList(%s) = %v", s, err)
		}
		got, err := json.Marshal(ms)
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != want {
			t.Errorf("ParseList(%s) marshals to %s, want %s", s, got, want)
		}
	}
	one, err := matcher.ParseList(json.RawMessage(`{"path":"a","exists":true}`), "done")
	if err != nil || len(one) != 1 {
		t.Fatalf("ParseList(one object) = %v, %v, want one matcher", one, err)
	}
}

func TestEvaluate(t *testing.T) {
	t.Parallel()
	ms, err := matcher.ParseList(json.RawMessage(`[{"path":"status.phase","equals":"Ready"},{"path":"status.missing","exists":true}]`), "done")
	if err != nil {
		t.Fatal(err)
	}
	ev := matcher.Evaluate(ms, []byte(doc))
	if ev.Matched || !ev.JSON {
		t.Errorf("Evaluate = Matched %v JSON %v, want false true: one matcher misses", ev.Matched, ev.JSON)
	}
	wantFacts := []any{
		map[string]any{"path": "status.phase", "found": true, "matched": true, "value": `"Ready"`},
		map[string]any{"path": "status.missing", "found": false, "matched": false},
	}
	if diff := cmp.Diff(wantFacts, ev.Facts()); diff != "" {
		t.Errorf("Evaluate.Facts (-want +got):\n%s", diff)
	}
	if got, want := ev.Summary(), `status.phase = "Ready"; status.missing missing`; got != want {
		t.Errorf("Evaluate.Summary = %q, want %q", got, want)
	}
	if ev := matcher.Evaluate(ms, []byte("nope")); ev.JSON || ev.Matched || ev.Summary() != "not JSON" {
		t.Errorf("Evaluate(not JSON) = %+v, want no JSON, no match", ev)
	}
	if ev := matcher.Evaluate(nil, []byte(doc)); ev.Matched {
		t.Errorf("Evaluate(no matchers) matched, want false")
	}
	long := `{"a":"` + strings.Repeat("x", 1000) + `"}`
	exists, _ := matcher.ParseList(json.RawMessage(`{"path":"a","exists":true}`), "done")
	if v := matcher.Evaluate(exists, []byte(long)).Results[0].Value; len(v) > matcher.MaxFactValue {
		t.Errorf("found value is %d bytes, want at most %d", len(v), matcher.MaxFactValue)
	}
}
