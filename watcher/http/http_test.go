package httpwatch_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/vigil-run/vigil"
	"github.com/vigil-run/vigil/watcher"
	httpwatch "github.com/vigil-run/vigil/watcher/http"
)

const readyBody = `{"status":{"phase":"Ready","replicas":3,"ratio":0.5,"ok":true,"off":false},"labels":["blue","green"],"message":"deploy 42 finished"}`

func server(t *testing.T) *httptest.Server {
	t.Helper()
	mux := http.NewServeMux()
	mux.HandleFunc("/ready", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, readyBody)
	})
	mux.HandleFunc("/code/{n}", func(w http.ResponseWriter, r *http.Request) {
		n, _ := strconv.Atoi(r.PathValue("n"))
		if ra := r.URL.Query().Get("retry_after"); ra != "" {
			w.Header().Set("Retry-After", ra)
		}
		w.WriteHeader(n)
		io.WriteString(w, readyBody)
	})
	mux.HandleFunc("/html", func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "<html>Ready</html>")
	})
	mux.HandleFunc("/big", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, `{"pad":%q}`, strings.Repeat("x", 4096))
	})
	mux.HandleFunc("/redirect/{n}", func(w http.ResponseWriter, r *http.Request) {
		n, _ := strconv.Atoi(r.PathValue("n"))
		if n == 0 {
			io.WriteString(w, readyBody)
			return
		}
		http.Redirect(w, r, fmt.Sprintf("/redirect/%d", n-1), http.StatusFound)
	})
	mux.HandleFunc("/to-metadata", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "http://169.254.169.254/latest/meta-data/", http.StatusFound)
	})
	mux.HandleFunc("/echo", func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		json.NewEncoder(w).Encode(map[string]string{
			"method": r.Method, "header": r.Header.Get("X-Test"), "body": string(body), "agent": r.UserAgent(),
		})
	})
	mux.HandleFunc("/slow", func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-time.After(5 * time.Second):
		}
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv
}

func canon(t *testing.T, w *httpwatch.Watcher, in string) json.RawMessage {
	t.Helper()
	c, err := w.Canonicalize(context.Background(), json.RawMessage(in), time.Time{})
	if err != nil {
		t.Fatalf("Canonicalize(%s) = %v", in, err)
	}
	return c.Predicate
}

func probe(t *testing.T, w *httpwatch.Watcher, pred json.RawMessage) vigil.Observation {
	t.Helper()
	obs, err := watcher.Run(context.Background(), w, watcher.Probe{WatchID: "w", Kind: vigil.KindHTTP, Predicate: pred})
	if err != nil {
		t.Fatalf("Run = %v", err)
	}
	obs.At = time.Time{}
	return obs
}

func TestOperators(t *testing.T) {
	t.Parallel()
	srv := server(t)
	w := httpwatch.New(httpwatch.Config{})
	tests := []struct {
		done string
		want vigil.Verdict
	}{
		{`{"path":"status.phase","equals":"Ready"}`, vigil.VerdictSatisfied},
		{`{"path":"status.phase","equals":"Failed"}`, vigil.VerdictPending},
		{`{"path":"status.phase","not_equals":"Failed"}`, vigil.VerdictSatisfied},
		{`{"path":"status.phase","not_equals":"Ready"}`, vigil.VerdictPending},
		{`{"path":"message","contains":"finished"}`, vigil.VerdictSatisfied},
		{`{"path":"message","contains":"failed"}`, vigil.VerdictPending},
		{`{"path":"labels","contains":"green"}`, vigil.VerdictSatisfied},
		{`{"path":"message","matches":"deploy \\d+"}`, vigil.VerdictSatisfied},
		{`{"path":"message","matches":"^\\d"}`, vigil.VerdictPending},
		{`{"path":"status.phase","exists":true}`, vigil.VerdictSatisfied},
		{`{"path":"status.nope","exists":true}`, vigil.VerdictPending},
		{`{"path":"status.nope","exists":false}`, vigil.VerdictSatisfied},
		{`{"path":"status.phase","exists":false}`, vigil.VerdictPending},
		{`{"path":"status.ok","truthy":true}`, vigil.VerdictSatisfied},
		{`{"path":"status.off","truthy":true}`, vigil.VerdictPending},
		{`{"path":"status.off","truthy":false}`, vigil.VerdictSatisfied},
		{`{"path":"status.nope","truthy":false}`, vigil.VerdictPending},
		{`{"path":"status.replicas","gt":2}`, vigil.VerdictSatisfied},
		{`{"path":"status.replicas","gt":3}`, vigil.VerdictPending},
		{`{"path":"status.replicas","gte":3}`, vigil.VerdictSatisfied},
		{`{"path":"status.replicas","gte":4}`, vigil.VerdictPending},
		{`{"path":"status.ratio","lt":1}`, vigil.VerdictSatisfied},
		{`{"path":"status.ratio","lt":0.5}`, vigil.VerdictPending},
		{`{"path":"status.ratio","lte":0.5}`, vigil.VerdictSatisfied},
		{`{"path":"status.ratio","lte":0.1}`, vigil.VerdictPending},
		{`{"path":"status.nope","equals":"Ready"}`, vigil.VerdictPending},
		{`{"path":"status.nope","gt":0}`, vigil.VerdictPending},
		{`[{"path":"status.phase","equals":"Ready"},{"path":"status.replicas","gte":3}]`, vigil.VerdictSatisfied},
		{`[{"path":"status.phase","equals":"Ready"},{"path":"status.replicas","gte":4}]`, vigil.VerdictPending},
	}
	for _, tt := range tests {
		t.Run(tt.done, func(t *testing.T) {
			t.Parallel()
			pred := canon(t, w, `{"url":"`+srv.URL+`/ready","done":`+tt.done+`}`)
			if got := probe(t, w, pred); got.Verdict != tt.want {
				t.Errorf("Probe(done %s) = %+v, want %s", tt.done, got, tt.want)
			}
		})
	}
}

