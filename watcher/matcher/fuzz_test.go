package matcher_test

import (
	"encoding/json"
	"testing"

	"github.com/vigil-run/vigil/watcher/matcher"
)

// FuzzParseEvaluate: any matcher list either is refused or evaluates
// against any document without panicking; the canonical list parses back
// to the same list.
func FuzzParseEvaluate(f *testing.F) {
	for _, s := range [][2]string{
		{`[{"path":"status.phase","eq":"Ready"}]`, `{"status":{"phase":"Ready"}}`},
		{`[{"path":"items.#","gte":3}]`, `{"items":[1,2,3]}`},
		{`[{"path":"a.b|@reverse","contains":"x"}]`, `{"a":{"b":["x"]}}`},
		{`[{"path":"message","matches":"^deploy [0-9]+"}]`, `{"message":"deploy 42"}`},
		{`[{"path":"..#(a>1)","exists":true}]`, `[{"a":2}]`},
		{`{"path":"x"}`, `not json`},
		{`[]`, `{}`},
	} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, raw, doc string) {
		ms, err := matcher.ParseList(json.RawMessage(raw), "done")
		if err != nil {
			return
		}
		_ = matcher.Evaluate(ms, []byte(doc))
		canon, err := json.Marshal(matcher.Sort(ms))
		if err != nil {
			t.Fatalf("Marshal(%v): %v", ms, err)
		}
		again, err := matcher.ParseList(canon, "done")
		if err != nil {
			t.Fatalf("ParseList(canonical %s) = %v; it parsed as %s", canon, err, raw)
		}
		canon2, _ := json.Marshal(matcher.Sort(again))
		if string(canon) != string(canon2) {
			t.Fatalf("canonical form is not stable: %s then %s", canon, canon2)
		}
	})
}
