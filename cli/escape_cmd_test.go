package cli

import (
	"strings"
	"testing"
	"unicode/utf8"
)

// hostile is text an attacker would have a terminal run: set the window
// title, clear the screen, and an 8-bit CSI.
const hostile = "\x1b]0;pwn\x07\x1b[2J\u009b31m"

// rawControl returns the first C0 (other than newline and tab), DEL or C1
// control character, or byte that is not UTF-8, in s; "" if none.
func rawControl(s string) string {
	for i, r := range s {
		switch {
		case r == utf8.RuneError && !strings.HasPrefix(s[i:], "\uFFFD"):
			return s[i : i+1]
		case r < 0x20 && r != '\n' && r != '\t', r == 0x7f, r >= 0x80 && r <= 0x9f:
			return string(r)
		}
	}
	return ""
}

// TestOutputEscapesControlCharacters: a note, a label and a command line
// holding terminal escapes are printed escaped by every command that
// shows them (add, ls, show, why, wait, cancel, inbox, notice), never
// raw, and still shown; --json keeps the text, spelled with JSON escapes.
func TestOutputEscapesControlCharacters(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	run := func(args ...string) result {
		t.Helper()
		r := d.vigil(t, args...)
		if r.code != 0 && r.code != ExitStopped {
			t.Fatalf("vigil %v: exit %d: %s", args, r.code, r.stderr)
		}
		return r
	}
	check := func(name string, r result) {
		t.Helper()
		want := `\x1b]0;pwn\x07\x1b[2J\u009b31m`
		if strings.HasSuffix(name, "--json") {
			want = `\u001b]0;pwn\u0007\u001b[2J\u009b31m`
		}
		for _, out := range []string{r.stdout, r.stderr} {
			if c := rawControl(out); c != "" {
				t.Errorf("%s printed the raw control character %q:\n%q", name, c, out)
			}
		}
		if !strings.Contains(r.stdout, want) {
			t.Errorf("%s did not show the text escaped:\n%s", name, r.stdout)
		}
	}
	added := run("add", "command", "--for", "esc", "--note", hostile, "--label", "k="+hostile, "--shell", "sleep 3600 # "+hostile)
	check("add", added)
	id := strings.Fields(strings.SplitN(added.stdout, " as ", 2)[1])[0]
	check("ls", run("ls", "--for", "esc"))
	check("show", run("show", id))
	check("why", run("why", id))
	check("show --json", run("show", id, "--json"))
	check("cancel", run("cancel", id))
	check("wait", run("wait", id))
	check("inbox", run("inbox", "--for", "esc", "--no-ack"))
	check("notice", run("notice", "--for", "esc"))
}