func TestProbe(t *testing.T) {
	t.Parallel()
	srv := server(t)
	host := strings.TrimPrefix(srv.URL, "http://")
	w := httpwatch.New(httpwatch.Config{})
	tests := []struct {
		name string
		pred string
		want vigil.Observation
	}{
		{"no done: status alone", `{"url":"` + srv.URL + `/ready"}`,
			vigil.Observation{Verdict: vigil.VerdictSatisfied, Summary: "HTTP 200", Facts: map[string]any{"status": 200}}},
		{"done matches, with facts", `{"url":"` + srv.URL + `/ready","done":{"path":"status.phase","equals":"Ready"}}`,
			vigil.Observation{Verdict: vigil.VerdictSatisfied, Summary: `HTTP 200; status.phase = "Ready"`, Facts: map[string]any{
				"status": 200,
				"done":   []any{map[string]any{"path": "status.phase", "found": true, "matched": true, "value": `"Ready"`}},
			}}},
		{"missing path is pending", `{"url":"` + srv.URL + `/ready","done":{"path":"status.gone","equals":"Ready"}}`,
			vigil.Observation{Verdict: vigil.VerdictPending, Summary: `HTTP 200; status.gone missing`, Facts: map[string]any{
				"status": 200,
				"done":   []any{map[string]any{"path": "status.gone", "found": false, "matched": false}},
			}}},
		{"fail wins over done", `{"url":"` + srv.URL + `/ready","done":{"path":"status.phase","equals":"Ready"},"fail":{"path":"status.replicas","gte":3}}`,
			vigil.Observation{Verdict: vigil.VerdictFailed, Summary: `HTTP 200; status.replicas = 3`, Facts: map[string]any{
				"status": 200,
				"done":   []any{map[string]any{"path": "status.phase", "found": true, "matched": true, "value": `"Ready"`}},
				"fail":   []any{map[string]any{"path": "status.replicas", "found": true, "matched": true, "value": `3`}},
			}}},
		{"fail not matching leaves done", `{"url":"` + srv.URL + `/ready","done":{"path":"status.phase","equals":"Ready"},"fail":{"path":"status.phase","equals":"Failed"}}`,
			vigil.Observation{Verdict: vigil.VerdictSatisfied, Summary: `HTTP 200; status.phase = "Ready"`, Facts: map[string]any{
				"status": 200,
				"done":   []any{map[string]any{"path": "status.phase", "found": true, "matched": true, "value": `"Ready"`}},
				"fail":   []any{map[string]any{"path": "status.phase", "found": true, "matched": false, "value": `"Ready"`}},
			}}},
		{"fail alone, matching", `{"url":"` + srv.URL + `/ready","fail":{"path":"status.phase","equals":"Ready"}}`,
			vigil.Observation{Verdict: vigil.VerdictFailed, Summary: `HTTP 200; status.phase = "Ready"`, Facts: map[string]any{
				"status": 200,
				"fail":   []any{map[string]any{"path": "status.phase", "found": true, "matched": true, "value": `"Ready"`}},
			}}},
		{"fail only on an accepted status", `{"url":"` + srv.URL + `/code/404","fail":{"path":"status.phase","equals":"Ready"}}`,
			vigil.Observation{Verdict: vigil.VerdictPending, Summary: "HTTP 404, not an accepted status", Facts: map[string]any{"status": 404}}},
		{"body not JSON", `{"url":"` + srv.URL + `/html","done":{"path":"a","exists":false}}`,
			vigil.Observation{Verdict: vigil.VerdictPending, Summary: "HTTP 200; the body is not JSON", Facts: map[string]any{
				"status": 200, "json": false,
				"done": []any{map[string]any{"path": "a", "found": false, "matched": false}},
			}}},
		{"5xx is unavailable", `{"url":"` + srv.URL + `/code/503"}`,
			vigil.Observation{Verdict: vigil.VerdictUnavailable, Summary: "HTTP 503", Reason: "HTTP 503", Facts: map[string]any{"status": 503}}},
		{"404 is pending", `{"url":"` + srv.URL + `/code/404"}`,
			vigil.Observation{Verdict: vigil.VerdictPending, Summary: "HTTP 404, not an accepted status", Facts: map[string]any{"status": 404}}},
		{"429 is unavailable", `{"url":"` + srv.URL + `/code/429"}`,
			vigil.Observation{Verdict: vigil.VerdictUnavailable, Summary: "HTTP 429, rate limited", Reason: "HTTP 429, rate limited",
				Facts: map[string]any{"status": 429}}},
		{"429 keeps Retry-After", `{"url":"` + srv.URL + `/code/429?retry_after=120"}`,
			vigil.Observation{Verdict: vigil.VerdictUnavailable, Summary: "HTTP 429, rate limited (Retry-After: 120)",
				Reason: "HTTP 429, rate limited (Retry-After: 120)", Facts: map[string]any{"status": 429, "retry_after": "120"}}},
		{"a long Retry-After is clipped", `{"url":"` + srv.URL + `/code/429?retry_after=` + strings.Repeat("9", 100) + `"}`,
			vigil.Observation{Verdict: vigil.VerdictUnavailable, Summary: "HTTP 429, rate limited (Retry-After: " + strings.Repeat("9", 61) + "…)",
				Reason: "HTTP 429, rate limited (Retry-After: " + strings.Repeat("9", 61) + "…)",
				Facts:  map[string]any{"status": 429, "retry_after": strings.Repeat("9", 61) + "…"}}},
		{"408 is unavailable", `{"url":"` + srv.URL + `/code/408"}`,
			vigil.Observation{Verdict: vigil.VerdictUnavailable, Summary: "HTTP 408, the server timed out waiting for the request",
				Reason: "HTTP 408, the server timed out waiting for the request", Facts: map[string]any{"status": 408}}},
		{"accepted 429", `{"url":"` + srv.URL + `/code/429","status":[200,429]}`,
			vigil.Observation{Verdict: vigil.VerdictSatisfied, Summary: "HTTP 429", Facts: map[string]any{"status": 429}}},
		{"201 is in 2xx", `{"url":"` + srv.URL + `/code/201"}`,
			vigil.Observation{Verdict: vigil.VerdictSatisfied, Summary: "HTTP 201", Facts: map[string]any{"status": 201}}},
		{"201 is not 200", `{"url":"` + srv.URL + `/code/201","status":200}`,
			vigil.Observation{Verdict: vigil.VerdictPending, Summary: "HTTP 201, not an accepted status", Facts: map[string]any{"status": 201}}},
		{"accepted code", `{"url":"` + srv.URL + `/code/404","status":[200,404]}`,
			vigil.Observation{Verdict: vigil.VerdictSatisfied, Summary: "HTTP 404", Facts: map[string]any{"status": 404}}},
		{"accepted class", `{"url":"` + srv.URL + `/code/418","status":"4XX"}`,
			vigil.Observation{Verdict: vigil.VerdictSatisfied, Summary: "HTTP 418", Facts: map[string]any{"status": 418}}},
		{"accepted 5xx", `{"url":"` + srv.URL + `/code/500","status":["5xx"]}`,
			vigil.Observation{Verdict: vigil.VerdictSatisfied, Summary: "HTTP 500", Facts: map[string]any{"status": 500}}},
		{"oversize body is unavailable", `{"url":"` + srv.URL + `/big","max_bytes":1024,"done":{"path":"pad","exists":true}}`,
			vigil.Observation{Verdict: vigil.VerdictUnavailable, Summary: "HTTP 200: the body is larger than max_bytes (1024 bytes)",
				Reason: "HTTP 200: the body is larger than max_bytes (1024 bytes)", Facts: map[string]any{"status": 200}}},
		{"body within max_bytes", `{"url":"` + srv.URL + `/big","max_bytes":8192,"done":{"path":"pad","exists":true}}`,
			vigil.Observation{Verdict: vigil.VerdictSatisfied, Summary: "HTTP 200; pad = \"" + strings.Repeat("x", 60) + "…", Facts: map[string]any{
				"status": 200,
				"done":   []any{map[string]any{"path": "pad", "found": true, "matched": true, "value": `"` + strings.Repeat("x", 252) + "…"}},
			}}},
		{"five redirects are followed", `{"url":"` + srv.URL + `/redirect/5"}`,
			vigil.Observation{Verdict: vigil.VerdictSatisfied, Summary: "HTTP 200", Facts: map[string]any{"status": 200}}},
		{"a sixth redirect is not", `{"url":"` + srv.URL + `/redirect/6"}`,
			vigil.Observation{Verdict: vigil.VerdictUnavailable, Reason: "GET " + host + ": stopped after 5 redirects"}},
		{"method, headers and body are sent", `{"url":"` + srv.URL + `/echo","method":"post","headers":{"x-test":"yes"},"body":"hello",
			"done":[{"path":"method","equals":"POST"},{"path":"header","equals":"yes"},{"path":"body","equals":"hello"},{"path":"agent","contains":"vigil"}]}`,
			vigil.Observation{Verdict: vigil.VerdictSatisfied}},
		{"timeout is unavailable", `{"url":"` + srv.URL + `/slow","timeout":"100ms"}`,
			vigil.Observation{Verdict: vigil.VerdictUnavailable, Reason: "GET " + host + ": no response within 100ms"}},
		{"link-local is refused for good", `{"url":"http://169.254.169.254/latest/meta-data/","timeout":"1s"}`,
			vigil.Observation{Verdict: vigil.VerdictUnavailable, Permanent: true,
				Reason: "GET 169.254.169.254: refused to connect to 169.254.169.254: link-local addresses (cloud metadata services) are never probed"}},
		{"a redirect to link-local is refused too", `{"url":"` + srv.URL + `/to-metadata","timeout":"1s"}`,
			vigil.Observation{Verdict: vigil.VerdictUnavailable, Permanent: true,
				Reason: "GET " + host + ": refused to connect to 169.254.169.254: link-local addresses (cloud metadata services) are never probed"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := probe(t, w, canon(t, w, tt.pred))
			if tt.want.Summary == "" && tt.want.Facts == nil && tt.want.Reason == "" {
				got.Summary, got.Facts = "", nil // only the verdict is under test
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Probe(%s) (-want +got):\n%s", tt.pred, diff)
			}
		})
	}
}

