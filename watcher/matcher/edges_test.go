package matcher_test

import (
	"encoding/json"
	"testing"

	"github.com/vigil-run/vigil/watcher/matcher"
)

// matchOne parses one matcher and applies it to doc.
func matchOne(t *testing.T, raw, doc string) matcher.Result {
	t.Helper()
	m, err := matcher.Parse(json.RawMessage(raw), "done")
	if err != nil {
		t.Fatalf("Parse(%s) = %v", raw, err)
	}
	return m.Match([]byte(doc))
}

// TestBigIntegers: integers beyond 2^53 compare exactly, not through
// float64, for equals, not_equals and the order operators, at any depth.
func TestBigIntegers(t *testing.T) {
	t.Parallel()
	const id = `{"id":12345678901234567891,"neg":-9007199254740993,"small":9007199254740992,"nested":{"ids":[12345678901234567891]},"f":1.5}`
	tests := []struct {
		matcher string
		want    bool
	}{
		{`{"path":"id","equals":12345678901234567890}`, false},
		{`{"path":"id","equals":12345678901234567891}`, true},
		{`{"path":"id","equals":1.2345678901234567891e19}`, true},
		{`{"path":"id","equals":12345678901234567891.0}`, true},
		{`{"path":"id","not_equals":12345678901234567890}`, true},
		{`{"path":"id","not_equals":12345678901234567891}`, false},
		{`{"path":"id","gt":12345678901234567890}`, true},
		{`{"path":"id","gt":12345678901234567891}`, false},
		{`{"path":"id","gte":12345678901234567891}`, true},
		{`{"path":"id","gte":12345678901234567892}`, false},
		{`{"path":"id","lt":12345678901234567892}`, true},
		{`{"path":"id","lt":12345678901234567891}`, false},
		{`{"path":"id","lte":12345678901234567890}`, false},
		{`{"path":"id","lte":12345678901234567891}`, true},
		{`{"path":"id","gt":1.5}`, true},
		{`{"path":"id","lt":1e300}`, true},
		{`{"path":"neg","equals":-9007199254740992}`, false},
		{`{"path":"neg","lt":-9007199254740992}`, true},
		{`{"path":"neg","gt":-9007199254740994}`, true},
		{`{"path":"neg","gte":-9007199254740993}`, true},
		{`{"path":"neg","gt":-9007199254740993}`, false},
		{`{"path":"small","equals":9007199254740992}`, true},
		{`{"path":"small","lt":9007199254740993}`, true},
		{`{"path":"small","gte":9007199254740993}`, false},
		{`{"path":"nested","equals":{"ids":[12345678901234567890]}}`, false},
		{`{"path":"nested","equals":{"ids":[12345678901234567891]}}`, true},
		{`{"path":"f","equals":1.50}`, true},
		{`{"path":"f","lt":9007199254740993}`, true},
	}
	for _, tt := range tests {
		if got := matchOne(t, tt.matcher, id).Matched; got != tt.want {
			t.Errorf("Parse(%s).Match(%s) = %v, want %v", tt.matcher, id, got, tt.want)
		}
	}
}

// TestBigIntegersCanonical: the canonical form keeps every digit of an
// integer beyond 2^53, so two watches that differ only in the last digit
// are two watches; smaller numbers keep their float spelling.
func TestBigIntegersCanonical(t *testing.T) {
	t.Parallel()
	tests := []struct{ in, want string }{
		{`{"path":"id","equals":12345678901234567891}`, `{"equals":12345678901234567891,"path":"id"}`},
		{`{"path":"id","equals":1.2345678901234567891e19}`, `{"equals":12345678901234567891,"path":"id"}`},
		{`{"path":"id","gt":-12345678901234567891}`, `{"gt":-12345678901234567891,"path":"id"}`},
		{`{"path":"id","equals":{"a":[12345678901234567891,1.50]}}`, `{"equals":{"a":[12345678901234567891,1.5]},"path":"id"}`},
		{`{"path":"id","equals":9007199254740992}`, `{"equals":9007199254740992,"path":"id"}`},
		{`{"path":"id","gte":1e0}`, `{"gte":1,"path":"id"}`},
		{`{"path":"id","lt":0.000001}`, `{"lt":0.000001,"path":"id"}`},
	}
	for _, tt := range tests {
		m, err := matcher.Parse(json.RawMessage(tt.in), "done")
		if err != nil {
			t.Fatalf("Parse(%s) = %v", tt.in, err)
		}
		got, _ := json.Marshal(m)
		if string(got) != tt.want {
			t.Errorf("Parse(%s) marshals to %s, want %s", tt.in, got, tt.want)
		}
	}
}

