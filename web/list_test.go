package web_test

import (
	"context"
	"fmt"
	"html"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/vigil-run/vigil"
	"github.com/vigil-run/vigil/engine"
	"github.com/vigil-run/vigil/store/memstore"
	"github.com/vigil-run/vigil/watcher"
	"github.com/vigil-run/vigil/watcher/watchertest"
	"github.com/vigil-run/vigil/web"
)

var (
	rowID    = regexp.MustCompile(`<tr id="w-([^"]+)"`)
	nextLink = regexp.MustCompile(`<a href="/\?([^"]+)" id="next-page"`)
)

// fill inserts n watches straight into the store: recipient r<i%10>, kind
// http or file by parity, label team=t<i%4>, note "job i", and "special"
// in every 1000th note; every 7th is fired.
func fill(t testing.TB, st vigil.Store, n int) {
	t.Helper()
	ctx := context.Background()
	at := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	for i := range n {
		kind := vigil.KindHTTP
		pred := fmt.Sprintf(`{"url":"https://example.com/%d"}`, i)
		if i%2 == 1 {
			kind, pred = vigil.KindFile, fmt.Sprintf(`{"path":"/srv/f%d"}`, i)
		}
		note := fmt.Sprintf("job %d", i)
		if i%1000 == 0 {
			note += " special"
		}
		w := &vigil.Watch{ID: fmt.Sprintf("w%06d", i), Kind: kind, Predicate: []byte(pred), Recipient: fmt.Sprintf("r%d", i%10),
			State: vigil.StatePending, Mode: vigil.ModeUntil, Every: time.Hour, Deadline: at.Add(24 * time.Hour),
			CreatedAt: at.Add(time.Duration(i) * time.Millisecond), Note: note, Labels: map[string]string{"team": fmt.Sprintf("t%d", i%4)}}
		w.Identity = vigil.Identity(w.Recipient, kind, w.Mode, w.Predicate)
		if _, err := st.WatchCreate(ctx, vigil.WatchCreateParams{Watch: w}); err != nil {
			t.Fatal(err)
		}
		if i%7 == 0 {
			out := &vigil.Outcome{State: vigil.StateFired, Reason: "satisfied", Sentence: "done"}
			if _, err := st.WatchSettle(ctx, []vigil.WatchSettleParams{{ID: w.ID, State: vigil.StateFired, Outcome: out, SettledAt: w.CreatedAt}}); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// panelOn serves a panel over an engine on st, signed in as the admin;
// it returns the server and a signed-in client.
func panelOn(t testing.TB, st vigil.Store) (*httptest.Server, *http.Client) {
	t.Helper()
	reg := watcher.NewRegistry(watchertest.NeverSettles(vigil.KindHTTP), watchertest.NeverSettles(vigil.KindFile))
	eng := engine.New(engine.Config{Store: st, Watchers: reg})
	p := web.New(web.Options{Service: eng, AdminToken: "admin-secret", Counts: eng.Counts, Probes: eng.Probes,
		WatchMessages: eng.WatchMessages, Watchers: reg})
	srv := httptest.NewServer(p.Handler())
	t.Cleanup(srv.Close)
	jar := newJar()
	hc := &http.Client{Jar: jar}
	resp, err := hc.PostForm(srv.URL+"/ui/signin", url.Values{"token": {"admin-secret"}})
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("sign in: %v %v", resp, err)
	}
	resp.Body.Close()
	return srv, hc
}

// TestPanelPagesAndFilters10k: with 10 000 watches, each filter's pages,
// followed by their next links, hold exactly the watches that match, each
// once, newest first.
func TestPanelPagesAndFilters10k(t *testing.T) {
	const n = 10000
	st := memstore.New()
	fill(t, st, n)
	srv, hc := panelOn(t, st)
	match := map[string]func(i int) bool{
		"":                   func(int) bool { return true },
		"recipient=r3":       func(i int) bool { return i%10 == 3 },
		"state=fired":        func(i int) bool { return i%7 == 0 },
		"state=pending":      func(i int) bool { return i%7 != 0 },
		"kind=file":          func(i int) bool { return i%2 == 1 },
		"label=team%3Dt1":    func(i int) bool { return i%4 == 1 },
		"q=SPECIAL":          func(i int) bool { return i%1000 == 0 },
		"q=example.com%2F77": func(i int) bool { return i%2 == 0 && fmt.Sprint(i)[:min(2, len(fmt.Sprint(i)))] == "77" },
		"kind=http&label=team%3Dt2&state=pending": func(i int) bool { return i%2 == 0 && i%4 == 2 && i%7 != 0 },
	}
	// The filters page in parallel: each its own pages, the server and the
	// store shared (the 2 000 pages take minutes under the race detector).
	for q, want := range match {
		t.Run(q, func(t *testing.T) {
			t.Parallel()
			pageThrough(t, hc, srv.URL, q, n, want)
		})
	}
	_, body := get(t, hc, srv.URL+"/")
	if want := fmt.Sprintf(`id="count-fired">%d<`, (n+6)/7); !regexp.MustCompile(regexp.QuoteMeta(want)).MatchString(body) {
		t.Errorf("the fired count is not %d", (n+6)/7)
	}
}

// pageThrough follows the list's pages under the filter q and checks they
// hold exactly the watches of n that want keeps, each once, newest first.
func pageThrough(t *testing.T, hc *http.Client, base, q string, n int, want func(int) bool) {
	var got []string
	next := q
	for pages := 0; ; pages++ {
		if pages > n/50+1 {
			t.Fatalf("%s: more pages than watches", q)
		}
		resp, body := get(t, hc, base+"/?"+next)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("%s: page %d: %d", q, pages, resp.StatusCode)
		}
		ids := rowID.FindAllStringSubmatch(body, -1)
		if len(ids) > 50 {
			t.Fatalf("%s: a page of %d rows", q, len(ids))
		}
		for _, m := range ids {
			got = append(got, m[1])
		}
		m := nextLink.FindStringSubmatch(body)
		if m == nil {
			break
		}
		next = html.UnescapeString(m[1])
	}
	var wantIDs []string
	for i := n - 1; i >= 0; i-- {
		if want(i) {
			wantIDs = append(wantIDs, fmt.Sprintf("w%06d", i))
		}
	}
	if len(got) != len(wantIDs) {
		t.Errorf("filter %q: %d watches over its pages, want %d", q, len(got), len(wantIDs))
		return
	}
	for i := range got {
		if got[i] != wantIDs[i] {
			t.Errorf("filter %q: row %d is %s, want %s", q, i, got[i], wantIDs[i])
			break
		}
	}
}

func newJar() http.CookieJar {
	jar, _ := cookiejar.New(nil)
	return jar
}

// TestDetailListsMessagesOfALargeMailbox: a watch's page lists its
// messages, its change and its outcome, when its recipient's mailbox held
// more than 10 000 messages before them: the page read the mailbox from
// its start, 10 pages of 1 000 at most, and said "None yet".
func TestDetailListsMessagesOfALargeMailbox(t *testing.T) {
	st := memstore.New()
	ctx := context.Background()
	at := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	w := &vigil.Watch{ID: "w-large", Kind: vigil.KindHTTP, Predicate: []byte(`{"url":"https://example.com/"}`), Recipient: "busy",
		State: vigil.StatePending, Mode: vigil.ModeUntil, Every: time.Hour, Deadline: at.Add(24 * time.Hour), CreatedAt: at}
	w.Identity = vigil.Identity(w.Recipient, w.Kind, w.Mode, w.Predicate)
	if _, err := st.WatchCreate(ctx, vigil.WatchCreateParams{Watch: w}); err != nil {
		t.Fatal(err)
	}
	for i := range 10_001 {
		m := &vigil.Message{ID: fmt.Sprintf("n%05d", i), Recipient: "busy", Type: vigil.MessageNote, Text: "a note", CreatedAt: at}
		if _, err := st.MessageCreate(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := st.MessageCreate(ctx, &vigil.Message{ID: "m-changed", Recipient: "busy", WatchID: w.ID, Type: vigil.MessageChanged,
		Text: "the page changed", CreatedAt: at.Add(time.Minute)}); err != nil {
		t.Fatal(err)
	}
	out := &vigil.Outcome{State: vigil.StateFired, Reason: "satisfied", Sentence: "The page is up."}
	msg := &vigil.Message{ID: "m-fired", Recipient: "busy", WatchID: w.ID, Type: vigil.MessageFired, Text: "mailed: the page is up", CreatedAt: at.Add(time.Hour)}
	if _, err := st.WatchSettle(ctx, []vigil.WatchSettleParams{{ID: w.ID, State: vigil.StateFired, Outcome: out, SettledAt: at.Add(time.Hour), Message: msg}}); err != nil {
		t.Fatal(err)
	}
	srv, hc := panelOn(t, st)
	resp, body := get(t, hc, srv.URL+"/ui/watches/"+w.ID)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("detail: %d", resp.StatusCode)
	}
	changed := strings.Index(body, "the page changed")
	fired := strings.Index(body, "mailed: the page is up")
	if changed < 0 || fired < changed || strings.Contains(body, "None yet") {
		t.Errorf("the watch's page does not list its change, then its outcome (at %d, %d; None yet: %v)", changed, fired, strings.Contains(body, "None yet"))
	}
}
