package web_test

import (
	"context"
	"io"
	"net/http"
	"net/url"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vigil-run/vigil"
	"github.com/vigil-run/vigil/httpapi"
	"github.com/vigil-run/vigil/web"
)

// get fetches a panel page with a session's client.
func get(t *testing.T, hc *http.Client, u string) (*http.Response, string) {
	t.Helper()
	resp, err := hc.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp, string(b)
}

// post sends a form as a browser on origin would.
func post(t *testing.T, hc *http.Client, u, origin string, form url.Values) *http.Response {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, u, strings.NewReader(form.Encode()))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if origin != "" {
		req.Header.Set("Origin", origin)
	}
	hc.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	defer func() { hc.CheckRedirect = nil }()
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp
}

// TestPanelRefusesCrossSitePosts: a state-changing request from another
// origin, or without the session's CSRF token, changes nothing; the same
// request from the panel itself goes through.
func TestPanelRefusesCrossSitePosts(t *testing.T) {
	e := startDaemon(t)
	w := mustRegisterPending(t, e)
	base := e.d.URL()
	hc, csrf := session(t, base, e.d.Token())
	cancelURL := base + "/ui/watches/" + w.ID + "/cancel"
	for _, tc := range []struct {
		name, origin string
		form         url.Values
	}{
		{"another origin", "http://evil.example", url.Values{"csrf": {csrf}}},
		{"another port", "http://127.0.0.1:1", url.Values{"csrf": {csrf}}},
		{"no CSRF token", base, nil},
		{"a wrong CSRF token", base, url.Values{"csrf": {strings.Repeat("0", 64)}}},
	} {
		resp := post(t, hc, cancelURL, tc.origin, tc.form)
		if resp.StatusCode != http.StatusForbidden {
			t.Errorf("%s: status %d, want 403", tc.name, resp.StatusCode)
		}
		if got, _ := e.c.Watch(t.Context(), w.ID); got.State != vigil.StatePending {
			t.Fatalf("%s: the watch is %s, want still pending", tc.name, got.State)
		}
	}
	if resp := post(t, hc, cancelURL, base, url.Values{"csrf": {csrf}}); resp.StatusCode != http.StatusSeeOther {
		t.Errorf("the panel's own cancel: status %d, want 303", resp.StatusCode)
	}
	if got, _ := e.c.Watch(t.Context(), w.ID); got.State != vigil.StateCancelled {
		t.Errorf("after the panel's own cancel the watch is %s", got.State)
	}
	// Signing out needs the token too.
	if resp := post(t, hc, base+"/ui/signout", "http://evil.example", url.Values{"csrf": {csrf}}); resp.StatusCode != http.StatusForbidden {
		t.Errorf("a cross-site sign-out: status %d, want 403", resp.StatusCode)
	}
}

