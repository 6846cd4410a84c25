package jsonw_test

import (
	"encoding/json"
	"testing"

	"github.com/vigil-run/vigil/internal/jsonw"
)

// tricky are strings every appender must write as encoding/json does:
// the HTML characters, the quote and the backslash, control characters,
// text outside ASCII, invalid UTF-8 and the line separators JSON allows
// and JavaScript does not.
var tricky = []string{"", "plain", `<b>&"\`, "tab\there\n", "\x00\x1f\x7f", "été ☃", "\xff\xfe", "\u2028\u2029", "</script>"}

func marshal(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestAsEncodingJSON: each appender writes what json.Marshal writes for
// the same value, byte for byte.
func TestAsEncodingJSON(t *testing.T) {
	for _, s := range tricky {
		if got, want := string(jsonw.String(nil, s)), marshal(t, s); got != want {
			t.Errorf("String(%q) = %s, want %s", s, got, want)
		}
		if got, want := string(jsonw.OptString([]byte("{"), `"k":`, s))+"}", marshal(t, struct {
			K string `json:"k,omitempty"`
		}{s}); got != want {
			t.Errorf("OptString(%q) = %s, want %s", s, got, want)
		}
	}
	m := map[string]string{}
	for i, s := range tricky {
		m[s] = tricky[len(tricky)-1-i]
	}
	if got, want := string(jsonw.StringMap(nil, m)), marshal(t, m); got != want {
		t.Errorf("StringMap = %s, want %s", got, want)
	}
	for _, n := range []int{0, -1, 7, 1 << 40} {
		if got, want := string(jsonw.OptInt([]byte("{"), `"n":`, n))+"}", marshal(t, struct {
			N int `json:"n,omitempty"`
		}{n}); got != want {
			t.Errorf("OptInt(%d) = %s, want %s", n, got, want)
		}
	}
	for _, raw := range []string{`{"a" : [1, 2.50, "<&>"] }`, "null", ` "x" `, `{"\u00e9":"\u2028"}`} {
		got, err := jsonw.Raw(nil, json.RawMessage(raw))
		if want := marshal(t, json.RawMessage(raw)); err != nil || string(got) != want {
			t.Errorf("Raw(%s) = %s, %v; want %s", raw, got, err, want)
		}
	}
	if got, err := jsonw.Raw(nil, nil); err != nil || string(got) != "null" {
		t.Errorf("Raw(nil) = %s, %v; want null", got, err)
	}
	if _, err := jsonw.Raw(nil, json.RawMessage(`{"a":`)); err == nil {
		t.Error("Raw of text that is not JSON: no error")
	}
}
