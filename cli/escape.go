package cli

import (
	"bytes"
	"fmt"
	"unicode/utf8"

	"github.com/vigil-run/vigil"
)

// term makes caller-supplied text safe to print on a terminal: every C0
// control character (tab and newline included), DEL, every C1 control
// character (U+0080–U+009F) and every byte that is not UTF-8 is written
// as a visible escape (\x1b, \u009b, \xff), so a note or a label can
// neither move the cursor, set the window title, clear the screen nor
// start an 8-bit control sequence, and every Unicode bidi control
// (vigil.BidiControl: U+202E and the like) as \u202e, so that none makes a
// line read in another order than it is written. Everything else is left as it is. It
// is the one escaping helper of the CLI: every string that comes from the
// daemon or from a caller passes through it (or through oneLine, which
// uses it) before it is printed. The API keeps the text as given.
func term(s string) string { return vigil.Spell(s, vigil.NameSpace) }

// termJSON spells the C1 control characters and DEL that encoding/json
// leaves raw as \u escapes: the same JSON value, safe on a terminal (C0
// characters are escaped by the encoder already).
func termJSON(b []byte) []byte {
	if !bytes.ContainsFunc(b, func(r rune) bool { return r == 0x7f || r >= 0x80 && r <= 0x9f || vigil.BidiControl(r) }) {
		return b
	}
	var out bytes.Buffer
	for len(b) > 0 {
		r, size := utf8.DecodeRune(b)
		if r == 0x7f || r >= 0x80 && r <= 0x9f || vigil.BidiControl(r) {
			fmt.Fprintf(&out, `\u%04x`, r)
		} else {
			out.Write(b[:size])
		}
		b = b[size:]
	}
	return out.Bytes()
}
