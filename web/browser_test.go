package web_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"

	"github.com/vigil-run/vigil"
	"github.com/vigil-run/vigil/client"
	"github.com/vigil-run/vigil/daemon"
)

// xssNote is a note that must render as text and never run.
const xssNote = `<script>window.__x=1</script> deploy note`

// syncBuffer is a log sink the daemon writes from many goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

type panelEnv struct {
	d    *daemon.Daemon
	c    *client.Client
	root string
	logs *syncBuffer
}

// startDaemon runs a real daemon (SQLite, real watchers) on a free port,
// logging at debug level into a buffer the tests read.
func startDaemon(t *testing.T) *panelEnv {
	t.Helper()
	root := t.TempDir()
	cfg := daemon.DefaultConfig()
	cfg.Listen = "127.0.0.1:0"
	cfg.DataDir = filepath.Join(t.TempDir(), "vigil")
	cfg.Roots = []string{root}
	cfg.ProbeWorkers = 2
	logs := &syncBuffer{}
	logger := slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	d, err := daemon.New(t.Context(), cfg, logger)
	if err != nil {
		t.Fatalf("daemon.New: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- d.Run(ctx) }()
	select {
	case <-d.Primed():
	case err := <-errc:
		cancel()
		t.Fatalf("daemon stopped before it was primed: %v", err)
	}
	t.Cleanup(func() {
		cancel()
		if err := <-errc; err != nil {
			t.Errorf("daemon Run = %v after shutdown", err)
		}
	})
	c, err := client.New(d.URL(), d.Token(), nil)
	if err != nil {
		t.Fatal(err)
	}
	return &panelEnv{d: d, c: c, root: root, logs: logs}
}

// browser starts headless Chromium with a fresh profile. Without Chromium
// the test is skipped, loudly, unless CI is set: then it fails.
func browser(t *testing.T) context.Context {
	t.Helper()
	path, err := exec.LookPath("chromium")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("chromium is not installed, and CI is set: the panel's browser tests must run (apt-get install chromium)")
		}
		t.Skip("SKIPPED LOUDLY: chromium is not installed; the panel's browser tests did not run (apt-get install chromium)")
	}
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(path),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.Flag("headless", true),
		chromedp.Flag("no-sandbox", true),
		chromedp.Flag("disable-gpu", true),
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("no-first-run", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.WindowSize(1280, 900),
	}
	actx, cancelA := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelC := chromedp.NewContext(actx)
	t.Cleanup(func() { cancelC(); cancelA() })
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("starting chromium: %v", err)
	}
	return ctx
}

// step runs actions with a bound, failing the test with what it was doing.
func step(t *testing.T, ctx context.Context, what string, actions ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := chromedp.Do(sctx, actions...); err != nil {
		dctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		text, _ := chromedp.Run(dctx, chromedp.Evaluate[string](`location.href + "\n" + document.body.innerText`))
		probe, perr := chromedp.Run(dctx, chromedp.Evaluate[string](`fetch("/ui/unread").then(r => r.status + " " + JSON.stringify(performance.getEntriesByType("resource").slice(-6).map(e => e.name + " " + e.duration + " " + e.responseStatus)))`, chromedp.EvalAwaitPromise))
		t.Fatalf("%s: %v\nthe page:\n%s\nprobe: %s %v", what, err, text, probe, perr)
	}
}

func eval[T any](t *testing.T, ctx context.Context, js string) T {
	t.Helper()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](js))
	if err != nil {
		t.Fatalf("evaluating %s: %v", js, err)
	}
	return v
}