// TestRateLimitedUnlessWatchExpires holds SPEC §1.1 and §1.3 together: an
// `unless` watch ("tell me if the endpoint answers 503") whose final probe
// was answered 429 ended without a confirmed answer, so it expires; a 429
// is no evidence that the 503 did not happen, and must not settle it
// fired/held. A final 404, a verified "not the 503", does.
func TestRateLimitedUnlessWatchExpires(t *testing.T) {
	t.Parallel()
	srv := server(t)
	w := httpwatch.New(httpwatch.Config{})
	for code, want := range map[int]vigil.State{429: vigil.StateExpired, 408: vigil.StateExpired, 404: vigil.StateFired} {
		pred := canon(t, w, `{"url":"`+srv.URL+`/code/`+strconv.Itoa(code)+`","status":[503]}`)
		obs := probe(t, w, pred)
		var p vigil.Progress
		p = p.Advance(obs.Verdict, obs.At)
		d := vigil.Decide(&vigil.Watch{Mode: vigil.ModeUnless}, &obs, p, obs.At, true)
		if !d.Settle || d.State != want || d.Held != (want == vigil.StateFired) {
			t.Errorf("unless watch, final probe answered %d (%s %q): Decide = %+v, want %s", code, obs.Verdict, obs.Summary, d, want)
		}
	}
}

