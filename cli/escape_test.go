package cli

import (
	"encoding/json"
	"testing"

	"github.com/vigil-run/vigil"
)

func TestTerm(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ in, want string }{
		{"plain text, ünïcödé, 日本", "plain text, ünïcödé, 日本"},
		{"\x1b]0;pwn\x07\x1b[2J", `\x1b]0;pwn\x07\x1b[2J`},
		{"a\tb\nc\rd", `a\tb\nc\rd`},
		{"del\x7f", `del\x7f`},
		{"csi \u009b2J nel \u0085", `csi \u009b2J nel \u0085`},
		{"raw byte \x9b and \xff", `raw byte \x9b and \xff`},
		{"invoice\u202egnp.exe \u2066x\u2069 \u200f", `invoice\u202egnp.exe \u2066x\u2069 \u200f`},
		{"", ""},
	} {
		if got := term(tc.in); got != tc.want {
			t.Errorf("term(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestTermJSON(t *testing.T) {
	t.Parallel()
	in := "note \x1b[2J \u009b \x7f é \u202e"
	b, _ := json.Marshal(in)
	got := termJSON(b)
	for _, c := range string(got) {
		if c < 0x20 || c == 0x7f || c >= 0x80 && c <= 0x9f || vigil.BidiControl(c) {
			t.Fatalf("termJSON(%q) = %q holds control character %U", b, got, c)
		}
	}
	var back string
	if err := json.Unmarshal(got, &back); err != nil || back != in {
		t.Errorf("termJSON changed the value: %q (%v), want %q", back, err, in)
	}
}
