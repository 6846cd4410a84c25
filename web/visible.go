package web

import "github.com/vigil-run/vigil"

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
	// Every escape is longer than what it spells: the same length means
	// nothing was spelled, and the page is sent as it is.
	if out := vigil.Spell(string(page), vigil.KeepSpace); len(out) != len(page) {
		return []byte(out)
	}
	return page
}
