package httpwatch_test

import (
	"bytes"
	"compress/gzip"
	"compress/zlib"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vigil-run/vigil"
	httpwatch "github.com/vigil-run/vigil/watcher/http"
)

// edgeServer serves the bodies of the edge cases: a big integer, bodies
// compressed as the request asks, a byte order mark, redirects.
func edgeServer(t *testing.T) *httptest.Server {
	t.Helper()
	mux := http.NewServeMux()
	mux.HandleFunc("/bigid", func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, `{"id":12345678901234567891}`)
	})
	mux.HandleFunc("/encoded/{enc}", func(w http.ResponseWriter, r *http.Request) {
		const body = `{"state":"done"}`
		enc := r.PathValue("enc")
		if !strings.Contains(r.Header.Get("Accept-Encoding"), enc) {
			io.WriteString(w, body)
			return
		}
		var buf bytes.Buffer
		switch enc {
		case "gzip":
			zw := gzip.NewWriter(&buf)
			io.WriteString(zw, body)
			zw.Close()
		case "deflate":
			zw := zlib.NewWriter(&buf)
			io.WriteString(zw, body)
			zw.Close()
		default:
			buf.WriteString("\x8b\x07\x80" + body) // not what vigil can read
		}
		w.Header().Set("Content-Encoding", enc)
		w.Write(buf.Bytes())
	})
	mux.HandleFunc("/empty-gzip", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Encoding", "gzip")
	})
	mux.HandleFunc("/bom", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json; charset=utf-8")
		io.WriteString(w, "\ufeff"+`{"state":"done"}`)
	})
	mux.HandleFunc("/moved", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/bigid", http.StatusMovedPermanently)
	})
	mux.HandleFunc("/to-metadata", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "http://169.254.169.254/latest/meta-data/", http.StatusFound)
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv
}

// TestBigIntegerInBody: an http watch compares an id beyond 2^53 exactly.
func TestBigIntegerInBody(t *testing.T) {
	t.Parallel()
	srv := edgeServer(t)
	w := httpwatch.New(httpwatch.Config{})
	for done, want := range map[string]vigil.Verdict{
		`{"path":"id","equals":12345678901234567890}`:     vigil.VerdictPending,
		`{"path":"id","not_equals":12345678901234567890}`: vigil.VerdictSatisfied,
		`{"path":"id","equals":12345678901234567891}`:     vigil.VerdictSatisfied,
		`{"path":"id","gt":12345678901234567890}`:         vigil.VerdictSatisfied,
	} {
		pred := canon(t, w, `{"url":"`+srv.URL+`/bigid","done":`+done+`}`)
		if got := probe(t, w, pred); got.Verdict != want {
			t.Errorf("Probe(done %s) = %+v, want %s", done, got, want)
		}
	}
}

// TestRedirectStatuses: while redirects are followed a 301, 302, 303,
// 307, 308 or "3xx" can never be seen, so registration refuses them and
// names follow_redirects; with follow_redirects false the first answer is
// judged, and no redirect is followed.
func TestRedirectStatuses(t *testing.T) {
	t.Parallel()
	srv := edgeServer(t)
	w := httpwatch.New(httpwatch.Config{})
	for _, status := range []string{`301`, `"3xx"`, `[200, 308]`, `"302"`, `[307]`, `303`} {
		in := `{"url":"` + srv.URL + `/moved","status":` + status + `}`
		_, err := w.Canonicalize(context.Background(), json.RawMessage(in), time.Time{})
		if vigil.ErrorCode(err) != vigil.CodeInvalidPredicate || !strings.HasPrefix(vigil.ErrorField(err), "predicate.status") ||
			!strings.Contains(vigil.ErrorMessage(err), "follow_redirects") {
			t.Errorf("Canonicalize(status %s) = %v (field %q), want invalid_predicate on status naming follow_redirects", status, err, vigil.ErrorField(err))
		}
	}
	for _, status := range []string{`304`, `300`, `[200, 305]`} {
		canon(t, w, `{"url":"`+srv.URL+`/moved","status":`+status+`}`)
	}

	pred := canon(t, w, `{"url":"`+srv.URL+`/moved","status":301,"follow_redirects":false}`)
	if !strings.Contains(string(pred), `"follow_redirects":false`) {
		t.Errorf("canonical %s, want follow_redirects false kept", pred)
	}
	if got := probe(t, w, pred); got.Verdict != vigil.VerdictSatisfied || got.Summary != "HTTP 301" {
		t.Errorf("Probe(301, not followed) = %+v, want satisfied by HTTP 301", got)
	}
	pred = canon(t, w, `{"url":"`+srv.URL+`/moved","status":"3xx","follow_redirects":false}`)
	if got := probe(t, w, pred); got.Verdict != vigil.VerdictSatisfied {
		t.Errorf("Probe(3xx, not followed) = %+v, want satisfied", got)
	}
	pred = canon(t, w, `{"url":"`+srv.URL+`/to-metadata","status":302,"follow_redirects":false}`)
	if got := probe(t, w, pred); got.Verdict != vigil.VerdictSatisfied {
		t.Errorf("Probe(a redirect to a refused address, not followed) = %+v, want satisfied by the 302 itself", got)
	}
	pred = canon(t, w, `{"url":"`+srv.URL+`/moved","follow_redirects":false}`)
	if got := probe(t, w, pred); got.Verdict != vigil.VerdictPending || got.Summary != "HTTP 301, not an accepted status" {
		t.Errorf("Probe(2xx wanted, 301 not followed) = %+v, want pending on the 301", got)
	}
	if got := canon(t, w, `{"url":"`+srv.URL+`/moved","follow_redirects":true}`); strings.Contains(string(got), "follow_redirects") {
		t.Errorf("canonical %s, want the default (true) left out", got)
	}
}

