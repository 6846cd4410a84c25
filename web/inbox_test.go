package web_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/vigil-run/vigil"
	"github.com/vigil-run/vigil/web"
)

// bigMailbox is a Service whose recipient agent-a has n messages (seqs
// 2, 4, … 2n: seqs have gaps), made up as they are read, counting the
// rows each read returns. Only Messages and Ack are served.
type bigMailbox struct {
	vigil.Service
	n int64

	mu      sync.Mutex
	cursors map[string]int64
	reads   []int // rows returned by each read
}

func (b *bigMailbox) Messages(_ context.Context, r vigil.MessagesRequest) (vigil.MessagesPage, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if r.Recipient != "agent-a" {
		return vigil.MessagesPage{}, vigil.Errorf(vigil.CodeNotFound, "no recipient %q", r.Recipient)
	}
	page := vigil.MessagesPage{Cursor: b.cursors[r.Reader], Messages: []*vigil.Message{}}
	after := page.Cursor
	if r.After != nil {
		after = *r.After
	}
	limit := r.Limit
	if limit <= 0 {
		limit = 100
	}
	at := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	for seq := after/2*2 + 2; seq <= 2*b.n && len(page.Messages) < limit; seq += 2 {
		page.Messages = append(page.Messages, &vigil.Message{Seq: seq, ID: fmt.Sprint(seq), Recipient: "agent-a", Type: "note", Text: fmt.Sprintf("note-%d.", seq), CreatedAt: at})
	}
	b.reads = append(b.reads, len(page.Messages))
	return page, nil
}

// Watches answers the list (where signing in lands) with no watches.
func (b *bigMailbox) Watches(context.Context, vigil.ListRequest) (vigil.WatchPage, error) {
	return vigil.WatchPage{}, nil
}

func (b *bigMailbox) Ack(_ context.Context, r vigil.AckRequest) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.cursors[r.Reader] = max(b.cursors[r.Reader], r.Seq)
	return nil
}

// rowsRead returns the rows read since the last call.
func (b *bigMailbox) rowsRead() (total int, reads []int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	reads, b.reads = b.reads, nil
	for _, n := range reads {
		total += n
	}
	return total, reads
}

func bigMailboxPanel(t *testing.T, n int64) (*bigMailbox, string, *http.Client, string) {
	t.Helper()
	const admin = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	svc := &bigMailbox{n: n, cursors: map[string]int64{}}
	srv := httptest.NewServer(web.New(web.Options{Service: svc, AdminToken: admin}).Handler())
	t.Cleanup(srv.Close)
	hc, csrf := session(t, srv.URL, admin)
	return svc, srv.URL, hc, csrf
}

// TestInboxReadsOnePage: opening the inbox of a recipient with 100 000
// messages reads one page of them (and the badge its bounded count), not
// the whole mailbox.
func TestInboxReadsOnePage(t *testing.T) {
	svc, base, hc, _ := bigMailboxPanel(t, 100_000)
	svc.rowsRead()
	resp, body := get(t, hc, base+"/ui/inbox?recipient=agent-a&reader=r1")
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("inbox: %d\n%s", resp.StatusCode, body)
	}
	// One page (200), the reader's cursor (1), the badge (at most 1000).
	if total, reads := svc.rowsRead(); total > 200+1+1000 {
		t.Errorf("one inbox page read %d messages (reads %v), want at most %d", total, reads, 200+1+1000)
	}
	if !strings.Contains(body, "note-2.") || strings.Contains(body, "note-402.") {
		t.Errorf("the first page does not hold the 200 oldest unread messages")
	}
	if !strings.Contains(body, `id="inbox-newer"`) || strings.Contains(body, "Mark all read") {
		t.Errorf("a full page has no link to newer messages, or offers to mark all read")
	}
}

// TestInboxPagesThrough: the newer links walk the whole mailbox once, in
// pages of 200, each message shown on one page; the last page's Mark all
// read leaves nothing unread. A bad after is refused, naming it.
func TestInboxPagesThrough(t *testing.T) {
	svc, base, hc, csrf := bigMailboxPanel(t, 450)
	next := regexp.MustCompile(`id="inbox-newer"|href="/ui/inbox\?([^"]*)" id="inbox-newer"`)
	seqs := regexp.MustCompile(`data-seq="(\d+)"`)
	seen := map[string]bool{}
	u := base + "/ui/inbox?recipient=agent-a&reader=r1"
	var body string
	for pages := 0; ; pages++ {
		if pages > 3 {
			t.Fatalf("more than 3 pages for 450 messages")
		}
		_, body = get(t, hc, u)
		for _, m := range seqs.FindAllStringSubmatch(body, -1) {
			if seen[m[1]] {
				t.Errorf("message %s shown on two pages", m[1])
			}
			seen[m[1]] = true
		}
		m := next.FindStringSubmatch(body)
		if m == nil {
			break
		}
		u = base + "/ui/inbox?" + strings.ReplaceAll(m[1], "&amp;", "&")
	}
	if len(seen) != 450 {
		t.Errorf("the pages showed %d messages, want 450", len(seen))
	}
	if !strings.Contains(body, "Mark all read") {
		t.Fatalf("the last page does not offer Mark all read")
	}
	resp := post(t, hc, base+"/ui/inbox/read", "", map[string][]string{"csrf": {csrf}, "recipient": {"agent-a"}, "reader": {"r1"}, "seq": {"900"}})
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("mark read: %d", resp.StatusCode)
	}
	if svc.cursors["r1"] != 900 {
		t.Errorf("cursor after Mark all read: %d, want 900", svc.cursors["r1"])
	}
	resp, body = get(t, hc, base+"/ui/inbox?recipient=agent-a&reader=r1&after=x")
	if resp.StatusCode != http.StatusUnprocessableEntity || !strings.Contains(body, "after must be") {
		t.Errorf("after=x: %d, want 422 naming after\n%s", resp.StatusCode, body)
	}
}

