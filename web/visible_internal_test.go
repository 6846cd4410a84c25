package web

import "testing"

// TestVisible: a rendered page's bidi controls, control characters (but
// tab, line feed and carriage return), DEL, C1 controls and bytes that
// are not UTF-8 are spelled; everything else is left as it is.
func TestVisible(t *testing.T) {
	for in, want := range map[string]string{
		"<p>plain é ✓</p>\n\t\r":          "<p>plain é ✓</p>\n\t\r",
		"a\u202eb\u202cc":                 `a\u202eb\u202cc`,
		"\u061c\u200e\u200f\u2066\u2069":  `\u061c\u200e\u200f\u2066\u2069`,
		"\x1b[31mred\x07\x7f":             `\x1b[31mred\x07\x7f`,
		"c1 \u009b x":                     `c1 \u009b x`,
		"bad \xff byte":                   `bad \xff byte`,
		"\u202a\u202b\u202d \u2067\u2068": `\u202a\u202b\u202d \u2067\u2068`,
	} {
		if got := string(visible([]byte(in))); got != want {
			t.Errorf("visible(%q) = %q, want %q", in, got, want)
		}
	}
}
