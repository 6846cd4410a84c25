package web_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vigil-run/vigil"
	"github.com/vigil-run/vigil/daemon"
	"github.com/vigil-run/vigil/engine"
	"github.com/vigil-run/vigil/store/memstore"
	"github.com/vigil-run/vigil/watcher"
	"github.com/vigil-run/vigil/web"
)

// TestCookieSecureBehindTLSProxy: the daemon never terminates TLS
// itself (docs: "keep it on loopback unless a proxy with TLS is in
// front"), so r.TLS is always nil. A sign-in posted from an https page
// (the browser's Origin says so; the daemon's Origin check trusts it via
// public_url/allowed_hosts) must still get a Secure cookie.
func TestCookieSecureBehindTLSProxy(t *testing.T) {
	const admin = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	eng := engine.New(engine.Config{Store: memstore.New(), Watchers: watcher.NewRegistry()})
	p := web.New(web.Options{Service: eng, AdminToken: admin})
	srv := httptest.NewServer(p.Handler()) // plain HTTP, as the daemon's listener
	defer srv.Close()
	req, _ := http.NewRequest(http.MethodPost, srv.URL+"/ui/signin", strings.NewReader(url.Values{"token": {admin}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	// What the browser sends through the TLS-terminating proxy.
	req.Header.Set("Origin", "https://vigil.example.com")
	req.Header.Set("X-Forwarded-Proto", "https")
	resp, err := (&http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	var c *http.Cookie
	for _, x := range resp.Cookies() {
		if x.Name == web.CookieName {
			c = x
		}
	}
	if c == nil {
		t.Fatalf("no session cookie (status %d)", resp.StatusCode)
	}
	if !c.Secure {
		t.Errorf("session cookie set for an https page is not Secure: %q", resp.Header.Get("Set-Cookie"))
	}
}

// TestMarkAllReadMarksAll: "Mark all read" with more than 200
// unread messages leaves some unread (the form's seq is the last of a
// 200-message page starting at the cursor, the oldest unread ones): the
// page offers it only once it shows the newest message.
func TestMarkAllReadMarksAll(t *testing.T) {
	const admin = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	eng := engine.New(engine.Config{Store: memstore.New(), Watchers: watcher.NewRegistry()})
	for i := range 250 {
		if _, err := eng.Note(t.Context(), vigil.NoteRequest{Recipient: "agent-a", Title: fmt.Sprintf("n%d", i)}); err != nil {
			t.Fatal(err)
		}
	}
	p := web.New(web.Options{Service: eng, AdminToken: admin})
	srv := httptest.NewServer(p.Handler())
	defer srv.Close()
	hc, csrf := session(t, srv.URL, admin)
	// An inbox page shows 200 messages; the newer link leads to the rest.
	_, body := get(t, hc, srv.URL+"/ui/inbox?recipient=agent-a&reader=r1")
	if strings.Contains(body, "Mark all read") {
		t.Errorf("the first of two pages offers Mark all read")
	}
	const newer = `<a href="/ui/inbox?`
	if i := strings.Index(body, newer); i < 0 || !strings.Contains(body, `id="inbox-newer"`) {
		t.Fatalf("no link to the newer messages")
	} else {
		q := body[i+len(newer):]
		q = strings.ReplaceAll(q[:strings.IndexByte(q, '"')], "&amp;", "&")
		_, body = get(t, hc, srv.URL+"/ui/inbox?"+q)
	}
	if !strings.Contains(body, "n249") || !strings.Contains(body, "Mark all read") {
		t.Errorf("the newer page does not show the newest unread message, or offer Mark all read")
	}
	const marker = `name="seq" value="`
	i := strings.Index(body, marker)
	if i < 0 {
		t.Fatalf("no Mark all read form")
	}
	seq := body[i+len(marker):]
	seq = seq[:strings.IndexByte(seq, '"')]
	resp := post(t, hc, srv.URL+"/ui/inbox/read", "", url.Values{"csrf": {csrf}, "recipient": {"agent-a"}, "reader": {"r1"}, "seq": {seq}})
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("mark read: %d", resp.StatusCode)
	}
	page, err := eng.Messages(t.Context(), vigil.MessagesRequest{Recipient: "agent-a", Reader: "r1", Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	if n := len(page.Messages); n != 0 {
		t.Errorf("after Mark all read, %d messages are still unread for the reader", n)
	}
}

// TestDaemonCookieSecureBehindTLSProxy: the same through a real
// daemon configured for a TLS proxy (public_url https): the sign-in posted
// from https://vigil.example.com passes the daemon's Origin check, and
// the cookie comes back without Secure.
func TestDaemonCookieSecureBehindTLSProxy(t *testing.T) {
	cfg := daemon.DefaultConfig()
	cfg.Listen = "127.0.0.1:0"
	cfg.DataDir = filepath.Join(t.TempDir(), "vigil")
	cfg.Delivery.PublicURL = "https://vigil.example.com"
	d, err := daemon.New(t.Context(), cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- d.Run(ctx) }()
	<-d.Primed()
	defer func() { cancel(); <-errc }()
	for _, host := range []string{"vigil.example.com", ""} { // a proxy forwarding its Host, and nginx's default (the upstream's)
		req, _ := http.NewRequest(http.MethodPost, d.URL()+"/ui/signin", strings.NewReader(url.Values{"token": {d.Token()}}.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Origin", "https://vigil.example.com")
		if host != "" {
			req.Host = host
		}
		resp, err := (&http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusSeeOther {
			t.Fatalf("Host %q: sign-in %d", host, resp.StatusCode)
		}
		for _, c := range resp.Cookies() {
			if c.Name == web.CookieName && !c.Secure {
				t.Errorf("Host %q: the session cookie of an https sign-in is not Secure: %s", host, resp.Header.Get("Set-Cookie"))
			}
		}
	}
}
