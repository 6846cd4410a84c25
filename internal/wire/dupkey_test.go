package wire

import (
	"bytes"
	"encoding/json"
	"testing"
)

// The outermost object's keys clash exactly when encoding/json would match
// them to one struct field (bytes.EqualFold); deeper keys only when equal.
func TestDuplicateKeyFoldsTheOutermostObject(t *testing.T) {
	pairs := [][2]string{{"kind", "KIND"}, {"kind", "Kind"}, {"kind", "kinds"}, {"k", "\u212a"}, {"s", "\u017f"},
		{"a", "b"}, {"", ""}, {"é", "É"}, {"ß", "SS"}, {"recipient", "recipient"}}
	for _, p := range pairs {
		k0, _ := json.Marshal(p[0])
		k1, _ := json.Marshal(p[1])
		top := []byte(`{` + string(k0) + `:1,` + string(k1) + `:2}`)
		_, twice := DuplicateKey(top)
		if want := bytes.EqualFold([]byte(p[0]), []byte(p[1])); twice != want {
			t.Errorf("DuplicateKey(%s) = %v, want %v", top, twice, want)
		}
		nested := []byte(`{"labels":{` + string(k0) + `:"1",` + string(k1) + `:"2"}}`)
		path, twice := DuplicateKey(nested)
		if want := p[0] == p[1]; twice != want || twice && path != "labels."+p[1] {
			t.Errorf("DuplicateKey(%s) = %q, %v, want %v", nested, path, twice, want)
		}
	}
}
