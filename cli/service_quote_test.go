package cli

import (
	"strings"
	"testing"
)

// TestSystemdUnitControlCharacters: a word of ExecStart holding a
// newline (a data dir or --listen given with one) must stay on the
// ExecStart line, escaped, and must not add lines of its own to the unit.
func TestSystemdUnitControlCharacters(t *testing.T) {
	t.Parallel()
	dir := "/tmp/x\nExecStartPre=/bin/touch /tmp/pwned\n#"
	unit := systemdUnit(unitParams{Binary: "/usr/bin/vigil", Args: []string{"serve", "--data-dir", dir}})
	for _, l := range strings.Split(unit, "\n") {
		if strings.HasPrefix(l, "ExecStartPre=") {
			t.Errorf("the data dir added a line to the unit: %q\n%s", l, unit)
		}
	}
	if n := strings.Count(unit, "ExecStart="); n != 1 {
		t.Errorf("%d ExecStart lines", n)
	}
	if got := systemdQuote("a b\x01"); strings.ContainsAny(got, "\x01") {
		t.Errorf("systemdQuote left a control character raw: %q", got)
	}
}
