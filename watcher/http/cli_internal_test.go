package httpwatch

import (
	"strings"
	"testing"

	"github.com/vigil-run/vigil/watcher"
)

// headerFlags are the flags of `vigil add http URL --header …`.
type headerFlags []string

func (f headerFlags) Changed(name string) bool { return name == "header" }
func (headerFlags) String(string) string       { return "" }
func (headerFlags) Bool(string) bool           { return false }
func (headerFlags) Int(string) int             { return 0 }
func (f headerFlags) Strings(name string) []string {
	if name == "header" {
		return f
	}
	return nil
}
func (headerFlags) Ints(string) []int { return nil }

// TestCLIHeaderGivenTwice: a header given twice to --header is refused,
// naming it, rather than the last value replacing the first without a
// word; two headers go through.
func TestCLIHeaderGivenTwice(t *testing.T) {
	t.Parallel()
	for _, hs := range [][]string{{"X-Key: a", "X-Key: b"}, {"X-Key: a", "x-key: b"}} {
		p := map[string]any{}
		err := buildCLI(p, watcher.CLIInput{Args: []string{"https://x.test/"}, Flags: headerFlags(hs)})
		if err == nil || !strings.Contains(err.Error(), "given twice") {
			t.Errorf("--header %q: buildCLI = %v, %v; want refused, given twice", hs, err, p["headers"])
		}
	}
	p := map[string]any{}
	if err := buildCLI(p, watcher.CLIInput{Args: []string{"https://x.test/"}, Flags: headerFlags{"X-Key: a", "Accept: b"}}); err != nil {
		t.Fatal(err)
	}
	if h, _ := p["headers"].(map[string]any); len(h) != 2 {
		t.Errorf("two headers: %v", p["headers"])
	}
}