// TestUserAcceptEncoding: with Accept-Encoding set by the predicate the
// transport leaves the body as the server sent it; the watcher decodes
// what the server says it sent (gzip, deflate), and says so when it
// cannot.
func TestUserAcceptEncoding(t *testing.T) {
	t.Parallel()
	srv := edgeServer(t)
	w := httpwatch.New(httpwatch.Config{})
	for _, enc := range []string{"gzip", "deflate"} {
		pred := canon(t, w, `{"url":"`+srv.URL+`/encoded/`+enc+`","headers":{"Accept-Encoding":"`+enc+`"},"done":{"path":"state","equals":"done"}}`)
		if got := probe(t, w, pred); got.Verdict != vigil.VerdictSatisfied {
			t.Errorf("Probe(Accept-Encoding %s) = %+v, want the decoded body to match", enc, got)
		}
	}
	pred := canon(t, w, `{"url":"`+srv.URL+`/empty-gzip","headers":{"Accept-Encoding":"gzip"},"done":{"path":"state","equals":"done"}}`)
	if got := probe(t, w, pred); got.Verdict != vigil.VerdictPending || got.Summary != "HTTP 200; the body is not JSON" {
		t.Errorf("Probe(an empty body labelled gzip) = %+v, want pending: an empty body is not JSON", got)
	}
	pred = canon(t, w, `{"url":"`+srv.URL+`/encoded/br","headers":{"Accept-Encoding":"br"},"done":{"path":"state","equals":"done"}}`)
	got := probe(t, w, pred)
	if got.Verdict != vigil.VerdictUnavailable || !strings.Contains(got.Reason, "br") || !strings.Contains(got.Reason, "Accept-Encoding") {
		t.Errorf("Probe(Accept-Encoding br) = %+v, want unavailable naming the encoding and the header", got)
	}
}

// TestByteOrderMarkBody: a UTF-8 byte order mark before the JSON is not
// "not JSON".
func TestByteOrderMarkBody(t *testing.T) {
	t.Parallel()
	srv := edgeServer(t)
	w := httpwatch.New(httpwatch.Config{})
	pred := canon(t, w, `{"url":"`+srv.URL+`/bom","done":{"path":"state","equals":"done"}}`)
	if got := probe(t, w, pred); got.Verdict != vigil.VerdictSatisfied {
		t.Errorf("Probe(BOM + JSON) = %+v, want satisfied", got)
	}
}

