package web

import (
	"bytes"
	"fmt"
	"unicode/utf8"

	"github.com/vigil-run/vigil"
)

// visible spells, in a rendered page, every character that would act on
// how the page reads rather than be read, as the CLI and the sentences do
// (vigil.PlainText): a C0 control character other than tab, line feed and
// carriage return (white space in HTML, and a multi-line note's line
// breaks) as \x1b, DEL as \x7f, a C1 control character as \u009b, a byte
// that is not UTF-8 as \xff, and each Unicode bidi control
// (vigil.BidiControl: U+202E and the like), which makes text read in
// another order than it is written, as \u202e. The page's own markup holds
// none of them, so every text in it from outside (a note, a label, a
// sentence, a summary, an observation) is spelled, wherever the template
// put it; the escapes are plain ASCII, which html/template's escaping has
// already made safe around. The script spells what it inserts likewise
// (app.js, visible).
func visible(page []byte) []byte {
	i := 0
	for i < len(page) {
		c := page[i]
		if c < utf8.RuneSelf {
			if spelled(c) {
				break
			}
			i++
			continue
		}
		r, size := utf8.DecodeRune(page[i:])
		if r == utf8.RuneError && size == 1 || unsafe(r) {
			break
		}
		i += size
	}
	if i == len(page) {
		return page
	}
	var b bytes.Buffer
	b.Grow(len(page) + 16)
	b.Write(page[:i])
	for i < len(page) {
		c := page[i]
		if c < utf8.RuneSelf {
			if spelled(c) {
				fmt.Fprintf(&b, `\x%02x`, c)
			} else {
				b.WriteByte(c)
			}
			i++
			continue
		}
		r, size := utf8.DecodeRune(page[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			fmt.Fprintf(&b, `\x%02x`, c)
		case unsafe(r):
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			b.Write(page[i : i+size])
		}
		i += size
	}
	return b.Bytes()
}

// spelled reports whether ASCII byte c is spelled: a control character
// other than the white space HTML reads as such.
func spelled(c byte) bool {
	return (c < 0x20 && c != '\t' && c != '\n' && c != '\r') || c == 0x7f
}

// unsafe reports whether r, past ASCII, is a C1 control character or a
// bidi control.
func unsafe(r rune) bool {
	return r >= 0x80 && r <= 0x9f || vigil.BidiControl(r)
}