func TestDenyPrivate(t *testing.T) {
	t.Parallel()
	srv := server(t)
	w := httpwatch.New(httpwatch.Config{DenyPrivate: true})
	got := probe(t, w, canon(t, w, `{"url":"`+srv.URL+`/ready"}`))
	if got.Verdict != vigil.VerdictUnavailable || !got.Permanent || !strings.Contains(got.Reason, "refused to connect to 127.0.0.1: loopback") {
		t.Errorf("Probe(loopback, DenyPrivate) = %+v, want a permanent refusal naming 127.0.0.1", got)
	}
}

func TestObservationStable(t *testing.T) {
	t.Parallel()
	srv := server(t)
	w := httpwatch.New(httpwatch.Config{})
	pred := canon(t, w, `{"url":"`+srv.URL+`/ready","done":{"path":"status.phase","equals":"Failed"}}`)
	first, second := probe(t, w, pred), probe(t, w, pred)
	if !first.Same(&second) {
		t.Errorf("two probes of an unchanged endpoint differ:\n%+v\n%+v", first, second)
	}
	// Facts survive a store round trip unchanged.
	b, err := json.Marshal(first)
	if err != nil {
		t.Fatal(err)
	}
	var back vigil.Observation
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if !back.Same(&first) {
		t.Errorf("observation changed through JSON:\n%+v\n%+v", first, back)
	}
}

