package httpapi

import (
	"fmt"
	"strings"
	"testing"

	"github.com/vigil-run/vigil"
)

func TestDuplicateKey(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in    string
		dup   bool
		field string
	}{
		{`{"a":1,"b":2}`, false, ""},
		{`{"a":{"k":1},"b":{"k":1}}`, false, ""},
		{`[{"k":1},{"k":1}]`, false, ""},
		{`{"a":[[1],[{"x":1}]],"b":[],"c":{}}`, false, ""},
		{`{"a":1,"b"`, false, ""},            // does not parse: the decoder says so
		{`{"a":1} {"a":1,"a":2}`, false, ""}, // one value is read; the rest is refused elsewhere
		{`{"a":1,"a":1}`, true, "a"},
		{`{"a":{"b":{"c":1,"c":2}}}`, true, "a.b.c"},
		{`[[{"a":1,"a":2}]]`, true, "[0][0].a"},
		{`{"x":[1,"s",null,{"y":{},"y":[]}]}`, true, "x[3].y"},
		{`{"a":{},"b":[{}],"a":0}`, true, "a"},
		{`{"":1,"":2}`, true, ""},
		// Keys are compared as they decode, escapes and all.
		{`{"a":1,"\u0061":2}`, true, "a"},
		{`{"a\"b":1,"a\"c":2,"s":"x\"y:z"}`, false, ""},
		{`{"v":"{\"a\":1,\"a\":2}"}`, false, ""},
		{` { "a" : 1 , "b" : { "c" : 1 , "c" : 2 } } `, true, "b.c"},
		// Past the first few keys of an object, as well as among them.
		{manyKeys(40, "k3"), true, "k3"},
		{manyKeys(40, "k30"), true, "k30"},
		{manyKeys(40, ""), false, ""},
	}
	for _, tt := range tests {
		err := duplicateKey([]byte(tt.in))
		if !tt.dup {
			if err != nil {
				t.Errorf("duplicateKey(%s) = %v, want nil", tt.in, err)
			}
			continue
		}
		if vigil.ErrorCode(err) != vigil.CodeInvalidRequest || vigil.ErrorField(err) != tt.field {
			t.Errorf("duplicateKey(%s) = %v (field %q), want invalid_request on %q", tt.in, err, vigil.ErrorField(err), tt.field)
		}
	}
}

// manyKeys is an object of n keys k0, k1, …, then dup again when set.
func manyKeys(n int, dup string) string {
	var b strings.Builder
	b.WriteString("{")
	for i := range n {
		fmt.Fprintf(&b, "%q:%d,", fmt.Sprintf("k%d", i), i)
	}
	if dup != "" {
		fmt.Fprintf(&b, "%q:0,", dup)
	}
	b.WriteString(`"end":0}`)
	return b.String()
}
