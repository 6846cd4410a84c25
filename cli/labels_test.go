package cli

import (
	"strings"
	"testing"
)

// TestLabelGivenTwice: a label given twice to --label is refused, naming
// it, and nothing is registered, rather than the last value replacing the
// first without a word; two labels go through.
func TestLabelGivenTwice(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	r := d.vigil(t, "add", "timer", "1h", "--label", "task=T-1", "--label", "task=T-2", "-q")
	if r.code != ExitUsage || !strings.Contains(r.stderr, `label "task" is given twice`) {
		t.Errorf("add with a label twice: exit %d, stderr %q; want %d naming the label", r.code, r.stderr, ExitUsage)
	}
	if r := d.vigil(t, "ls", "--json"); r.code != ExitOK || strings.Contains(r.stdout, `"id"`) {
		t.Errorf("add with a label twice registered a watch: ls exit %d, %s", r.code, r.stdout)
	}
	if r := d.vigil(t, "add", "timer", "1h", "--label", "task=T-1", "--label", "team=a", "-q"); r.code != ExitOK {
		t.Errorf("add with two labels: exit %d, stderr %q", r.code, r.stderr)
	}
}

// TestJSONFlagKeyGivenTwice: --predicate and --deliver refuse a key given
// twice (at any depth; the outermost in any case, as the daemon matches
// those fields), naming it, and anything after the object, as the API
// refuses them: the CLI decodes them into a map, which kept the last value
// without a word, and the daemon never saw the first.
func TestJSONFlagKeyGivenTwice(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--predicate", `{"in":"1h","in":"2h"}`}, `--predicate: key "in" is given twice`},
		{[]string{"--predicate", `{"in":"1h","IN":"2h"}`}, `--predicate: key "IN" is given twice`},
		{[]string{"--predicate", `{"in":"1h"}}`}, `--predicate must be one JSON object`},
		{[]string{"--predicate", `{"in":"1h"}`, "--deliver", `{"command":{"shell":"true","shell":"echo hi"}}`}, `--deliver: key "command.shell" is given twice`},
	} {
		args := append([]string{"add", "timer", "-q"}, tc.args...)
		r := d.vigil(t, args...)
		if r.code != ExitUsage || !strings.Contains(r.stderr, tc.want) {
			t.Errorf("vigil %q: exit %d, stdout %q, stderr %q; want %d saying %q", args, r.code, r.stdout, r.stderr, ExitUsage, tc.want)
		}
	}
	if r := d.vigil(t, "ls", "--json"); r.code != ExitOK || strings.Contains(r.stdout, `"id"`) {
		t.Errorf("a refused add registered a watch: ls exit %d, %s", r.code, r.stdout)
	}
	if r := d.vigil(t, "add", "timer", "-q", "--predicate", `{"in":"1h"}`); r.code != ExitOK {
		t.Errorf("add timer --predicate: exit %d, stderr %q", r.code, r.stderr)
	}
}
