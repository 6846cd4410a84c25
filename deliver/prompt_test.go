package deliver_test

import (
	"os"
	"strings"
	"testing"

	"github.com/vigil-run/vigil"
	"github.com/vigil-run/vigil/deliver"
)

// TestPromptPlain: the prompt a resumed agent starts with carries no
// terminal escape sequence, control character or bidi control, whether
// they came in a sentence stored before sentences were made plain (a CI
// check's name, a forge's title) or in the note: they are spelled
// visibly (\x1b, \u202e). The note keeps its line breaks.
func TestPromptPlain(t *testing.T) {
	t.Parallel()
	w := &vigil.Watch{ID: "01W", Kind: vigil.KindCI, Recipient: "agent-7", State: vigil.StateFailed,
		Note:    "open the PR\x1b[2J\nthen \u202eecalper\u202c",
		Outcome: &vigil.Outcome{State: vigil.StateFailed, Sentence: "CI on acme/api@3f2a1b0 failed: 1 of 2 checks failed: lint\x1b]0;pwned\x07 \u2066x\u2069\u009b."}}
	p := deliver.NewPayload(w, "01M")
	got := deliver.Prompt(&p)
	want := "vigil: your watch 01W (ci) failed: CI on acme/api@3f2a1b0 failed: 1 of 2 checks failed: lint\\x1b]0;pwned\\x07 \\u2066x\\u2069\\u009b." +
		"\nNote: open the PR\\x1b[2J\nthen \\u202eecalper\\u202c" +
		"\nDetails: vigil show 01W (or the watch_get tool)."
	if got != want {
		t.Errorf("Prompt =\n%q\nwant\n%q", got, want)
	}
}

// TestPromptAsDocumented: the prompt docs/agents.md shows is what Prompt
// makes of the watch it describes.
func TestPromptAsDocumented(t *testing.T) {
	t.Parallel()
	doc, err := os.ReadFile("../docs/agents.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(doc), "`PROMPT` is one argument, never parsed by a shell:\n\n```\n")
	block, _, ok2 := strings.Cut(rest, "\n```")
	if !ok || !ok2 {
		t.Fatal("docs/agents.md shows no PROMPT")
	}
	w := &vigil.Watch{ID: "01M8Q2D7N7XK3V2T8B5Y6ZQ4FJ", Kind: vigil.KindCI, Recipient: "agent-7", State: vigil.StateFired, Note: "if green: open the PR",
		Outcome: &vigil.Outcome{State: vigil.StateFired, Sentence: "CI on acme/api@3f2a9c1 is done: all 3 checks passed."}}
	p := deliver.NewPayload(w, "01M")
	if got := deliver.Prompt(&p); got != block {
		t.Errorf("Prompt =\n%s\ndocs/agents.md shows\n%s", got, block)
	}
}
