package vigil

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// PlainText spells every character of s that could act on a reader's screen
// rather than be read as a visible escape, as cli's terminal output does:
// C0 control characters (tab and newline included) and DEL as \x1b, C1
// control characters as \u009b, a byte that is not UTF-8 as \xff, and the
// Unicode bidi controls (U+061C, U+200E, U+200F, U+202A–U+202E,
// U+2066–U+2069), which make text read in another order than it is
// written, as \u202e. Every sentence quotes text from outside (a forge's
// title, a check's name, an HTTP body, a note) through it (package
// wording), and a resume's prompt passes its sentence and note through it,
// so none carries a terminal escape sequence or a bidi override into an
// agent's prompt, a terminal or a mail. Everything else is left as it is.
func PlainText(s string) string { return Spell(s, SpellSpace) }

// Spacing says what Spell does with tab, line feed and carriage return.
type Spacing int

const (
	// SpellSpace spells them as every other control character: \x09,
	// \x0a, \x0d (PlainText).
	SpellSpace Spacing = iota
	// NameSpace spells them by name, \t, \n and \r: one line of a
	// terminal's output (the CLI).
	NameSpace
	// KeepSpace leaves them as they are: white space where text is
	// laid out again (the web panel's pages, whose notes keep their line
	// breaks).
	KeepSpace
)

// Spell is PlainText with tab, line feed and carriage return spelled as
// space says. It allocates only when it spells something.
func Spell(s string, space Spacing) string {
	i := 0
	for i < len(s) {
		c := s[i]
		if c < utf8.RuneSelf {
			if (c < 0x20 || c == 0x7f) && !(space == KeepSpace && whiteSpace(c)) {
				break
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 || unsafeRune(r) {
			break
		}
		i += size
	}
	if i == len(s) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 8)
	b.WriteString(s[:i])
	for i < len(s) {
		c := s[i]
		if c < utf8.RuneSelf {
			switch {
			case c >= 0x20 && c != 0x7f, space == KeepSpace && whiteSpace(c):
				b.WriteByte(c)
			case space == NameSpace && whiteSpace(c):
				b.WriteString(spaceNames[c])
			default:
				fmt.Fprintf(&b, `\x%02x`, c)
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			fmt.Fprintf(&b, `\x%02x`, c)
		case unsafeRune(r):
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			b.WriteString(s[i : i+size])
		}
		i += size
	}
	return b.String()
}

// whiteSpace reports whether c is tab, line feed or carriage return.
func whiteSpace(c byte) bool { return c == '\t' || c == '\n' || c == '\r' }

// spaceNames are the names NameSpace spells white space by.
var spaceNames = [...]string{'\t': `\t`, '\n': `\n`, '\r': `\r`}

// unsafeRune reports whether r, past ASCII, is a C1 control character or
// a bidi control.
func unsafeRune(r rune) bool {
	return r >= 0x80 && r <= 0x9f || BidiControl(r)
}

// BidiControl reports whether r is one of the Unicode bidi controls: the
// marks (U+061C, U+200E, U+200F), embeddings and overrides (U+202A–U+202E)
// and isolates (U+2066–U+2069).
func BidiControl(r rune) bool {
	return r == 0x061c || r == 0x200e || r == 0x200f || r >= 0x202a && r <= 0x202e || r >= 0x2066 && r <= 0x2069
}
