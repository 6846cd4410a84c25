package timer

import (
	"strings"
	"testing"

	"github.com/vigil-run/vigil/watcher"
)

// TestSimpleReadsAsDecode: whatever simple reads, watcher.Decode reads the
// same way, and what it declines includes every spelling Decode would read
// differently (escapes, other keys, case, spaces, non-ASCII).
func TestSimpleReadsAsDecode(t *testing.T) {
	for _, raw := range []string{
		`{"at":"2026-03-01T10:00:00Z"}`, `{"in":"90m"}`, `{"at":"x"}`, `{"in":"1d"}`,
		`{"at":""}`, `{"in":""}`, `{"at":"a\"b"}`, `{"at":"a\\u0041"}`, `{"AT":"2026-03-01T10:00:00Z"}`,
		`{"ab":"x"}`, `{ "at":"x"}`, `{"at":"x" }`, `{"at":"é"}`, `{"at":"x"}x`, `{"at":"x"`, `{"at":1}`,
		`{"at":"tab	tab"}`, `{"at":"` + strings.Repeat("9", watcher.MaxPredicateBytes) + `"}`,
	} {
		in, ok := simple([]byte(raw))
		if !ok {
			continue
		}
		var want input
		if err := watcher.Decode([]byte(raw), "", &want); err != nil {
			t.Errorf("simple(%q) = %+v, but Decode refuses it: %v", raw, in, err)
			continue
		}
		if in != want {
			t.Errorf("simple(%q) = %+v, Decode = %+v", raw, in, want)
		}
	}
}
