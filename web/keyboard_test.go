package web_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chromedp/cdproto/accessibility"
	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"github.com/vigil-run/vigil"
)

// press sends one key (a kb constant or a printable rune) to the focused
// element, with Shift when shift is set.
func press(t *testing.T, ctx context.Context, key string, shift bool) {
	t.Helper()
	var opts []chromedp.KeyOption
	if shift {
		opts = append(opts, chromedp.KeyModifiers(chromedp.ModifierShift))
	}
	step(t, ctx, "press "+keyName(key), chromedp.KeyEvent(key, opts...))
}

func keyName(key string) string {
	switch key {
	case kb.Tab:
		return "Tab"
	case kb.Enter:
		return "Enter"
	case kb.Escape:
		return "Escape"
	case " ":
		return "Space"
	}
	return key
}

// focusedJS describes the focused element: its id, tag, whether it is
// :focus-visible and whether that shows (an outline of some width, or a
// box shadow).
const focusedJS = `(() => {
	const el = document.activeElement;
	if (!el || el === document.body) return {id: "", tag: "body", visible: false, shown: false};
	const cs = getComputedStyle(el);
	const outline = cs.outlineStyle !== "none" && parseFloat(cs.outlineWidth) > 0;
	return {id: el.id, tag: el.tagName.toLowerCase(), text: (el.textContent || "").trim().slice(0, 40),
		visible: el.matches(":focus-visible"), shown: outline || cs.boxShadow !== "none"};
})()`

type focused struct {
	ID      string `json:"id"`
	Tag     string `json:"tag"`
	Text    string `json:"text"`
	Visible bool   `json:"visible"`
	Shown   bool   `json:"shown"`
}

// tabTo presses Tab (Shift-Tab when back) until the element matching css
// has the focus, at most max times; every element the focus lands on on
// the way must show it.
func tabTo(t *testing.T, ctx context.Context, css string, back bool, max int) {
	t.Helper()
	for range max {
		press(t, ctx, kb.Tab, back)
		f := eval[focused](t, ctx, focusedJS)
		if f.Tag != "body" && (!f.Visible || !f.Shown) {
			t.Errorf("the focus on <%s id=%q> %q does not show (:focus-visible %v, outline or shadow %v)", f.Tag, f.ID, f.Text, f.Visible, f.Shown)
		}
		if eval[bool](t, ctx, `document.activeElement !== null && document.activeElement.matches(`+jsString(css)+`)`) {
			return
		}
	}
	t.Fatalf("%d presses of Tab (back %v) never reached %s", max, back, css)
}

func jsString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// controlRoles are the roles of the controls a person operates: each
// needs an accessible name (its label).
var controlRoles = map[string]bool{
	"textbox": true, "searchbox": true, "combobox": true, "listbox": true, "checkbox": true, "radio": true,
	"button": true, "link": true, "spinbutton": true, "switch": true, "menuitem": true, "DisclosureTriangle": true,
}

// checkLabels fails the test for every control of the page, in the
// browser's accessibility tree, that has no accessible name, and returns
// how many controls it checked.
func checkLabels(t *testing.T, ctx context.Context, page string) int {
	t.Helper()
	res, err := chromedp.Run(ctx, chromedp.Action[accessibility.GetFullAXTreeResult](
		func(ctx context.Context, tg *chromedp.Target) (accessibility.GetFullAXTreeResult, error) {
			return cdp.Call(ctx, tg, accessibility.GetFullAXTree, accessibility.GetFullAXTreeParams{})
		}))
	if err != nil {
		t.Fatalf("%s: accessibility tree: %v", page, err)
	}
	n := 0
	for _, node := range res.Nodes {
		if node.Ignored || node.Role == nil {
			continue
		}
		var role, name string
		_ = json.Unmarshal(node.Role.Value, &role)
		if !controlRoles[role] {
			continue
		}
		n++
		if node.Name != nil {
			_ = json.Unmarshal(node.Name.Value, &name)
		}
		if strings.TrimSpace(name) == "" {
			t.Errorf("%s: a %s has no accessible name (DOM node %d)", page, role, node.BackendDOMNodeID)
		}
	}
	return n
}