// TestRedirectToAnotherHostDropsHeaders: a redirect to another host name
// gets none of the headers the predicate set (nor a Referer, which would
// carry the URL and its query); a redirect on the same host keeps them.
func TestRedirectToAnotherHostDropsHeaders(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	seen := map[string]http.Header{}
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/hop-1" {
			// A second hop, on the redirect's host: still none of the headers.
			http.Redirect(w, r, "/hop-2", http.StatusFound)
			return
		}
		mu.Lock()
		seen[r.URL.Path] = r.Header.Clone()
		mu.Unlock()
		io.WriteString(w, `{"ok":true}`)
	}))
	t.Cleanup(target.Close)
	tu, _ := url.Parse(target.URL)
	other := "http://localhost:" + tu.Port() // the same server under another host name
	origin := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/away":
			http.Redirect(w, r, other+"/away", http.StatusFound)
		case "/hop":
			http.Redirect(w, r, other+"/hop-1", http.StatusFound)
		}
	}))
	t.Cleanup(origin.Close)
	bounce := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, target.URL+"/same", http.StatusFound)
	}))
	t.Cleanup(bounce.Close)

	w := httpwatch.New(httpwatch.Config{})
	headers := `"headers":{"X-Api-Key":"sekrit","Authorization":"Bearer t","Cookie":"c=1","X-Trace":"1"}`
	for _, path := range []string{"/away?key=q", "/hop"} {
		pred := canon(t, w, `{"url":"`+origin.URL+path+`",`+headers+`,"done":{"path":"ok"}}`)
		if got := probe(t, w, pred); got.Verdict != vigil.VerdictSatisfied {
			t.Fatalf("Probe(%s) = %+v, want satisfied at the redirect's target", path, got)
		}
	}
	// The same host name (another port): the headers go along.
	pred := canon(t, w, `{"url":"`+bounce.URL+`/",`+headers+`,"done":{"path":"ok"}}`)
	if got := probe(t, w, pred); got.Verdict != vigil.VerdictSatisfied {
		t.Fatalf("Probe(same host) = %+v, want satisfied", got)
	}
	mu.Lock()
	defer mu.Unlock()
	for _, path := range []string{"/away", "/hop-2"} {
		h := seen[path]
		if h == nil {
			t.Fatalf("the target never saw %s", path)
		}
		for _, name := range []string{"X-Api-Key", "Authorization", "Cookie", "X-Trace", "Referer"} {
			if v := h.Get(name); v != "" {
				t.Errorf("a redirect to another host (%s) carried %s: %q", path, name, v)
			}
		}
		if h.Get("User-Agent") == "" {
			t.Errorf("the redirect to %s carried no User-Agent", path)
		}
	}
	if h := seen["/same"]; h == nil || h.Get("X-Api-Key") != "sekrit" || h.Get("X-Trace") != "1" {
		t.Errorf("a redirect on the same host name got headers %v, want the predicate's", h)
	}
}

// TestRedirectToAnotherHostKeepsTheBody: a 307 or 308 to another host name
// would send the predicate's body there again (it may hold a key, as a
// header may): it is not followed, and the probe says why. One on the same
// host name is followed with the body; a 302 to another host (the body
// dropped, the method GET) is followed too.
func TestRedirectToAnotherHostKeepsTheBody(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	bodies := map[string]string{}
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		bodies[r.URL.Path] = string(b)
		mu.Unlock()
		io.WriteString(w, `{"ok":true}`)
	}))
	t.Cleanup(target.Close)
	tu, _ := url.Parse(target.URL)
	other := "http://localhost:" + tu.Port() // the same server under another host name
	origin := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/307":
			http.Redirect(w, r, other+"/307", http.StatusTemporaryRedirect)
		case "/308":
			http.Redirect(w, r, other+"/308", http.StatusPermanentRedirect)
		case "/302":
			http.Redirect(w, r, other+"/302", http.StatusFound)
		case "/same":
			http.Redirect(w, r, target.URL+"/same", http.StatusTemporaryRedirect)
		}
	}))
	t.Cleanup(origin.Close)
	w := httpwatch.New(httpwatch.Config{})
	pred := func(u string) json.RawMessage {
		return canon(t, w, `{"url":"`+u+`","method":"POST","body":"secret=s3cret","done":{"path":"ok"}}`)
	}
	for _, path := range []string{"/307", "/308"} {
		got := probe(t, w, pred(origin.URL+path))
		if got.Verdict != vigil.VerdictUnavailable || !strings.Contains(got.Reason, "not followed") {
			t.Errorf("Probe(%s to another host, with a body) = %+v, want unavailable saying it was not followed", path, got)
		}
	}
	// The other host name (same server), and the 302 it may follow:
	// the body is sent to the first only.
	if got := probe(t, w, pred(origin.URL+"/302")); got.Verdict != vigil.VerdictSatisfied {
		t.Errorf("Probe(302 to another host) = %+v, want satisfied", got)
	}
	if got := probe(t, w, pred(origin.URL+"/same")); got.Verdict != vigil.VerdictSatisfied {
		t.Errorf("Probe(307 on the same host name) = %+v, want satisfied", got)
	}
	mu.Lock()
	defer mu.Unlock()
	for _, path := range []string{"/307", "/308"} {
		if b, ok := bodies[path]; ok {
			t.Errorf("the other host got %s with body %q", path, b)
		}
	}
	if b := bodies["/302"]; b != "" {
		t.Errorf("the 302's target got body %q, want none", b)
	}
	if b := bodies["/same"]; b != "secret=s3cret" {
		t.Errorf("a 307 on the same host name carried body %q, want the predicate's", b)
	}
}