// shownSeqs returns the seqs of the messages the page in the browser
// shows, in the order shown.
func shownSeqs(t *testing.T, ctx context.Context) []string {
	t.Helper()
	return eval[[]string](t, ctx, `Array.from(document.querySelectorAll("#messages li")).map(li => li.dataset.seq)`)
}

// TestInboxPagesBothWays: in a browser, a mailbox of 450 messages (pages
// of 200) is walked forward two pages with Newer messages, then back two
// with Older messages: each page shows the same messages as when it was
// first shown, the first page has no Older link and the last no Newer.
// The API reads a mailbox forward only: the pages before are carried in
// the links (back).
func TestInboxPagesBothWays(t *testing.T) {
	const admin = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	svc := &bigMailbox{n: 450, cursors: map[string]int64{}}
	srv := httptest.NewServer(web.New(web.Options{Service: svc, AdminToken: admin}).Handler())
	t.Cleanup(srv.Close)
	ctx := browser(t)
	step(t, ctx, "open the sign-in page", chromedp.Navigate(srv.URL+"/"), chromedp.WaitVisible(chromedp.ID("token")))
	step(t, ctx, "type the token", chromedp.SendKeys(chromedp.ID("token"), admin))
	follow(t, ctx, "sign in", chromedp.Click(chromedp.ID("signin")))
	follow(t, ctx, "open the inbox", chromedp.Navigate(srv.URL+"/ui/inbox?recipient=agent-a&reader=r1"))

	// want checks the page shows seqs from..to (newest first) and which
	// of the Older and Newer links it has.
	want := func(what string, from, to int, older, newer bool) {
		t.Helper()
		got := shownSeqs(t, ctx)
		var exp []string
		for s := to; s >= from; s -= 2 {
			exp = append(exp, fmt.Sprint(s))
		}
		if !slices.Equal(got, exp) {
			t.Fatalf("%s: the page shows %d messages %v…, want seqs %d down to %d", what, len(got), got[:min(3, len(got))], to, from)
		}
		if has := eval[bool](t, ctx, `!!document.getElementById("inbox-older")`); has != older {
			t.Errorf("%s: an Older messages link: %v, want %v", what, has, older)
		}
		if has := eval[bool](t, ctx, `!!document.getElementById("inbox-newer")`); has != newer {
			t.Errorf("%s: a Newer messages link: %v, want %v", what, has, newer)
		}
	}
	want("the first page", 2, 400, false, true)
	follow(t, ctx, "go to newer messages", chromedp.Click(chromedp.ID("inbox-newer")))
	want("the second page", 402, 800, true, true)
	follow(t, ctx, "go to newer messages again", chromedp.Click(chromedp.ID("inbox-newer")))
	want("the third page", 802, 900, true, false)
	follow(t, ctx, "go back to older messages", chromedp.Click(chromedp.ID("inbox-older")))
	want("back on the second page", 402, 800, true, true)
	follow(t, ctx, "go back to older messages again", chromedp.Click(chromedp.ID("inbox-older")))
	want("back on the first page", 2, 400, false, true)
}

// TestInboxBackRefused: the pages to go back to (?back=) are validated:
// seqs, increasing, below after, at most 32, and only with after; a page
// 32 pages deep remembers the 32 before the next.
func TestInboxBackRefused(t *testing.T) {
	_, base, hc, _ := bigMailboxPanel(t, 100_000)
	u := base + "/ui/inbox?recipient=agent-a&reader=r1"
	var deep []string
	for i := range 32 {
		deep = append(deep, fmt.Sprint(i*400))
	}
	for _, bad := range []string{
		"&back=400",              // without after
		"&after=800&back=x",      // not a seq
		"&after=800&back=400,-2", // negative
		"&after=800&back=400,0",  // not increasing
		"&after=800&back=0,800",  // not below after
		"&after=99999&back=" + strings.Repeat("1,", 32) + "2", // too many
	} {
		resp, body := get(t, hc, u+bad)
		if resp.StatusCode != http.StatusUnprocessableEntity || !strings.Contains(body, "back") {
			t.Errorf("%s: %d, want 422 naming back\n%s", bad, resp.StatusCode, body)
		}
	}
	_, body := get(t, hc, u+"&after=12800&back="+strings.Join(deep, ","))
	newer := regexp.MustCompile(`href="/ui/inbox\?([^"]*)" id="inbox-newer"`).FindStringSubmatch(body)
	if newer == nil {
		t.Fatal("no Newer messages link on a full page")
	}
	q, err := url.ParseQuery(strings.ReplaceAll(newer[1], "&amp;", "&"))
	if err != nil {
		t.Fatal(err)
	}
	if want := strings.Join(append(deep[1:], "12800"), ","); q.Get("back") != want {
		t.Errorf("the Newer link's back = %q, want the last 32 pages %q", q.Get("back"), want)
	}
	older := regexp.MustCompile(`href="/ui/inbox\?([^"]*)" id="inbox-older"`).FindStringSubmatch(body)
	if older == nil || !strings.Contains(older[1], "after=12400") {
		t.Errorf("the Older link %v, want after=12400", older)
	}
}