func TestCanonicalize(t *testing.T) {
	t.Parallel()
	w := httpwatch.New(httpwatch.Config{})
	tests := []struct {
		name      string
		spellings []string
		want      string
	}{
		{"defaults filled", []string{
			`{"url":"http://example.com"}`,
			`{"url":"HTTP://Example.COM:80","method":"get","timeout":"10000ms","status":"2xx"}`,
			`{"url":"http://example.com/#frag","status":["2XX",200,204]}`,
		}, `{"method":"GET","status":["2xx"],"timeout":"10s","url":"http://example.com/"}`},
		{"matchers sorted, max_bytes kept with matchers", []string{
			`{"url":"https://example.com:443/x?b=1&a=2","done":[{"path":"b","gt":1},{"path":"a","equals":"x"}],"max_bytes":1048576}`,
			`{"url":"https://EXAMPLE.com/x?b=1&a=2","done":[{"equals":"x","path":"a"},{"gt":1.0,"path":"b"}]}`,
		}, `{"done":[{"equals":"x","path":"a"},{"gt":1,"path":"b"}],"max_bytes":1048576,"method":"GET","status":["2xx"],"timeout":"10s","url":"https://example.com/x?b=1\u0026a=2"}`},
		{"max_bytes dropped without matchers", []string{
			`{"url":"https://example.com/","max_bytes":5}`,
			`{"url":"https://example.com/"}`,
		}, `{"method":"GET","status":["2xx"],"timeout":"10s","url":"https://example.com/"}`},
		{"headers, status and ports", []string{
			`{"url":"http://[::1]:8080/a","method":"POST","headers":{"accept":"application/json"},"body":"x","status":[404,"2xx",201,304]}`,
			`{"url":"http://[::1]:08080/a","method":"post","headers":{"ACCEPT":"application/json"},"body":"x","status":["2xx",304,404]}`,
		}, `{"body":"x","headers":{"Accept":"application/json"},"method":"POST","status":["2xx",304,404],"timeout":"10s","url":"http://[::1]:8080/a"}`},
	}
	for _, tt := range tests {
		for _, s := range tt.spellings {
			if got := canon(t, w, s); string(got) != tt.want {
				t.Errorf("%s: Canonicalize(%s) =\n%s, want\n%s", tt.name, s, got, tt.want)
			}
		}
	}
}