// screenshot saves the page into the test's temp dir (and, for the docs,
// where VIGIL_PANEL_SHOTS points) and returns the path.
func screenshot(t *testing.T, ctx context.Context, name string) string {
	t.Helper()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, png, 0o644); err != nil {
		t.Fatal(err)
	}
	if dir := os.Getenv("VIGIL_PANEL_SHOTS"); dir != "" {
		if err := os.WriteFile(filepath.Join(dir, name), png, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("screenshot: %s", path)
	return path
}

func register(t *testing.T, c *client.Client, r vigil.RegisterRequest) *vigil.Watch {
	t.Helper()
	w, err := c.Register(t.Context(), r)
	if err != nil {
		t.Fatalf("Register: %v", err)
	}
	return w
}

// TestPanelInBrowser drives the panel in headless Chromium through what a
// person does: sign in, see a watch, filter, open it, check it now, cancel
// it, watch a timer fire live, read the inbox, sign out. The token appears
// in no URL the browser asked for, no page and no log line; a note with a
// script renders as text and never runs.
func TestPanelInBrowser(t *testing.T) {
	e := startDaemon(t)
	t.Cleanup(func() {
		if t.Failed() {
			for _, l := range strings.Split(e.logs.String(), "\n") {
				if strings.Contains(l, "/ui/") || strings.Contains(l, "level=ERROR") || strings.Contains(l, "level=WARN") {
					t.Log(l)
				}
			}
		}
	})
	ctx := browser(t)
	var (
		urlsMu sync.Mutex
		urls   []string
	)
	events := chromedp.Events(ctx, network.RequestWillBeSent)
	go func() {
		for ev, err := range events {
			if err != nil {
				return
			}
			urlsMu.Lock()
			urls = append(urls, ev.Request.URL)
			urlsMu.Unlock()
		}
	}()

	file := register(t, e.c, vigil.RegisterRequest{Kind: vigil.KindFile, Recipient: "agent-a", Every: "1h", Deadline: "2h",
		Predicate: mustJSON(map[string]any{"path": filepath.Join(e.root, "report.txt")}), Note: xssNote,
		Labels: map[string]string{"team": "infra"}, Observe: true})
	other := register(t, e.c, vigil.RegisterRequest{Kind: vigil.KindFile, Recipient: "agent-b", Every: "1h", Deadline: "2h",
		Predicate: mustJSON(map[string]any{"path": filepath.Join(e.root, "other.txt")}), Note: "someone else's"})
	base := e.d.URL()

	// Sign in.
	step(t, ctx, "open the sign-in page", chromedp.Navigate(base+"/"), chromedp.WaitVisible(chromedp.ID("token")))
	step(t, ctx, "type the token", chromedp.SendKeys(chromedp.ID("token"), e.d.Token()))
	follow(t, ctx, "sign in", chromedp.Click(chromedp.ID("signin")))
	step(t, ctx, "see the list", chromedp.WaitVisible(chromedp.ID("watches")))

	// See the registered watch, its note as text, the counts.
	step(t, ctx, "see the watch", chromedp.WaitVisible(chromedp.ID("w-"+file.ID)), chromedp.WaitVisible(chromedp.ID("w-"+other.ID)))
	if got := eval[string](t, ctx, `document.querySelector("#w-`+file.ID+` .note").textContent`); got != xssNote {
		t.Errorf("the note shows %q, want the text %q", got, xssNote)
	}
	if eval[bool](t, ctx, `window.__x !== undefined`) {
		t.Errorf("the note's script ran")
	}
	if got := eval[string](t, ctx, `document.getElementById("count-pending").textContent`); got != "2" {
		t.Errorf("pending count = %q, want 2", got)
	}
	screenshot(t, ctx, "panel-list.png")

	// On a phone's width the rows become cards: nothing runs off the side.
	step(t, ctx, "narrow the window", chromedp.EmulateViewport(390, 844))
	if w := eval[int](t, ctx, `document.documentElement.scrollWidth`); w > 390 {
		t.Errorf("at 390 px wide the list is %d px wide", w)
	}
	screenshot(t, ctx, "panel-narrow.png")
	step(t, ctx, "widen the window", chromedp.EmulateViewport(1280, 900))

	// Filter by text, then by recipient: one row each.
	step(t, ctx, "type a filter", chromedp.SendKeys(chromedp.ID("f-text"), "DEPLOY"))
	follow(t, ctx, "filter by text", chromedp.Click(chromedp.ID("f-apply")))
	step(t, ctx, "see the filtered list", chromedp.WaitVisible(chromedp.ID("w-"+file.ID)))
	if n := eval[int](t, ctx, `document.querySelectorAll("#watches tbody tr").length`); n != 1 {
		t.Errorf("text filter shows %d rows, want 1", n)
	}
	step(t, ctx, "filter by recipient", chromedp.Navigate(base+"/?recipient=agent-b"), chromedp.WaitVisible(chromedp.ID("w-"+other.ID)))
	if n := eval[int](t, ctx, `document.querySelectorAll("#watches tbody tr").length`); n != 1 {
		t.Errorf("recipient filter shows %d rows, want 1", n)
	}

	// Open the detail, check it now: a new probe row.
	step(t, ctx, "back to the list", chromedp.Navigate(base+"/"))
	follow(t, ctx, "open the detail", chromedp.Click(chromedp.CSS("#w-"+file.ID+" a.subject")))
	step(t, ctx, "see the detail", chromedp.WaitVisible(chromedp.ID("check-now")))
	if got := eval[string](t, ctx, `document.getElementById("note").textContent`); got != xssNote {
		t.Errorf("the detail's note shows %q", got)
	}
	if eval[bool](t, ctx, `window.__x !== undefined`) {
		t.Errorf("the note's script ran on the detail page")
	}
	before := eval[int](t, ctx, `document.querySelectorAll("#probes tbody tr").length`)
	if before < 1 {
		t.Fatalf("the detail shows %d probes, want the first one", before)
	}
	eval[bool](t, ctx, `window.__stay = true`)
	step(t, ctx, "check now", chromedp.Click(chromedp.ID("check-now")),
		chromedp.Poll[chromedp.Void](`document.querySelectorAll("#probes tbody tr").length > `+itoa(before)))
	screenshot(t, ctx, "panel-detail.png")

	// Cancel, confirming: the state changes in place.
	step(t, ctx, "cancel", chromedp.Click(chromedp.ID("cancel")), chromedp.WaitVisible(chromedp.ID("cancel-confirm")),
		chromedp.Click(chromedp.ID("cancel-confirm")), chromedp.WaitVisible(chromedp.CSS("#state.state-cancelled")))
	if !eval[bool](t, ctx, `window.__stay === true`) {
		t.Errorf("the page reloaded on cancel")
	}

	// A timer fires while the list is open: its row changes in place.
	step(t, ctx, "open the list", chromedp.Navigate(base+"/"), chromedp.WaitVisible(chromedp.ID("watches")),
		chromedp.Poll[chromedp.Void](`document.body.getAttribute("data-live") === "on"`))
	timer := register(t, e.c, vigil.RegisterRequest{Kind: vigil.KindTimer, Recipient: "agent-a", Predicate: mustJSON(map[string]any{"in": "3s"})})
	step(t, ctx, "see the new-watch notice", chromedp.WaitVisible(chromedp.ID("news")))
	step(t, ctx, "reload for the timer", chromedp.Navigate(base+"/"), chromedp.WaitVisible(chromedp.ID("w-"+timer.ID)),
		chromedp.Poll[chromedp.Void](`document.body.getAttribute("data-live") === "on"`))
	eval[bool](t, ctx, `window.__stay = true`)
	step(t, ctx, "the timer fires live", chromedp.WaitVisible(chromedp.CSS("#w-"+timer.ID+" .state-fired")))
	if !eval[bool](t, ctx, `window.__stay === true`) {
		t.Errorf("the page reloaded when the timer fired")
	}

	// The inbox: unread marks, mark read, the badge drops to zero.
	step(t, ctx, "open the inbox", chromedp.Navigate(base+"/ui/inbox?recipient=agent-a&reader=panel"), chromedp.WaitVisible(chromedp.ID("mark-read")))
	unread := eval[int](t, ctx, `parseInt(document.getElementById("unread").textContent, 10)`)
	if unread < 2 {
		t.Errorf("the badge shows %d unread, want the cancel line and the timer's", unread)
	}
	if n := eval[int](t, ctx, `document.querySelectorAll("#messages li.unread").length`); n != unread {
		t.Errorf("%d messages marked unread, badge %d", n, unread)
	}
	screenshot(t, ctx, "panel-inbox.png")
	step(t, ctx, "mark read", chromedp.Click(chromedp.ID("mark-read")), chromedp.WaitVisible(chromedp.CSS("#unread.zero")))
	if n := eval[int](t, ctx, `document.querySelectorAll("#messages li.unread").length`); n != 0 {
		t.Errorf("%d messages still marked unread", n)
	}
	page, err := e.c.Messages(t.Context(), vigil.MessagesRequest{Recipient: "agent-a", Reader: "panel"})
	if err != nil || len(page.Messages) != 0 {
		t.Errorf("after mark read the reader has %d unread (%v), want 0", len(page.Messages), err)
	}

	// A message arriving raises the badge live.
	step(t, ctx, "open the list again", chromedp.Navigate(base+"/"), chromedp.WaitVisible(chromedp.CSS("#unread.zero")),
		chromedp.Poll[chromedp.Void](`document.body.getAttribute("data-live") === "on"`))
	if _, err := e.c.Cancel(t.Context(), mustRegisterPending(t, e).ID); err != nil {
		t.Fatal(err)
	}
	step(t, ctx, "the badge rises", chromedp.Poll[chromedp.Void](`document.getElementById("unread").textContent === "1"`))

	// Sign out: the sign-in page, and the panel stays closed.
	follow(t, ctx, "sign out", chromedp.Click(chromedp.ID("signout")))
	step(t, ctx, "see the sign-in page", chromedp.WaitVisible(chromedp.ID("token")))
	step(t, ctx, "still signed out", chromedp.Navigate(base+"/ui/watches/"+file.ID), chromedp.WaitVisible(chromedp.ID("token")))
	if e.d.Token() == "" {
		t.Fatal("no admin token")
	}

	// The token is in no URL the browser asked for, and in no log line.
	urlsMu.Lock()
	defer urlsMu.Unlock()
	if len(urls) < 10 {
		t.Errorf("only %d requests were seen: the network listener did not work", len(urls))
	}
	for _, u := range urls {
		if strings.Contains(u, e.d.Token()) || strings.Contains(u, url.QueryEscape(e.d.Token())) {
			t.Errorf("the token is in a URL: %s", u)
		}
	}
	if strings.Contains(e.logs.String(), e.d.Token()) {
		t.Errorf("the token is in the daemon's log")
	}
	if !strings.Contains(e.logs.String(), "/ui/signin") {
		t.Errorf("the log has no line for the sign-in: the log check looked at nothing")
	}
}

// follow runs an action that navigates (a form's submit) and waits for
// the new page.
func follow(t *testing.T, ctx context.Context, what string, a chromedp.Action[chromedp.Void]) {
	t.Helper()
	sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	resp, err := chromedp.RunResponse(sctx, a)
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	if resp.Status != http.StatusOK {
		t.Fatalf("%s: status %d", what, resp.Status)
	}
}

// mustRegisterPending registers a file watch that stays pending.
func mustRegisterPending(t *testing.T, e *panelEnv) *vigil.Watch {
	t.Helper()
	return register(t, e.c, vigil.RegisterRequest{Kind: vigil.KindFile, Recipient: "agent-a", Every: "1h", Deadline: "2h",
		Predicate: mustJSON(map[string]any{"path": filepath.Join(e.root, "later.txt")})})
}

func mustJSON(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

func itoa(n int) string {
	b, _ := json.Marshal(n)
	return string(b)
}

// session signs in over plain HTTP with token and returns a client holding
// the cookie, and the page's CSRF token.
func session(t *testing.T, base, token string) (*http.Client, string) {
	t.Helper()
	jar, _ := cookiejar.New(nil)
	hc := &http.Client{Jar: jar}
	resp, err := hc.PostForm(base+"/ui/signin", url.Values{"token": {token}})
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || strings.Contains(string(body), token) {
		t.Fatalf("sign in: %d (the page holds the token: %v)", resp.StatusCode, strings.Contains(string(body), token))
	}
	const marker = `name="vigil-csrf" content="`
	i := strings.Index(string(body), marker)
	if i < 0 {
		t.Fatalf("signed in, but the page has no CSRF token:\n%s", body)
	}
	rest := string(body)[i+len(marker):]
	return hc, rest[:strings.IndexByte(rest, '"')]
}
