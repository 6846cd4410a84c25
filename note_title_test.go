package vigil_test

import (
	"testing"

	"github.com/vigil-run/vigil"
)

// TestValidNoteTitle: a note's title is the text of its message, which
// reaches other agents' prompts (the notice, the MCP channel) as it is: one
// line of printable text, so neither a control character nor a Unicode
// bidi control (which makes it read in another order than it is written)
// is taken; the refusal names the title.
func TestValidNoteTitle(t *testing.T) {
	t.Parallel()
	for _, title := range []string{"a\nb", "a\x1b[2Jb", "a\u009bb", "deploy \u202edone\u202c", "x\u2066y\u2069", "\u200fok", "\u061cok"} {
		err := vigil.ValidNote(title, "")
		if vigil.ErrorCode(err) != vigil.CodeInvalidRequest || vigil.ErrorField(err) != "title" {
			t.Errorf("ValidNote(%q) = %v, want invalid_request (title)", title, err)
		}
	}
	for _, title := range []string{"deploy is yours", "déploiement terminé ✓", "עברית and English", "emoji 👍🏽"} {
		if err := vigil.ValidNote(title, ""); err != nil {
			t.Errorf("ValidNote(%q) = %v, want nil", title, err)
		}
	}
}
