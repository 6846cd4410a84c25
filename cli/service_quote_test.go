package cli

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
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

// TestSystemdUnitNoRestartOnRefusal: the unit does not start vigil again
// after an exit with the code of a start it refuses until the operator
// acts (ExitUsage: a bad config, a damaged database, another replica's
// keys), where Restart=on-failure started it every 5 s without end; and
// systemd reads the unit without a complaint, where it is on the machine.
func TestSystemdUnitNoRestartOnRefusal(t *testing.T) {
	unit := systemdUnit(unitParams{Binary: "/usr/bin/vigil", Args: []string{"serve"}})
	if want := "\nRestartPreventExitStatus=" + strconv.Itoa(ExitUsage) + "\n"; !strings.Contains(unit, want) {
		t.Errorf("the unit lacks %q:\n%s", strings.TrimSpace(want), unit)
	}
	if _, err := exec.LookPath("systemd-analyze"); err != nil {
		return
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "vigil.service")
	if err := os.WriteFile(path, []byte(unit), 0o644); err != nil {
		t.Fatal(err)
	}
	out, _ := exec.Command("systemd-analyze", "verify", "--man=no", path).CombinedOutput()
	for _, line := range strings.Split(string(out), "\n") {
		if strings.Contains(line, "vigil.service") && (strings.Contains(line, "Unknown") || strings.Contains(line, "Failed to parse")) {
			t.Errorf("systemd-analyze verify: %s", line)
		}
	}
}
