package httpapi_test

import (
	"bytes"
	"context"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/vigil-run/vigil"
	"github.com/vigil-run/vigil/httpapi"
)

const unsubscribeSig = "c2lnbmF0dXJlLXNpZ25hdHVyZS1zaWduYXR1cmUtMTIz"

// TestUnsubscribe: the one-click unsubscribe route needs no bearer token:
// a mail provider's POST (List-Unsubscribe=One-Click, form-encoded) turns
// email off; a GET only shows a page with a button that does (link
// scanners follow GETs); a link the daemon did not sign is not found; the
// signature never reaches a log.
func TestUnsubscribe(t *testing.T) {
	t.Parallel()
	var (
		mu    sync.Mutex
		calls []string
		logs  bytes.Buffer
	)
	e := newEnv(t, func(o *httpapi.Options) {
		o.Logger = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
		o.UnsubscribeFunc = func(_ context.Context, id, sig string, apply bool) error {
			mu.Lock()
			defer mu.Unlock()
			if sig != unsubscribeSig {
				return vigil.Errorf(vigil.CodeNotFound, "this unsubscribe link is not valid")
			}
			if apply {
				calls = append(calls, id)
			}
			return nil
		}
	})
	path := "/v1/unsubscribe/01WATCH/" + unsubscribeSig
	noAuth := map[string]string{"Authorization": ""}
	form := map[string]string{"Authorization": "", "Content-Type": "application/x-www-form-urlencoded"}

	resp, b := e.do(t, request{method: "GET", path: path, header: noAuth})
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") ||
		!strings.Contains(string(b), `method="post"`) || !strings.Contains(string(b), "01WATCH") {
		t.Errorf("GET = %d %q %s; want a page with a form that posts", resp.StatusCode, resp.Header.Get("Content-Type"), b)
	}
	if csp := resp.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "frame-ancestors 'none'") || resp.Header.Get("X-Frame-Options") != "DENY" {
		t.Errorf("GET: Content-Security-Policy %q, X-Frame-Options %q; want the page never framed (its button turns mail off)", csp, resp.Header.Get("X-Frame-Options"))
	}
	if len(calls) != 0 {
		t.Fatalf("a GET turned email off: %v", calls)
	}
	resp, b = e.do(t, request{method: "POST", path: path, body: "List-Unsubscribe=One-Click", header: form})
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(b), "off") {
		t.Errorf("one-click POST = %d %s; want 200 saying email is off", resp.StatusCode, b)
	}
	if len(calls) != 1 || calls[0] != "01WATCH" {
		t.Errorf("the POST applied %v; want 01WATCH once", calls)
	}
	for _, m := range []string{"GET", "POST"} {
		resp, b = e.do(t, request{method: m, path: "/v1/unsubscribe/01WATCH/forged", header: form, body: "List-Unsubscribe=One-Click"})
		if resp.StatusCode != http.StatusNotFound {
			t.Errorf("%s a forged link = %d %s, want 404", m, resp.StatusCode, b)
		}
	}
	resp, b = e.do(t, request{method: "POST", path: path, body: strings.Repeat("x", 5000), header: form})
	if resp.StatusCode != http.StatusRequestEntityTooLarge {
		t.Errorf("a 5 kB form = %d %s, want 413", resp.StatusCode, b)
	}
	if out := logs.String(); strings.Contains(out, unsubscribeSig) || !strings.Contains(out, "/v1/unsubscribe/{id}/{sig}") {
		t.Errorf("the log holds the signature, or no unsubscribe line:\n%s", out)
	}
}