// TestPanelTokenNowhere: the sign-in token never comes back: not in a
// page, not in the cookie; every page carries the strict CSP and refuses
// framing; the cookie is HttpOnly and SameSite=Strict.
func TestPanelTokenNowhere(t *testing.T) {
	e := startDaemon(t)
	w := mustRegisterPending(t, e)
	base := e.d.URL()
	noFollow := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := noFollow.PostForm(base+"/ui/signin", url.Values{"token": {e.d.Token()}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	var cookie *http.Cookie
	for _, c := range resp.Cookies() {
		if c.Name == web.CookieName {
			cookie = c
		}
	}
	if cookie == nil || !cookie.HttpOnly || cookie.SameSite != http.SameSiteStrictMode || cookie.Value == e.d.Token() || len(cookie.Value) != 64 {
		t.Fatalf("session cookie = %+v; want HttpOnly, SameSite=Strict, a random id", cookie)
	}
	hc, _ := session(t, base, e.d.Token())
	for _, path := range []string{"/", "/ui/watches/" + w.ID, "/ui/inbox?recipient=agent-a", "/ui/admin", "/ui/unread", "/?q=x"} {
		resp, body := get(t, hc, base+path)
		if resp.StatusCode != http.StatusOK {
			t.Errorf("GET %s: %d", path, resp.StatusCode)
		}
		if strings.Contains(body, e.d.Token()) {
			t.Errorf("GET %s: the page holds the token", path)
		}
		if got := resp.Header.Get("Content-Security-Policy"); got != web.CSP || !strings.Contains(got, "frame-ancestors 'none'") {
			t.Errorf("GET %s: CSP %q", path, got)
		}
		if resp.Header.Get("X-Frame-Options") != "DENY" {
			t.Errorf("GET %s: no X-Frame-Options DENY", path)
		}
		if strings.Contains(body, "<script>") || strings.Contains(body, " style=") || strings.Contains(body, " onclick=") {
			t.Errorf("GET %s: inline script or style in the page", path)
		}
	}
	if strings.Contains(e.logs.String(), e.d.Token()) {
		t.Errorf("the token is in the daemon's log")
	}
}

// TestPanelScopedSession: a scoped token's session sees its recipients'
// watches only (another's is 404, in the list it is absent), no admin
// page; once the token is revoked the session ends.
func TestPanelScopedSession(t *testing.T) {
	e := startDaemon(t)
	mine := mustRegisterPending(t, e)
	theirs := register(t, e.c, vigil.RegisterRequest{Kind: vigil.KindFile, Recipient: "agent-b", Every: "1h", Deadline: "2h",
		Predicate: mustJSON(map[string]any{"path": filepath.Join(e.root, "b.txt")})})
	tok, err := e.c.CreateToken(t.Context(), vigil.TokenCreateRequest{Recipients: []string{"agent-a"}})
	if err != nil {
		t.Fatal(err)
	}
	base := e.d.URL()
	hc, _ := session(t, base, tok.Secret)
	if resp, _ := get(t, hc, base+"/ui/watches/"+mine.ID); resp.StatusCode != http.StatusOK {
		t.Errorf("own watch: %d, want 200", resp.StatusCode)
	}
	for _, path := range []string{"/ui/watches/" + theirs.ID, "/ui/admin", "/ui/inbox?recipient=agent-b"} {
		if resp, _ := get(t, hc, base+path); resp.StatusCode != http.StatusNotFound {
			t.Errorf("GET %s with a scoped session: %d, want 404", path, resp.StatusCode)
		}
	}
	_, body := get(t, hc, base+"/")
	if !strings.Contains(body, "w-"+mine.ID) || strings.Contains(body, "w-"+theirs.ID) {
		t.Errorf("the scoped list shows its own watch: %v, another's: %v; want only its own",
			strings.Contains(body, "w-"+mine.ID), strings.Contains(body, "w-"+theirs.ID))
	}
	if resp, _ := get(t, hc, base+"/?recipient=agent-b"); resp.StatusCode != http.StatusNotFound {
		t.Errorf("filtering on another recipient: %d, want 404", resp.StatusCode)
	}

	// The event stream of the session ends once the token is revoked
	// (within the recheck interval).
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, base+"/ui/events", nil)
	stream, err := hc.Do(req)
	if err != nil || stream.StatusCode != http.StatusOK {
		t.Fatalf("event stream: %v %v", stream, err)
	}
	defer stream.Body.Close()
	if _, err := e.c.RevokeToken(t.Context(), tok.ID); err != nil {
		t.Fatal(err)
	}
	ended := make(chan error, 1)
	go func() { _, err := io.Copy(io.Discard, stream.Body); ended <- err }()
	ctx, cancel := context.WithTimeout(t.Context(), 20*httpapiRecheck)
	defer cancel()
	select {
	case <-ended:
	case <-ctx.Done():
		t.Fatalf("the event stream of a revoked token's session is still open")
	}
	if resp, body := get(t, hc, base+"/ui/watches/"+mine.ID); resp.StatusCode != http.StatusOK || !strings.Contains(body, `id="token"`) {
		t.Errorf("after revocation the session still opens pages (%d)", resp.StatusCode)
	}
}

// httpapiRecheck is the recheck interval the daemon's panel uses.
const httpapiRecheck = httpapi.DefaultRecheck

// TestPanelAdminTokens: the admin creates a scoped token (its plaintext
// shown once, in that answer only), sees it listed, revokes it; the status
// section shows the daemon's figures.
func TestPanelAdminTokens(t *testing.T) {
	e := startDaemon(t)
	base := e.d.URL()
	hc, csrf := session(t, base, e.d.Token())
	req, _ := http.NewRequest(http.MethodPost, base+"/ui/admin/tokens", strings.NewReader(url.Values{"csrf": {csrf}, "recipients": {"agent-x, agent-y"}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", base)
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	body := string(b)
	i := strings.Index(body, `<pre id="new-token">`)
	if resp.StatusCode != http.StatusOK || i < 0 {
		t.Fatalf("create token: %d, no plaintext shown", resp.StatusCode)
	}
	secret := body[i+len(`<pre id="new-token">`):]
	secret = secret[:strings.Index(secret, "<")]
	if !strings.HasPrefix(secret, vigil.TokenPrefix) {
		t.Fatalf("the token shown is %q", secret)
	}
	// It works, and is never shown again.
	if _, err := e.c.Tokens(t.Context(), false); err != nil {
		t.Fatal(err)
	}
	_, page := get(t, hc, base+"/ui/admin")
	if strings.Contains(page, secret) || !strings.Contains(page, "[agent-x agent-y]") {
		t.Errorf("the admin page shows the plaintext again (%v) or not the token (%v)", strings.Contains(page, secret), !strings.Contains(page, "[agent-x agent-y]"))
	}
	for _, want := range []string{"Uptime", "sqlite", "Probe lateness"} {
		if !strings.Contains(page, want) {
			t.Errorf("the status section lacks %q", want)
		}
	}
	ts, err := e.c.Tokens(t.Context(), false)
	if err != nil || len(ts) != 1 {
		t.Fatalf("tokens: %v %v", ts, err)
	}
	scoped, _ := session(t, base, secret)
	if resp, _ := get(t, scoped, base+"/"); resp.StatusCode != http.StatusOK {
		t.Errorf("the new token's session: %d", resp.StatusCode)
	}
	if resp := post(t, hc, base+"/ui/admin/tokens/"+ts[0].ID+"/revoke", base, url.Values{"csrf": {csrf}}); resp.StatusCode != http.StatusSeeOther {
		t.Errorf("revoke: %d", resp.StatusCode)
	}
	if ts, _ := e.c.Tokens(t.Context(), false); len(ts) != 0 {
		t.Errorf("after revoking, %d tokens are still valid", len(ts))
	}
}

// TestPanelDetailRedactsAndShowsMessages: a watch's detail page shows its
// predicate with the secrets redacted (a header and a query token) and the
// mailbox messages of this watch only.
func TestPanelDetailRedactsAndShowsMessages(t *testing.T) {
	e := startDaemon(t)
	const secret, query = "s3cret-header-value", "q5ecret-query-value"
	w := register(t, e.c, vigil.RegisterRequest{Kind: vigil.KindHTTP, Recipient: "agent-d", Every: "1h", Deadline: "2h",
		Predicate: mustJSON(map[string]any{"url": "https://example.invalid/status?access_token=" + query,
			"headers": map[string]string{"Authorization": "Bearer " + secret}, "status": 200})})
	other := register(t, e.c, vigil.RegisterRequest{Kind: vigil.KindFile, Recipient: "agent-d", Every: "1h", Deadline: "2h",
		Predicate: mustJSON(map[string]any{"path": filepath.Join(e.root, "d.txt")})})
	for _, id := range []string{w.ID, other.ID} {
		if _, err := e.c.Cancel(t.Context(), id); err != nil {
			t.Fatal(err)
		}
	}
	hc, _ := session(t, e.d.URL(), e.d.Token())
	resp, body := get(t, hc, e.d.URL()+"/ui/watches/"+w.ID)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("detail: %d", resp.StatusCode)
	}
	for _, s := range []string{secret, query} {
		if strings.Contains(body, s) {
			t.Errorf("the detail page shows the secret %q", s)
		}
	}
	if !strings.Contains(body, vigil.Redacted) || !strings.Contains(body, "example.invalid") {
		t.Errorf("the detail page shows no redacted predicate:\n%s", body)
	}
	// Its own cancel line, not the other watch's.
	i := strings.Index(body, `id="msg-h"`)
	if i < 0 {
		t.Fatalf("the detail page has no mailbox section")
	}
	msgs := body[i:]
	if n := strings.Count(msgs, `<span class="mtype">cancelled</span>`); n != 1 {
		t.Errorf("the mailbox section shows %d cancel lines, want this watch's one:\n%s", n, msgs)
	}
}
