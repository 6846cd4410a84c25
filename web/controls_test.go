package web_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/vigil-run/vigil"
)

// rawControls finds, in the page's text, a character that acts on how the
// text reads instead of being read: a control character other than tab,
// line feed and carriage return, or a Unicode bidi control.
const rawControls = `/[\u0000-\u0008\u000b\u000c\u000e-\u001f\u007f-\u009f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]/`

// TestPanelSpellsControls: a note holding a bidi override (U+202E) and a
// terminal escape, and a path holding one, are shown spelled (\u202e,
// \x1b) as the CLI and the sentences show them, in the pages the server
// renders and in what the script inserts (a summary changed live, the
// probes after "check now"): the panel showed them as given, and a
// U+202E made a note or summary read in another order than written.
func TestPanelSpellsControls(t *testing.T) {
	e := startDaemon(t)
	ctx := browser(t)
	note := "ship it \u202eedispu\u202c now\x1b[31m"
	spelledNote := `ship it \u202eedispu\u202c now\x1b[31m`
	path := filepath.Join(e.root, "log\u202etxt.md")
	w := register(t, e.c, vigil.RegisterRequest{Kind: vigil.KindFile, Recipient: "agent-c", Every: "1h", Deadline: "2h",
		Predicate: mustJSON(map[string]any{"path": path, "contains": "DONE"}), Note: note, Observe: true})
	base := e.d.URL()
	step(t, ctx, "open the sign-in page", chromedp.Navigate(base+"/"), chromedp.WaitVisible(chromedp.ID("token")))
	step(t, ctx, "type the token", chromedp.SendKeys(chromedp.ID("token"), e.d.Token()))
	follow(t, ctx, "sign in", chromedp.Click(chromedp.ID("signin")))
	step(t, ctx, "the list is live", chromedp.WaitVisible(chromedp.ID("w-"+w.ID)),
		chromedp.Poll[chromedp.Void](`document.body.getAttribute("data-live") === "on"`))

	clean := func(where string) {
		t.Helper()
		if raw := eval[string](t, ctx, `(document.body.textContent.match(`+rawControls+`) || [""])[0]`); raw != "" {
			t.Errorf("%s shows %U as given", where, []rune(raw)[0])
		}
	}
	// The pages the server renders.
	if got := eval[string](t, ctx, `document.querySelector("#w-`+w.ID+` .note").textContent`); got != spelledNote {
		t.Errorf("the list's note shows %q, want %q", got, spelledNote)
	}
	clean("the list")

	// What the script inserts: a summary changed live.
	sel := `document.querySelector("#w-` + w.ID + ` [data-field=summary]").textContent`
	before := eval[string](t, ctx, sel)
	if err := os.WriteFile(path, []byte("still working\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := e.c.Check(t.Context(), w.ID); err != nil {
		t.Fatalf("Check: %v", err)
	}
	step(t, ctx, "the summary changes in place", chromedp.Poll[chromedp.Void](sel+` !== `+jsString(before)))
	if got := eval[string](t, ctx, sel); !strings.Contains(got, `log\u202etxt.md`) {
		t.Errorf("the live summary shows %q, want the path spelled log\\u202etxt.md", got)
	}
	clean("the list, after a live summary")

	// The detail page, then "check now": the probes the script renders.
	step(t, ctx, "open the detail", chromedp.Navigate(base+"/ui/watches/"+w.ID), chromedp.WaitVisible(chromedp.ID("check-now")))
	if got := eval[string](t, ctx, `document.getElementById("note").textContent`); got != spelledNote {
		t.Errorf("the detail's note shows %q, want %q", got, spelledNote)
	}
	clean("the detail")
	probes := eval[int](t, ctx, `document.querySelectorAll("#probes tbody tr").length`)
	if err := os.WriteFile(path, []byte("still working, more\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	step(t, ctx, "check now", chromedp.Click(chromedp.ID("check-now")),
		chromedp.Poll[chromedp.Void](`document.querySelectorAll("#probes tbody tr").length > `+itoa(probes)))
	if got := eval[string](t, ctx, `document.querySelector("#probes tbody").textContent`); !strings.Contains(got, `log\u202etxt.md`) {
		t.Errorf("the probes show %q, want the path spelled log\\u202etxt.md", got)
	}
	clean("the detail, after check now")
}