// TestDuplicateKeysLastWins: a document that names a key twice in one
// object is read as JSON.parse, jq, Python and Go read it: the last one
// counts, at any depth, for a path as for an equals on the whole object.
func TestDuplicateKeysLastWins(t *testing.T) {
	t.Parallel()
	const dup = `{"state":"pending","state":"done","obj":{"a":1,"a":2},"list":[{"k":"x","k":"y"}],"esc":{"b":1,"\u0062":2}}`
	tests := []struct {
		matcher string
		want    bool
	}{
		{`{"path":"state","equals":"done"}`, true},
		{`{"path":"state","equals":"pending"}`, false},
		{`{"path":"obj.a","equals":2}`, true},
		{`{"path":"obj","equals":{"a":2}}`, true},
		{`{"path":"list.0.k","equals":"y"}`, true},
		{`{"path":"list.#.k","equals":["y"]}`, true},
		{`{"path":"esc.b","equals":2}`, true},
	}
	for _, tt := range tests {
		if got := matchOne(t, tt.matcher, dup).Matched; got != tt.want {
			t.Errorf("Parse(%s).Match(%s) = %v, want %v", tt.matcher, dup, got, tt.want)
		}
	}
	if got := matchOne(t, `{"path":"state","exists":true}`, dup).Value; got != `"done"` {
		t.Errorf("the value found at state is %s, want the last one, \"done\"", got)
	}
}

// TestByteOrderMark: a UTF-8 byte order mark before the JSON is not part
// of the document.
func TestByteOrderMark(t *testing.T) {
	t.Parallel()
	const bom = "\ufeff"
	if got := matchOne(t, `{"path":"state","equals":"done"}`, bom+`{"state":"done"}`); !got.Matched {
		t.Errorf("Match(BOM + JSON) = %+v, want a match", got)
	}
	ms, _ := matcher.ParseList(json.RawMessage(`{"path":"state","equals":"done"}`), "done")
	if ev := matcher.Evaluate(ms, []byte(bom+`{"state":"done"}`)); !ev.JSON || !ev.Matched {
		t.Errorf("Evaluate(BOM + JSON) = %+v, want JSON that matches", ev)
	}
	if ev := matcher.Evaluate(ms, []byte(bom+bom+`{"state":"done"}`)); ev.JSON {
		t.Errorf("Evaluate(two BOMs + JSON) = %+v, want not JSON: only one mark is stripped", ev)
	}
}

// TestPathAloneIsTruthy: a matcher with a path and no operator asks that
// the value there be truthy, not merely present; exists is said
// explicitly.
func TestPathAloneIsTruthy(t *testing.T) {
	t.Parallel()
	tests := []struct {
		doc  string
		want bool
	}{
		{`{"done":false}`, false},
		{`{"done":null}`, false},
		{`{"done":0}`, false},
		{`{"done":""}`, false},
		{`{"done":[]}`, false},
		{`{"done":{}}`, false},
		{`{}`, false},
		{`{"done":true}`, true},
		{`{"done":2}`, true},
		{`{"done":"yes"}`, true},
		{`{"done":[0]}`, true},
		{`{"done":{"a":null}}`, true},
	}
	for _, tt := range tests {
		if got := matchOne(t, `{"path":"done"}`, tt.doc).Matched; got != tt.want {
			t.Errorf(`Parse({"path":"done"}).Match(%s) = %v, want %v`, tt.doc, got, tt.want)
		}
	}
	m, err := matcher.Parse(json.RawMessage(`{"path":"done"}`), "done")
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := json.Marshal(m); string(got) != `{"path":"done","truthy":true}` {
		t.Errorf(`Parse({"path":"done"}) marshals to %s, want truthy said explicitly`, got)
	}
	if got := matchOne(t, `{"path":"done","exists":true}`, `{"done":false}`); !got.Matched {
		t.Errorf("exists:true on a false value = %+v, want a match: exists asks only for presence", got)
	}
}
