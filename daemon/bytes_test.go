package daemon_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/vigil-run/vigil"
	"github.com/vigil-run/vigil/internal/pgtest"
)

// hostileValue is one string from outside that some layer may take and
// another refuse: its JSON literal (quotes included, sent as bytes) and its
// raw bytes (for a path, a query parameter or a header).
type hostileValue struct {
	name string
	json string
	raw  string
}

func hostileValues() []hostileValue {
	big := strings.Repeat("a", 1<<20)
	return []hostileValue{
		{"NUL", `"a\u0000b"`, "a\x00b"},
		{"invalid UTF-8", "\"a\xffb\"", "a\xffb"},
		{"lone surrogate", `"a\ud800b"`, "a\xed\xa0\x80b"},
		{"1 MiB", `"` + big + `"`, big},
		{"RLO", `"a\u202eb"`, "a\u202eb"},
	}
}

// hostileCase is one string-valued input of one route. In path and body
// $V stands for the value: in body as its JSON literal, in path URL
// escaped; in a header's value as its raw bytes.
type hostileCase struct {
	method, path, body string
	header             string // a header whose value is $V
}

// TestHostileStrings sends every string-valued input of every route, on
// every store, a NUL, bytes that are not UTF-8, a lone surrogate escape, 1
// MiB and a right-to-left override, and requires each answer to be a 2xx
// or a 4xx with an error code: never a 5xx (a store refusing what no layer
// before it validated, answered internal).
func TestHostileStrings(t *testing.T) {
	stores := map[string]func(t *testing.T) string{"sqlite": func(*testing.T) string { return "" }}
	if os.Getenv(pgtest.EnvURL) != "" {
		stores["postgres"] = func(t *testing.T) string { return pgStore(t) }
	}
	for name, store := range stores {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			root := t.TempDir()
			cfg := testConfig(t.TempDir(), root)
			cfg.Store = store(t)
			d := start(t, cfg)
			admin := newClient(t, d)
			ctx := t.Context()
			reg := func(kind vigil.Kind, pred string) *vigil.Watch {
				w, err := admin.Register(ctx, vigil.RegisterRequest{Kind: kind, Recipient: "r", Predicate: json.RawMessage(pred)})
				if err != nil {
					t.Fatalf("Register %s: %v", kind, err)
				}
				return w
			}
			pending := reg(vigil.KindTimer, `{"in":"1h"}`)
			tokenWatch := reg(vigil.KindToken, `{}`)
			if _, err := admin.Note(ctx, vigil.NoteRequest{Recipient: "r", Title: "hi"}); err != nil {
				t.Fatal(err)
			}
			rootJ, _ := json.Marshal(root)
			rj := strings.Trim(string(rootJ), `"`)
			w := func(fields string) string {
				return `{"kind":"timer","recipient":"r","predicate":{"in":"1h"}` + fields + `}`
			}
			k := func(kind, pred string) string {
				return `{"kind":"` + kind + `","recipient":"r","predicate":` + pred + `}`
			}
			dl := func(deliver string) string {
				return `{"kind":"timer","recipient":"r","predicate":{"in":"1h"},"deliver":` + deliver + `}`
			}
			cases := []hostileCase{
				// POST /v1/watches: every field of the registration.
				{method: "POST", path: "/v1/watches", body: `{"kind":$V,"recipient":"r","predicate":{"in":"1h"}}`},
				{method: "POST", path: "/v1/watches", body: `{"kind":"timer","recipient":$V,"predicate":{"in":"1h"}}`},
				{method: "POST", path: "/v1/watches", body: w(`,"deadline":$V`)},
				{method: "POST", path: "/v1/watches", body: w(`,"every":$V`)},
				{method: "POST", path: "/v1/watches", body: w(`,"mode":$V`)},
				{method: "POST", path: "/v1/watches", body: w(`,"note":$V`)},
				{method: "POST", path: "/v1/watches", body: w(`,"labels":{"k":$V}`)},
				{method: "POST", path: "/v1/watches", body: w(`,"labels":{$V:"v"}`)},
				{method: "POST", path: "/v1/watches", body: w(`,"idempotency_key":$V`)},
				{method: "POST", path: "/v1/watches", body: w(`,"stable_for":$V`)},
				{method: "POST", path: "/v1/watches", body: w(`,$V:1`)},
				{method: "POST", path: "/v1/watches", body: w(``), header: "Idempotency-Key"},
				{method: "POST", path: "/v1/watches", body: w(``), header: "Vigil-Chain-Depth"},
				{method: "POST", path: "/v1/watches", body: w(``), header: "X-Request-Id"},
				{method: "POST", path: "/v1/watches?observe=$V", body: w(``)},
				// Each kind's predicate fields.
				{method: "POST", path: "/v1/watches", body: k("timer", `{"in":$V}`)},
				{method: "POST", path: "/v1/watches", body: k("timer", `{"at":$V}`)},
				{method: "POST", path: "/v1/watches", body: k("timer", `{"in":"1h",$V:1}`)},
				{method: "POST", path: "/v1/watches", body: k("file", `{"path":$V}`)},
				{method: "POST", path: "/v1/watches", body: k("file", `{"path":"`+rj+`/x",`+`"contains":$V}`)},
				{method: "POST", path: "/v1/watches", body: k("file", `{"path":"`+rj+`/x",`+`"matches":$V}`)},
				{method: "POST", path: "/v1/watches", body: k("command", `{"argv":[$V]}`)},
				{method: "POST", path: "/v1/watches", body: k("command", `{"shell":$V}`)},
				{method: "POST", path: "/v1/watches", body: k("command", `{"argv":["/bin/true"],"cwd":$V}`)},
				{method: "POST", path: "/v1/watches", body: k("command", `{"argv":["/bin/true"],"env":{"K":$V}}`)},
				{method: "POST", path: "/v1/watches", body: k("command", `{"argv":["/bin/true"],"env":{$V:"v"}}`)},
				{method: "POST", path: "/v1/watches", body: k("command", `{"argv":["/bin/true"],"timeout":$V}`)},
				{method: "POST", path: "/v1/watches", body: k("command", `{"argv":["/bin/true"],"done":[{"path":$V,"exists":true}]}`)},
				{method: "POST", path: "/v1/watches", body: k("command", `{"argv":["/bin/true"],"done":[{"path":"a","eq":$V}]}`)},
				{method: "POST", path: "/v1/watches", body: k("command", `{"argv":["/bin/true"],"done":[{"path":"a","contains":$V}]}`)},
				{method: "POST", path: "/v1/watches", body: k("command", `{"argv":["/bin/true"],"done":[{"path":"a","matches":$V}]}`)},
				{method: "POST", path: "/v1/watches", body: k("run", `{"argv":["/bin/true",$V]}`)},
				{method: "POST", path: "/v1/watches", body: k("run", `{"argv":["/bin/true"],"env":{"K":$V}}`)},
				{method: "POST", path: "/v1/watches", body: k("http", `{"url":$V}`)},
				{method: "POST", path: "/v1/watches", body: k("http", `{"url":"http://127.0.0.1:9/","method":$V}`)},
				{method: "POST", path: "/v1/watches", body: k("http", `{"url":"http://127.0.0.1:9/","headers":{"X-A":$V}}`)},
				{method: "POST", path: "/v1/watches", body: k("http", `{"url":"http://127.0.0.1:9/","headers":{$V:"v"}}`)},
				{method: "POST", path: "/v1/watches", body: k("http", `{"url":"http://127.0.0.1:9/","method":"POST","body":$V}`)},
				{method: "POST", path: "/v1/watches", body: k("http", `{"url":"http://127.0.0.1:9/","timeout":$V}`)},
				{method: "POST", path: "/v1/watches", body: k("http", `{"url":"http://127.0.0.1:9/","status":[$V]}`)},
				{method: "POST", path: "/v1/watches", body: k("http", `{"url":"http://127.0.0.1:9/","done":[{"path":"a","eq":$V}]}`)},
				{method: "POST", path: "/v1/watches", body: k("tcp", `{"address":$V}`)},
				{method: "POST", path: "/v1/watches", body: k("tcp", `{"address":"127.0.0.1:9","timeout":$V}`)},
				{method: "POST", path: "/v1/watches", body: k("schedule", `{"every":$V}`)},
				{method: "POST", path: "/v1/watches", body: k("schedule", `{"cron":$V}`)},
				{method: "POST", path: "/v1/watches", body: k("schedule", `{"cron":"0 9 * * *","tz":$V}`)},
				{method: "POST", path: "/v1/watches", body: k("ci", `{"repo":$V,"sha":"0123456789abcdef0123456789abcdef01234567"}`)},
				{method: "POST", path: "/v1/watches", body: k("ci", `{"repo":"a/b","sha":$V}`)},
				{method: "POST", path: "/v1/watches", body: k("ci", `{"repo":"a/b","sha":"0123456789abcdef0123456789abcdef01234567","checks":[$V]}`)},
				{method: "POST", path: "/v1/watches", body: k("ci", `{"provider":$V,"repo":"a/b","sha":"0123456789abcdef0123456789abcdef01234567"}`)},
				{method: "POST", path: "/v1/watches", body: k("ticket", `{"repo":$V,"number":1}`)},
				{method: "POST", path: "/v1/watches", body: k("ticket", `{"repo":"a/b","number":1,"type":$V}`)},
				{method: "POST", path: "/v1/watches", body: k("folder", `{"path":$V}`)},
				{method: "POST", path: "/v1/watches", body: k("folder", `{"path":"`+rj+`","pattern":$V}`)},
				{method: "POST", path: "/v1/watches", body: k("folder", `{"path":"`+rj+`","pattern":[$V]}`)},
				{method: "POST", path: "/v1/watches", body: k("folder", `{"path":"`+rj+`","settle":$V}`)},
				{method: "POST", path: "/v1/watches", body: k("folder", `{"path":"`+rj+`","on_change":{"argv":[$V]}}`)},
				{method: "POST", path: "/v1/watches", body: k("token", `{$V:1}`)},
				// Delivery options.
				{method: "POST", path: "/v1/watches", body: dl(`{"webhook":{"url":$V}}`)},
				{method: "POST", path: "/v1/watches", body: dl(`{"webhook":{"url":"https://example.com/h","secret":$V}}`)},
				{method: "POST", path: "/v1/watches", body: dl(`{"command":{"argv":["/bin/true",$V]}}`)},
				{method: "POST", path: "/v1/watches", body: dl(`{"command":{"argv":["/bin/true"],"env":{"K":$V}}}`)},
				{method: "POST", path: "/v1/watches", body: dl(`{"command":{"argv":["/bin/true"],"cwd":$V}}`)},
				{method: "POST", path: "/v1/watches", body: dl(`{"command":{"argv":["/bin/true"],"on":$V}}`)},
				{method: "POST", path: "/v1/watches", body: dl(`{"command":{"argv":["/bin/true"],"timeout":$V}}`)},
				{method: "POST", path: "/v1/watches", body: dl(`{"email":{"to":$V}}`)},
				{method: "POST", path: "/v1/watches", body: dl(`{"resume":{"harness":$V,"session":"s"}}`)},
				{method: "POST", path: "/v1/watches", body: dl(`{"resume":{"harness":"claude","session":$V}}`)},
				{method: "POST", path: "/v1/watches", body: dl(`{"resume":{"argv":["/bin/true",$V]}}`)},
				{method: "POST", path: "/v1/watches", body: dl(`{"resume":{"argv":["/bin/true"],"env":{"K":$V}}}`)},
				{method: "POST", path: "/v1/watches", body: dl(`{$V:1}`)},
				// A batch's items and its envelope.
				{method: "POST", path: "/v1/watches/batch", body: `{"watches":[{"kind":"timer","recipient":$V,"predicate":{"in":"1h"}}]}`},
				{method: "POST", path: "/v1/watches/batch", body: `{"watches":[` + w(`,"note":$V`) + `]}`},
				{method: "POST", path: "/v1/watches/batch", body: `{"watches":[` + w(`,"labels":{"k":$V}`) + `]}`},
				{method: "POST", path: "/v1/watches/batch", body: `{"watches":[` + w(`,"idempotency_key":$V`) + `]}`},
				{method: "POST", path: "/v1/watches/batch", body: `{"watches":[` + k("file", `{"path":"`+rj+`/x","contains":$V}`) + `]}`},
				{method: "POST", path: "/v1/watches/batch", body: `{"watches":[` + dl(`{"webhook":{"url":"https://example.com/h","secret":$V}}`) + `]}`},
				{method: "POST", path: "/v1/watches/batch", body: `{"watches":[` + w(``) + `],$V:1}`},
				// Lists and one watch.
				{method: "GET", path: "/v1/watches?recipient=$V"},
				{method: "GET", path: "/v1/watches?state=$V"},
				{method: "GET", path: "/v1/watches?kind=$V"},
				{method: "GET", path: "/v1/watches?text=$V"},
				{method: "GET", path: "/v1/watches?after=$V"},
				{method: "GET", path: "/v1/watches?limit=$V"},
				{method: "GET", path: "/v1/watches?label=$V"},
				{method: "GET", path: "/v1/watches?label=k:$V"},
				{method: "GET", path: "/v1/watches?label=k%3D$V"},
				{method: "GET", path: "/v1/watches/$V"},
				{method: "GET", path: "/v1/watches/$V/why"},
				{method: "GET", path: "/v1/watches/$V/wait?timeout=0s"},
				{method: "GET", path: "/v1/watches/" + pending.ID + "/wait?timeout=$V"},
				{method: "POST", path: "/v1/watches/$V/cancel"},
				{method: "POST", path: "/v1/watches/$V/check"},
				{method: "DELETE", path: "/v1/watches/$V"},
				// Mailboxes.
				{method: "GET", path: "/v1/recipients/$V/messages"},
				{method: "GET", path: "/v1/recipients/r/messages?reader=$V"},
				{method: "GET", path: "/v1/recipients/r/messages?reader=x&ack=$V"},
				{method: "GET", path: "/v1/recipients/r/messages?after=$V"},
				{method: "GET", path: "/v1/recipients/r/messages?limit=$V"},
				{method: "GET", path: "/v1/recipients/r/messages?timeout=$V"},
				{method: "POST", path: "/v1/recipients/$V/ack", body: `{"reader":"x","seq":1}`},
				{method: "POST", path: "/v1/recipients/r/ack", body: `{"reader":$V,"seq":1}`},
				{method: "POST", path: "/v1/recipients/$V/close"},
				{method: "POST", path: "/v1/recipients/$V/notes", body: `{"title":"t"}`},
				{method: "POST", path: "/v1/recipients/r/notes", body: `{"title":$V}`},
				{method: "POST", path: "/v1/recipients/r/notes", body: `{"title":"t","body":$V}`},
				{method: "POST", path: "/v1/recipients/r/notes", body: `{"title":"t","from":$V}`},
				// Events.
				{method: "GET", path: "/v1/events?recipient=$V"},
				{method: "GET", path: "/v1/events?watch=$V"},
				{method: "GET", path: "/v1/events?recipient=r", header: "Last-Event-ID"},
				// Completions of a token watch.
				{method: "POST", path: "/v1/complete/$V", body: `{"status":"success"}`},
				{method: "POST", path: "/v1/complete/" + tokenWatch.CompletionToken, body: `{"status":$V}`},
				{method: "POST", path: "/v1/complete/$TOKEN", body: `{"status":"success","data":{"k":$V}}`},
				{method: "POST", path: "/v1/complete/$TOKEN", body: `{"status":"success","data":{$V:1}}`},
				{method: "POST", path: "/v1/complete/$TOKEN", body: `{"status":"success","data":$V}`},
				// Unsubscribe links.
				{method: "GET", path: "/v1/unsubscribe/$V/sig"},
				{method: "POST", path: "/v1/unsubscribe/" + pending.ID + "/$V"},
				// Tokens.
				{method: "POST", path: "/v1/tokens", body: `{"recipients":[$V]}`},
				{method: "POST", path: "/v1/tokens", body: `{"recipients":["r"],"kinds":[$V]}`},
				{method: "POST", path: "/v1/tokens", body: `{"recipients":["r"],"expires":$V}`},
				{method: "GET", path: "/v1/tokens?all=$V"},
				{method: "POST", path: "/v1/tokens/$V/revoke"},
				{method: "GET", path: "/v1/daemon?x=$V"}, // takes no input
			}
			tried := map[string]bool{}
			for _, tc := range cases {
				tried[tc.method+" "+tc.path] = true
			}
			checkEveryRouteTried(t, tried) // a route added later is tried too
			for _, tc := range cases {
				for _, v := range hostileValues() {
					tc := tc
					if strings.Contains(tc.path, "$TOKEN") {
						// Each completion on a token watch of its own.
						tc.path = strings.ReplaceAll(tc.path, "$TOKEN", reg(vigil.KindToken, `{}`).CompletionToken)
					}
					status, body, err := sendHostile(ctx, d, tc, v)
					what := fmt.Sprintf("%s %s %s header %q with %s", tc.method, clip(tc.path), clip(tc.body), tc.header, v.name)
					if err != nil {
						if tc.header != "" && strings.Contains(err.Error(), "invalid header field value") {
							continue // the client cannot send it
						}
						t.Errorf("%s: %v", what, err)
						continue
					}
					if testing.Verbose() {
						t.Logf("%s = %d %s", what, status, clip(body))
					}
					if status == http.StatusServiceUnavailable && strings.Contains(body, `"unavailable"`) {
						// A forge not reachable now, a stable code.
					} else if status >= 500 {
						t.Errorf("%s = %d %s, want a 2xx or a 4xx with a code", what, status, clip(body))
					} else if status >= 400 && !strings.Contains(body, `"code"`) && status != http.StatusRequestHeaderFieldsTooLarge {
						t.Errorf("%s = %d %s, want an error code", what, status, clip(body))
					}
				}
			}
		})
	}
}

// sendHostile makes tc's request with v as the admin.
func sendHostile(ctx context.Context, d *running, tc hostileCase, v hostileValue) (int, string, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	path := tc.path
	if p, q, ok := strings.Cut(path, "?"); ok {
		path = strings.ReplaceAll(p, "$V", url.PathEscape(v.raw)) + "?" + strings.ReplaceAll(q, "$V", url.QueryEscape(v.raw))
	} else {
		path = strings.ReplaceAll(path, "$V", url.PathEscape(v.raw))
	}
	var rd io.Reader
	if tc.body != "" {
		rd = bytes.NewReader([]byte(strings.ReplaceAll(tc.body, "$V", v.json)))
	}
	req, err := http.NewRequestWithContext(ctx, tc.method, d.URL()+path, rd)
	if err != nil {
		return 0, "", err
	}
	req.Header.Set("Authorization", "Bearer "+d.Token())
	if tc.body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if tc.header != "" {
		req.Header[tc.header] = []string{v.raw}
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		return resp.StatusCode, "", nil
	}
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), nil
}

func clip(s string) string {
	if len(s) > 160 {
		return s[:160] + "…"
	}
	return s
}
