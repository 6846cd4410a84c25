package web_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/vigil-run/vigil"
	"github.com/vigil-run/vigil/engine"
	"github.com/vigil-run/vigil/httpapi"
	"github.com/vigil-run/vigil/store/memstore"
	"github.com/vigil-run/vigil/watcher"
	"github.com/vigil-run/vigil/watcher/watchertest"
	"github.com/vigil-run/vigil/web"
)

// TestPanelCatchesUpAfterReconnect: a watch settled while the page's
// event stream was down comes back, on the reconnection with
// Last-Event-ID, as its outcome message (only message events are sent
// again): the page's row shows it settled, as the live watch.settled
// would have.
func TestPanelCatchesUpAfterReconnect(t *testing.T) {
	st := memstore.New()
	fill(t, st, 2) // w000001 is pending
	reg := watcher.NewRegistry(watchertest.NeverSettles(vigil.KindHTTP), watchertest.NeverSettles(vigil.KindFile))
	eng := engine.New(engine.Config{Store: st, Watchers: reg})
	var (
		mu   sync.Mutex
		ids  []string
		done = make(chan struct{})
	)
	// The stream: the first connection sends one message event and
	// drops; the reconnection, resumed after it, sends what came
	// meanwhile, the outcome message of w000001, and stays.
	events := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		ids = append(ids, r.Header.Get("Last-Event-ID"))
		n := len(ids)
		mu.Unlock()
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		switch n {
		case 1:
			fmt.Fprint(w, "retry: 50\n\nevent: message.created\nid: 7\ndata: {\"type\":\"message.created\",\"recipient\":\"r9\",\"seq\":7}\n\n")
		case 2:
			fmt.Fprint(w, "event: message.created\nid: 8\ndata: {\"type\":\"message.created\",\"watch_id\":\"w000001\",\"recipient\":\"r1\",\"state\":\"fired\",\"text\":\"It fired meanwhile.\",\"seq\":8}\n\n")
			w.(http.Flusher).Flush()
			select {
			case <-r.Context().Done():
			case <-done:
			}
		}
	})
	p := web.New(web.Options{Service: eng, AdminToken: "admin-secret", Watchers: reg, Events: events})
	srv := httptest.NewServer(p.Handler())
	defer srv.Close()
	defer close(done)

	ctx := browser(t)
	step(t, ctx, "open the sign-in page", chromedp.Navigate(srv.URL+"/"), chromedp.WaitVisible(chromedp.ID("token")))
	step(t, ctx, "type the token", chromedp.SendKeys(chromedp.ID("token"), "admin-secret"))
	follow(t, ctx, "sign in", chromedp.Click(chromedp.ID("signin")))
	step(t, ctx, "the row settles after the reconnection", chromedp.WaitVisible(chromedp.CSS("#w-w000001 .state-fired")))
	if got := eval[string](t, ctx, `document.querySelector('#w-w000001 [data-field="summary"]').textContent`); got != "It fired meanwhile." {
		t.Errorf("the row's summary is %q, want the outcome's sentence", got)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(ids) < 2 || ids[1] != "7" {
		t.Errorf("the stream was opened with Last-Event-ID %q, want \"\" then \"7\"", ids)
	}
}

// TestPanelStreamStartsWhereThePageWasBuilt: the page's event stream
// starts after the newest message when the page was built, not when its
// script connects: a watch cancelled in between shows cancelled on the
// page, and a message the badge counted already is not counted again
// when the stream sends it.
func TestPanelStreamStartsWhereThePageWasBuilt(t *testing.T) {
	st := memstore.New()
	fill(t, st, 4) // w000001, w000002 and w000003 are pending
	reg := watcher.NewRegistry(watchertest.NeverSettles(vigil.KindHTTP), watchertest.NeverSettles(vigil.KindFile))
	eng := engine.New(engine.Config{Store: st, Watchers: reg})
	api := httpapi.New(httpapi.Options{Service: eng})
	var (
		mu       sync.Mutex
		conns    int
		noteNext bool
	)
	stream := api.EventStream()
	// The first stream: w000001 is cancelled after the page was built,
	// before its script connected.
	events := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		conns++
		first := conns == 1
		mu.Unlock()
		if first {
			if _, err := eng.Cancel(r.Context(), "w000001"); err != nil {
				t.Error(err)
			}
		}
		stream.ServeHTTP(w, r)
	})
	// When asked: a note to r1 lands after the page read where the
	// mailboxes end, before it counted the unread.
	lastSeq := func(ctx context.Context) (int64, error) {
		seq, err := st.MessagesLastSeq(ctx)
		mu.Lock()
		note := noteNext
		noteNext = false
		mu.Unlock()
		if note {
			if _, err := eng.Note(ctx, vigil.NoteRequest{Recipient: "r1", Title: "meanwhile"}); err != nil {
				return 0, err
			}
		}
		return seq, err
	}
	p := web.New(web.Options{Service: eng, AdminToken: "admin-secret", Watchers: reg, Events: events, LastSeqFunc: lastSeq})
	srv := httptest.NewServer(p.Handler())
	defer srv.Close()
	defer api.Close() // first: the page's stream ends, so the server can close

	ctx := browser(t)
	step(t, ctx, "open the sign-in page", chromedp.Navigate(srv.URL+"/"), chromedp.WaitVisible(chromedp.ID("token")))
	step(t, ctx, "type the token", chromedp.SendKeys(chromedp.ID("token"), "admin-secret"))
	follow(t, ctx, "sign in", chromedp.Click(chromedp.ID("signin")))
	step(t, ctx, "the row cancelled meanwhile shows cancelled", chromedp.WaitVisible(chromedp.CSS("#w-w000001 .state-cancelled")))

	mu.Lock()
	noteNext = true
	mu.Unlock()
	step(t, ctx, "open r1's inbox", chromedp.Navigate(srv.URL+"/ui/inbox?recipient=r1&reader=panel"), chromedp.WaitVisible(chromedp.ID("mark-read")),
		chromedp.Poll[chromedp.Void](`document.body.getAttribute("data-live") === "on"`))
	counted := eval[int](t, ctx, `parseInt(document.getElementById("unread").textContent, 10)`)
	if counted != 2 {
		t.Fatalf("the badge counts %d unread, want 2 (the cancellation and the note)", counted)
	}
	// A later event of another recipient: once it is shown, the stream's
	// earlier events have been taken too.
	if _, err := eng.Cancel(t.Context(), "w000002"); err != nil {
		t.Fatal(err)
	}
	step(t, ctx, "see a later event", chromedp.Poll[chromedp.Void](`document.getElementById("live").textContent.indexOf("w000002") >= 0`))
	if got := eval[int](t, ctx, `parseInt(document.getElementById("unread").textContent, 10)`); got != counted {
		t.Errorf("the badge shows %d unread, want %d: a message it counted was counted again from the stream", got, counted)
	}
}
