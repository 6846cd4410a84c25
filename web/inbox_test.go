package web_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

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