// TestPanelKeyboard signs in, opens a watch, checks it now, opens and
// dismisses a confirmation, cancels the watch, visits the admin page and
// signs out with the keyboard alone (Tab, Shift-Tab, Enter, Space,
// Escape): every element the focus lands on shows it, and every control
// on each page has a label.
func TestPanelKeyboard(t *testing.T) {
	e := startDaemon(t)
	ctx := browser(t)
	w := register(t, e.c, vigil.RegisterRequest{Kind: vigil.KindFile, Recipient: "agent-k", Every: "1h", Deadline: "2h",
		Predicate: mustJSON(map[string]any{"path": filepath.Join(e.root, "kb.txt")}), Note: "keyboard", Observe: true})
	base := e.d.URL()

	// Sign in: the token field has the focus; type, Tab to the button,
	// Enter.
	step(t, ctx, "open the sign-in page", chromedp.Navigate(base+"/"), chromedp.WaitVisible(chromedp.ID("token")))
	if checkLabels(t, ctx, "sign-in") < 2 {
		t.Errorf("the sign-in page has fewer than 2 controls in its accessibility tree: the check looked at nothing")
	}
	if id := eval[focused](t, ctx, focusedJS).ID; id != "token" {
		t.Fatalf("the sign-in page opens with the focus on %q, want the token field", id)
	}
	step(t, ctx, "type the token", chromedp.KeyEvent(e.d.Token()))
	tabTo(t, ctx, "#signin", false, 3)
	press(t, ctx, kb.Enter, false)
	step(t, ctx, "see the list", chromedp.WaitVisible(chromedp.ID("watches")))
	// The token is in neither storage nor the page; the cookie is not
	// the script's to read.
	if eval[bool](t, ctx, `localStorage.length + sessionStorage.length > 0 || document.cookie.includes("vigil_session") || document.documentElement.outerHTML.includes(`+jsString(e.d.Token())+`)`) {
		t.Errorf("after signing in, the token or session is in the browser's storage, script-readable cookies or the page")
	}
	if n := checkLabels(t, ctx, "list"); n < 10 {
		t.Errorf("the list has %d controls in its accessibility tree, want its filters, links and buttons", n)
	}

	// From the top of the list to the watch's subject, Enter: its detail.
	tabTo(t, ctx, "#w-"+w.ID+" a.subject", false, 40)
	press(t, ctx, kb.Enter, false)
	step(t, ctx, "see the detail", chromedp.WaitVisible(chromedp.ID("check-now")))
	checkLabels(t, ctx, "detail")
	before := eval[int](t, ctx, `document.querySelectorAll("#probes tbody tr").length`)
	eval[bool](t, ctx, `window.__stay = true`)

	// Check now, with Enter: a new probe row; the focus stays on the
	// button.
	tabTo(t, ctx, "#check-now", false, 20)
	press(t, ctx, kb.Enter, false)
	step(t, ctx, "see the new probe", chromedp.Poll[chromedp.Void](`document.querySelectorAll("#probes tbody tr").length > `+itoa(before)))
	step(t, ctx, "the button is back", chromedp.Poll[chromedp.Void](`!document.getElementById("check-now").disabled`))
	if id := eval[focused](t, ctx, focusedJS).ID; id != "check-now" {
		t.Errorf("after Check now the focus is on %q, want it kept on the button", id)
	}
	screenshot(t, ctx, "panel-keyboard.png")

	// Delete…: Space opens the confirmation, Escape closes it unanswered
	// and gives the focus back to it.
	tabTo(t, ctx, "#delete", false, 5)
	press(t, ctx, " ", false)
	if !eval[bool](t, ctx, `document.getElementById("delete-box").open`) {
		t.Fatalf("Space on Delete… did not open its confirmation")
	}
	checkLabels(t, ctx, "detail, delete confirmation open")
	tabTo(t, ctx, "#delete-confirm", false, 3)
	press(t, ctx, kb.Escape, false)
	if eval[bool](t, ctx, `document.getElementById("delete-box").open`) {
		t.Errorf("Escape left the delete confirmation open")
	}
	if id := eval[focused](t, ctx, focusedJS).ID; id != "delete" {
		t.Errorf("after Escape the focus is on %q, want Delete…", id)
	}

	// Cancel…: back with Shift-Tab, Enter opens it, Tab to the answer,
	// Enter: the state changes in place and the focus goes to the result.
	tabTo(t, ctx, "#cancel", true, 3)
	press(t, ctx, kb.Enter, false)
	tabTo(t, ctx, "#cancel-confirm", false, 3)
	press(t, ctx, kb.Enter, false)
	step(t, ctx, "see the state change", chromedp.WaitVisible(chromedp.CSS("#state.state-cancelled")))
	if !eval[bool](t, ctx, `window.__stay === true`) {
		t.Errorf("the page reloaded on cancel")
	}
	if id := eval[focused](t, ctx, focusedJS).ID; id != "result" {
		t.Errorf("after cancelling, the focus is on %q, want the result line (its button is gone)", id)
	}
	got, err := e.c.Watch(t.Context(), w.ID)
	if err != nil || got.State != vigil.StateCancelled {
		t.Fatalf("after the keyboard's cancel the watch is %v (%v), want cancelled", got, err)
	}

	// The admin page, then the inbox, through the header's links.
	tabTo(t, ctx, `nav a[href="/ui/admin"]`, true, 20)
	press(t, ctx, kb.Enter, false)
	step(t, ctx, "see the admin page", chromedp.WaitVisible(chromedp.ID("t-create")))
	checkLabels(t, ctx, "admin")
	tabTo(t, ctx, `nav a[href="/ui/inbox"]`, false, 10)
	press(t, ctx, kb.Enter, false)
	step(t, ctx, "see the inbox", chromedp.WaitVisible(chromedp.ID("i-open")))
	checkLabels(t, ctx, "inbox")

	// Sign out.
	tabTo(t, ctx, "#signout", false, 10)
	press(t, ctx, kb.Enter, false)
	step(t, ctx, "see the sign-in page", chromedp.WaitVisible(chromedp.ID("token")))
	step(t, ctx, "still signed out", chromedp.Navigate(base+"/"), chromedp.WaitVisible(chromedp.ID("token")))
}

