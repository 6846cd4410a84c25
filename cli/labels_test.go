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