func TestCanonicalizeRefusals(t *testing.T) {
	t.Parallel()
	w := httpwatch.New(httpwatch.Config{})
	tests := []struct{ in, field, msgHas string }{
		{`{"url":"http://x.com","methd":"GET"}`, "predicate.methd", "not a known field"},
		{`{}`, "predicate.url", "required"},
		{`{"url":"ftp://x.com/"}`, "predicate.url", "http or https"},
		{`{"url":"file:///etc/passwd"}`, "predicate.url", "http or https"},
		{`{"url":"http:///nohost"}`, "predicate.url", "host"},
		{`{"url":"http://x.com:99999/"}`, "predicate.url", "port"},
		{`{"url":"http://x.com/` + strings.Repeat("a", httpwatch.MaxURL) + `"}`, "predicate.url", "longer"},
		{`{"url":"http://x.com","method":"TRACE"}`, "predicate.method", "one of"},
		{`{"url":"http://x.com","body":"x"}`, "predicate.body", "GET"},
		{`{"url":"http://x.com","method":"POST","body":"` + strings.Repeat("a", httpwatch.MaxBody+1) + `"}`, "predicate.body", "longer"},
		{`{"url":"http://x.com","headers":{"Content-Length":"1"}}`, "predicate.headers.Content-Length", "set by vigil"},
		{`{"url":"http://x.com","headers":{"X-A":"a\nb"}}`, "predicate.headers.X-A", "line break"},
		{`{"url":"http://x.com","headers":{"bad name":"a"}}`, "predicate.headers.bad name", "header name"},
		{`{"url":"http://x.com","headers":{"X-A":"1","x-a":"2"}}`, "", "twice"},
		{`{"url":"http://x.com","timeout":"2m"}`, "predicate.timeout", "at most 1m"},
		{`{"url":"http://x.com","status":[99]}`, "predicate.status[0]", "100 to 599"},
		{`{"url":"http://x.com","status":["6xx"]}`, "predicate.status[0]", "class"},
		{`{"url":"http://x.com","status":[]}`, "predicate.status", "at least one"},
		{`{"url":"http://x.com","max_bytes":0}`, "predicate.max_bytes", "from 1"},
		{`{"url":"http://x.com","max_bytes":16777217}`, "predicate.max_bytes", "from 1"},
		{`{"url":"http://x.com","done":{"path":"a","matches":"(x"}}`, "predicate.done.matches", "RE2"},
		{`{"url":"http://x.com","done":[{"path":"a","exists":true},{"path":"a","equals":1,"contains":"x"}]}`, "predicate.done[1]", "exactly one operator"},
		{`{"url":"http://x.com","fail":{"path":"a","eq":1}}`, "predicate.fail.eq", "not a known field"},
		{`{"url":"http://x.com","method":"HEAD","done":{"path":"a","exists":true}}`, "predicate.method", "HEAD"},
	}
	for _, tt := range tests {
		_, err := w.Canonicalize(context.Background(), json.RawMessage(tt.in), time.Time{})
		field := vigil.ErrorField(err)
		if vigil.ErrorCode(err) != vigil.CodeInvalidPredicate || (tt.field != "" && field != tt.field) || !strings.Contains(vigil.ErrorMessage(err), tt.msgHas) {
			t.Errorf("Canonicalize(%.80s) = %v (field %q), want invalid_predicate on %s mentioning %q", tt.in, err, field, tt.field, tt.msgHas)
		}
	}
}

func TestWrongKind(t *testing.T) {
	t.Parallel()
	w := httpwatch.New(httpwatch.Config{})
	_, err := w.Probe(context.Background(), watcher.Probe{Kind: vigil.KindTCP, Predicate: json.RawMessage(`{"url":"http://x.com/"}`)})
	if err == nil || !strings.Contains(err.Error(), "wrong kind") {
		t.Errorf("Probe(tcp predicate) = %v, want ErrWrongKind", err)
	}
}

func TestAdmit(t *testing.T) {
	t.Parallel()
	tests := []struct {
		url         string
		denyPrivate bool
		refused     bool
	}{
		{"http://169.254.169.254/latest/meta-data/", false, true},
		{"http://[fe80::1]:8080/", false, true},
		{"http://127.0.0.1:8080/", false, false},
		{"http://127.0.0.1:8080/", true, true},
		{"http://10.0.0.1/", true, true},
		{"http://metadata.example/", true, false}, // names are checked when connecting
		// The spellings of issue #17: IPv6 forms carrying the metadata
		// address, and numbers resolvers read as addresses.
		{"http://[::169.254.169.254]/", false, true},
		{"http://[2002:a9fe:a9fe::]/", false, true},
		{"http://2852039166/", false, true},
		{"http://0251.0376.0251.0376/", false, true},
		{"http://0xa9fea9fe/", false, true},
		{"http://127.1:8080/", false, true},
	}
	for _, tt := range tests {
		w := httpwatch.New(httpwatch.Config{DenyPrivate: tt.denyPrivate})
		err := w.Admit(context.Background(), canon(t, w, `{"url":"`+tt.url+`"}`))
		if got := vigil.ErrorCode(err) == vigil.CodeWatchUnobservable; got != tt.refused || (err != nil && !got) {
			t.Errorf("Admit(%s, DenyPrivate %v) = %v, want refused %v", tt.url, tt.denyPrivate, err, tt.refused)
		}
	}
}