// TestPanelIdleAndDark: an open list asks nothing of the daemon while
// nothing happens (ten minutes of the page's own clock pass, and it sends
// no request: the live updates come on the one open event stream, and the
// countdowns run on that clock); and in the system's dark mode the page
// is dark.
func TestPanelIdleAndDark(t *testing.T) {
	e := startDaemon(t)
	ctx := browser(t)
	register(t, e.c, vigil.RegisterRequest{Kind: vigil.KindFile, Recipient: "agent-i", Every: "1h", Deadline: "2h",
		Predicate: mustJSON(map[string]any{"path": filepath.Join(e.root, "idle.txt")})})
	base := e.d.URL()
	step(t, ctx, "open the sign-in page", chromedp.Navigate(base+"/"), chromedp.WaitVisible(chromedp.ID("token")))
	step(t, ctx, "type the token", chromedp.SendKeys(chromedp.ID("token"), e.d.Token()))
	follow(t, ctx, "sign in", chromedp.Click(chromedp.ID("signin")))
	step(t, ctx, "the list is live", chromedp.WaitVisible(chromedp.ID("watches")),
		chromedp.Poll[chromedp.Void](`document.body.getAttribute("data-live") === "on"`))

	// Dark mode follows the system.
	step(t, ctx, "prefer dark", chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		_, err := cdp.Call(ctx, tg, emulation.SetEmulatedMedia, emulation.SetEmulatedMediaParams{
			Features: []*emulation.MediaFeature{{Name: "prefers-color-scheme", Value: "dark"}}})
		return err
	}))
	if bg := eval[string](t, ctx, `getComputedStyle(document.body).backgroundColor`); bg != "rgb(17, 20, 24)" {
		t.Errorf("in dark mode the page's background is %s, want the dark one", bg)
	}
	screenshot(t, ctx, "panel-dark.png")
	step(t, ctx, "prefer light", chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		_, err := cdp.Call(ctx, tg, emulation.SetEmulatedMedia, emulation.SetEmulatedMediaParams{
			Features: []*emulation.MediaFeature{{Name: "prefers-color-scheme", Value: "light"}}})
		return err
	}))
	if bg := eval[string](t, ctx, `getComputedStyle(document.body).backgroundColor`); bg != "rgb(255, 255, 255)" {
		t.Errorf("in light mode the page's background is %s, want white", bg)
	}

	// Idle: ten minutes of the page's clock. (Virtual time pauses at
	// the end of its budget: this comes last.)
	countdown := eval[string](t, ctx, `document.querySelector("time[data-countdown]").textContent`)

	requests := chromedp.Events(ctx, network.RequestWillBeSent)
	expired := chromedp.Events(ctx, emulation.VirtualTimeBudgetExpired)
	budget := float64(10 * 60 * 1000)
	step(t, ctx, "let ten minutes of the page's clock pass", chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		_, err := cdp.Call(ctx, tg, emulation.SetVirtualTimePolicy, emulation.SetVirtualTimePolicyParams{
			Policy: emulation.VirtualTimePolicyAdvance, Budget: &budget})
		return err
	}))
	for _, err := range expired {
		if err != nil {
			t.Fatalf("waiting for the page's ten minutes: %v", err)
		}
		break
	}
	// The countdowns ran on the page's clock: it did pass.
	if later := eval[string](t, ctx, `document.querySelector("time[data-countdown]").textContent`); later == countdown {
		t.Errorf("the countdown still shows %q after ten minutes of the page's clock: the clock did not run", later)
	}
	// A request the page sent would be in the stream of events before this
	// marker, which the test sends itself.
	eval[bool](t, ctx, `fetch("/ui/static/app.css?marker", {credentials: "same-origin"}), true`)
	var sent []string
	for ev, err := range requests {
		if err != nil {
			t.Fatalf("network events: %v", err)
		}
		if strings.HasSuffix(ev.Request.URL, "?marker") {
			break
		}
		sent = append(sent, ev.Request.URL)
	}
	if len(sent) > 0 {
		t.Errorf("the idle page sent %d requests in ten minutes of its clock, want none: %v", len(sent), sent)
	}
	if eval[string](t, ctx, `document.body.getAttribute("data-live")`) != "on" {
		t.Errorf("the event stream is no longer open after the idle minutes")
	}
}

// TestPanelProgressLive: while the list is open, a new observation of a
// pending watch (its file appears, still without the word it waits for)
// replaces the row's summary in place, from the event stream, with no
// reload.
func TestPanelProgressLive(t *testing.T) {
	e := startDaemon(t)
	ctx := browser(t)
	path := filepath.Join(e.root, "progress.txt")
	w := register(t, e.c, vigil.RegisterRequest{Kind: vigil.KindFile, Recipient: "agent-p", Every: "1h", Deadline: "2h",
		Predicate: mustJSON(map[string]any{"path": path, "contains": "DONE"}), Observe: true})
	base := e.d.URL()
	step(t, ctx, "open the sign-in page", chromedp.Navigate(base+"/"), chromedp.WaitVisible(chromedp.ID("token")))
	step(t, ctx, "type the token", chromedp.SendKeys(chromedp.ID("token"), e.d.Token()))
	follow(t, ctx, "sign in", chromedp.Click(chromedp.ID("signin")))
	step(t, ctx, "the list is live", chromedp.WaitVisible(chromedp.ID("w-"+w.ID)),
		chromedp.Poll[chromedp.Void](`document.body.getAttribute("data-live") === "on"`))
	sel := `document.querySelector("#w-` + w.ID + ` [data-field=summary]").textContent`
	before := eval[string](t, ctx, sel)
	eval[bool](t, ctx, `window.__stay = true`)
	if err := os.WriteFile(path, []byte("still working\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := e.c.Check(t.Context(), w.ID); err != nil {
		t.Fatalf("Check: %v", err)
	}
	step(t, ctx, "the summary changes in place", chromedp.Poll[chromedp.Void](sel+` !== `+jsString(before)))
	after := eval[string](t, ctx, sel)
	if !eval[bool](t, ctx, `window.__stay === true`) {
		t.Errorf("the page reloaded")
	}
	if state := eval[string](t, ctx, `document.querySelector("#w-`+w.ID+` [data-field=state]").textContent`); state != "pending" {
		t.Errorf("the row's state is %q, want still pending", state)
	}
	t.Logf("summary %q -> %q", before, after)
	screenshot(t, ctx, "panel-progress.png")
}
