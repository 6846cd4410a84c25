package daemon_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/vigil-run/vigil"
	"github.com/vigil-run/vigil/client"
)

// tenant is one scoped token with the watches and mail it made.
type tenant struct {
	recipient string
	secret    string
	tokenID   string
	c         *client.Client
	pending   string // a pending watch
	settled   string // a cancelled watch, whose neutral line is in the mailbox
}

func newTenant(t *testing.T, d *running, admin *client.Client, recipient string, exec bool) *tenant {
	t.Helper()
	ctx := t.Context()
	tok, err := admin.CreateToken(ctx, vigil.TokenCreateRequest{Recipients: []string{recipient}, Exec: exec})
	if err != nil {
		t.Fatalf("CreateToken(%s): %v", recipient, err)
	}
	c, err := client.New(d.Addr(), tok.Secret, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.CloseIdleConnections)
	tn := &tenant{recipient: recipient, secret: tok.Secret, tokenID: tok.ID, c: c}
	reg := func(pred string) string {
		w, err := c.Register(ctx, vigil.RegisterRequest{Kind: vigil.KindTimer, Recipient: recipient, Predicate: json.RawMessage(pred)})
		if err != nil {
			t.Fatalf("Register as %s: %v", recipient, err)
		}
		return w.ID
	}
	tn.pending = reg(`{"in":"1h"}`)
	tn.settled = reg(`{"in":"2h"}`)
	if _, err := c.Cancel(ctx, tn.settled); err != nil {
		t.Fatalf("Cancel: %v", err)
	}
	return tn
}

// call makes one raw request with token and returns the status and body.
func call(t *testing.T, d *running, token, method, path, body string) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, d.URL()+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		return resp.StatusCode, ""
	}
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestTenantMatrix: two scoped tokens, each against every route with the
// other's resources: every answer is 404 not_found, and nothing changed.
// The admin-only token routes answer 404 to both. (MCP tools: see
// docs/security.md; the matrix covers REST and SSE.)
func TestTenantMatrix(t *testing.T) {
	t.Parallel()
	d := start(t, testConfig(t.TempDir(), t.TempDir()))
	admin := newClient(t, d)
	a := newTenant(t, d, admin, "agent-a", false)
	b := newTenant(t, d, admin, "agent-b", false)

	for _, pair := range [][2]*tenant{{a, b}, {b, a}} {
		me, other := pair[0], pair[1]
		routes := []struct{ method, path, body string }{
			{"POST", "/v1/watches", fmt.Sprintf(`{"kind":"timer","recipient":%q,"predicate":{"in":"1h"}}`, other.recipient)},
			{"GET", "/v1/watches?recipient=" + other.recipient, ""},
			{"GET", "/v1/watches/" + other.pending, ""},
			{"GET", "/v1/watches/" + other.pending + "/why", ""},
			{"GET", "/v1/watches/" + other.pending + "/wait?timeout=0s", ""},
			{"POST", "/v1/watches/" + other.pending + "/cancel", ""},
			{"POST", "/v1/watches/" + other.pending + "/check", ""},
			{"POST", "/v1/watches/" + other.settled + "/check", ""},
			{"GET", "/v1/watches/" + other.settled + "/wait?timeout=0s", ""},
			{"POST", "/v1/recipients/" + other.recipient + "/notes", `{"title":"hi"}`},
			{"DELETE", "/v1/watches/" + other.pending, ""},
			{"DELETE", "/v1/watches/" + other.settled, ""},
			{"GET", "/v1/recipients/" + other.recipient + "/messages", ""},
			{"GET", "/v1/recipients/" + other.recipient + "/messages?reader=r&ack=true", ""},
			{"POST", "/v1/recipients/" + other.recipient + "/ack", `{"reader":"r","seq":1000}`},
			{"POST", "/v1/recipients/" + other.recipient + "/close", ""},
			{"GET", "/v1/events?recipient=" + other.recipient, ""},
			{"GET", "/v1/events?watch=" + other.pending, ""},
			{"POST", "/v1/tokens", fmt.Sprintf(`{"recipients":[%q]}`, me.recipient)},
			{"GET", "/v1/tokens", ""},
			{"POST", "/v1/tokens/" + other.tokenID + "/revoke", ""},
			{"POST", "/v1/tokens/" + me.tokenID + "/revoke", ""},
		}
		covered := map[string]bool{"POST /v1/watches/batch": true, "GET /v1/daemon": true} // below
		for _, rt := range routes {
			covered[rt.method+" "+rt.path] = true
		}
		checkEveryRouteTried(t, covered)
		for _, rt := range routes {
			status, body := call(t, d, me.secret, rt.method, rt.path, rt.body)
			if status != http.StatusNotFound || !strings.Contains(body, `"not_found"`) {
				t.Errorf("%s as %s: %s %s = %d %s, want 404 not_found", me.recipient, me.recipient, rt.method, rt.path, status, body)
			}
		}
		// A batch for the other's recipient is answered in its item: not_found.
		status, body := call(t, d, me.secret, "POST", "/v1/watches/batch",
			fmt.Sprintf(`{"watches":[{"kind":"timer","recipient":%q,"predicate":{"in":"1h"}}]}`, other.recipient))
		if status != http.StatusOK || !strings.Contains(body, `"not_found"`) || strings.Contains(body, `"watch"`) {
			t.Errorf("%s: batch for %s = %d %s, want its item refused not_found", me.recipient, other.recipient, status, body)
		}
		// Which daemon answered, but not its keys' fingerprints (the
		// admin's).
		status, body = call(t, d, me.secret, "GET", "/v1/daemon", "")
		if status != http.StatusOK || !strings.Contains(body, `"replica"`) || strings.Contains(body, `"keys"`) {
			t.Errorf("%s: GET /v1/daemon = %d %s, want 200 with the replica and no keys", me.recipient, status, body)
		}
		// Its own listing never holds the other's watches.
		page, err := me.c.Watches(t.Context(), vigil.ListRequest{})
		if err != nil {
			t.Fatal(err)
		}
		for _, w := range page.Watches {
			if w.Recipient != me.recipient {
				t.Errorf("%s lists %s's watch %s", me.recipient, w.Recipient, w.ID)
			}
		}
	}

	// Nothing changed: each tenant's watches and mailbox are as they were.
	for _, tn := range []*tenant{a, b} {
		w, err := tn.c.Watch(t.Context(), tn.pending)
		if err != nil || w.State != vigil.StatePending {
			t.Errorf("%s's pending watch afterwards: %v, %v", tn.recipient, w, err)
		}
		if _, err := tn.c.Watch(t.Context(), tn.settled); err != nil {
			t.Errorf("%s's settled watch afterwards: %v", tn.recipient, err)
		}
		page, err := tn.c.Messages(t.Context(), vigil.MessagesRequest{Recipient: tn.recipient, Reader: "r"})
		if err != nil || len(page.Messages) != 1 || page.Cursor != 0 {
			t.Errorf("%s's mailbox for reader r afterwards: %+v, %v; want its one message, cursor untouched", tn.recipient, page, err)
		}
	}
	toks, err := admin.Tokens(t.Context(), true)
	if err != nil || len(toks) != 2 {
		t.Fatalf("tokens afterwards = %v, %v; want the two", toks, err)
	}
	for _, tk := range toks {
		if !tk.RevokedAt.IsZero() {
			t.Errorf("token %s was revoked by a scoped caller", tk.ID)
		}
	}
}

// checkEveryRouteTried fails t unless every route of openapi.json that
// needs a bearer token is among tried ("METHOD /path?query"), so that a
// route added later is added to the matrix too.
func checkEveryRouteTried(t *testing.T, tried map[string]bool) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "httpapi", "openapi.json"))
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Paths map[string]map[string]struct {
			Security *[]any `json:"security"`
		} `json:"paths"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	for path, ops := range doc.Paths {
		segs := strings.Split(path, "/")
		for i, seg := range segs {
			if strings.HasPrefix(seg, "{") {
				segs[i] = "[^/?]+"
			} else {
				segs[i] = regexp.QuoteMeta(seg)
			}
		}
		re := regexp.MustCompile("^" + strings.Join(segs, "/") + `(\?.*)?$`)
		for method, op := range ops {
			if op.Security != nil && len(*op.Security) == 0 {
				continue // public
			}
			method = strings.ToUpper(method)
			found := false
			for k := range tried {
				m, p, _ := strings.Cut(k, " ")
				found = found || m == method && re.MatchString(p)
			}
			if !found {
				t.Errorf("the tenant matrix tries no %s %s", method, path)
			}
		}
	}
}

// TestTenantEventStream: a scoped token's unfiltered event stream carries
// its own recipient's events and never another's.
func TestTenantEventStream(t *testing.T) {
	t.Parallel()
	d := start(t, testConfig(t.TempDir(), t.TempDir()))
	admin := newClient(t, d)
	a := newTenant(t, d, admin, "agent-a", false)
	b := newTenant(t, d, admin, "agent-b", false)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", d.URL()+"/v1/events", nil)
	req.Header.Set("Authorization", "Bearer "+b.secret)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	// A registers first, B second: B's stream must show B's and only B's.
	if _, err := a.c.Register(ctx, vigil.RegisterRequest{Kind: vigil.KindTimer, Recipient: a.recipient, Predicate: json.RawMessage(`{"in":"3h"}`)}); err != nil {
		t.Fatal(err)
	}
	mine, err := b.c.Register(ctx, vigil.RegisterRequest{Kind: vigil.KindTimer, Recipient: b.recipient, Predicate: json.RawMessage(`{"in":"3h"}`)})
	if err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line, ok := strings.CutPrefix(sc.Text(), "data:")
		if !ok {
			continue
		}
		var ev vigil.Event
		if err := json.Unmarshal([]byte(strings.TrimSpace(line)), &ev); err != nil {
			t.Fatalf("event %q: %v", line, err)
		}
		if ev.Recipient != b.recipient {
			t.Fatalf("agent-b's stream carried %+v", ev)
		}
		if ev.WatchID == mine.ID {
			return
		}
	}
	t.Fatalf("agent-b's stream ended before its own event: %v", sc.Err())
}

// TestExecPolicy: a command watch needs the daemon's exec setting (else
// 422 watch_unobservable) and the token's exec scope (else 403 forbidden
// naming the scope); with both, the child sees only the allowed
// environment.
func TestExecPolicy(t *testing.T) {
	t.Setenv("VIGIL_TEST_SECRET_ENV", "leak-me")
	out := filepath.Join(t.TempDir(), "env.txt")
	pred := json.RawMessage(fmt.Sprintf(`{"argv":["/bin/sh","-c","env > %s"],"env":{"WATCH_SET":"yes"}}`, out))
	register := func(d *running, exec bool) (*vigil.Watch, error) {
		tn := newTenant(t, d, newClient(t, d), fmt.Sprintf("agent-%v", exec), exec)
		return tn.c.Register(t.Context(), vigil.RegisterRequest{Kind: vigil.KindCommand, Recipient: tn.recipient, Predicate: pred})
	}

	off := testConfig(t.TempDir(), t.TempDir())
	off.AllowExec = false
	dOff := start(t, off)
	if _, err := register(dOff, true); vigil.ErrorCode(err) != vigil.CodeWatchUnobservable {
		t.Errorf("command with the exec scope on a daemon without exec = %v, want watch_unobservable", err)
	}

	d := start(t, testConfig(t.TempDir(), t.TempDir()))
	_, err := register(d, false)
	if vigil.ErrorCode(err) != vigil.CodeForbidden || !strings.Contains(vigil.ErrorMessage(err), "exec scope") {
		t.Errorf("command without the exec scope = %v, want forbidden naming the exec scope", err)
	}
	w, err := register(d, true)
	if err != nil {
		t.Fatalf("command with exec allowed and the exec scope = %v", err)
	}
	settle(t, newClient(t, d), w.ID)
	env, err := os.ReadFile(out)
	if err != nil {
		t.Fatalf("the command did not run: %v", err)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(env)), "\n") {
		name, _, _ := strings.Cut(line, "=")
		switch name {
		case "PATH", "HOME", "LANG", "LC_ALL", "TZ", "USER", "LOGNAME", "SHELL", "TMPDIR", "TERM", "PWD", "SHLVL", "_", "VIGIL_CHAIN_DEPTH", "VIGIL_WATCH_ID", "OLDPWD", "WATCH_SET":
		default:
			t.Errorf("the child saw %s, which is not on the allow-list", name)
		}
	}
	if !strings.Contains(string(env), "WATCH_SET=yes") {
		t.Error("the child did not see what the watch sets")
	}
	if strings.Contains(string(env), "leak-me") {
		t.Error("the child saw the daemon's environment")
	}
}

// TestHostAndOriginGuard: the daemon answers on its listen address,
// loopback names and allowed_hosts only, on every route, and refuses a
// cross-origin request to /mcp and to every state-changing route, as 403
// forbidden (issue #17: /mcp answered a Host and Origin of
// evil.example.com).
func TestHostAndOriginGuard(t *testing.T) {
	cfg := testConfig(t.TempDir(), t.TempDir())
	cfg.AllowedHosts = []string{"vigil.test"}
	cfg.Delivery.PublicURL = "https://public.vigil.test/base"
	d := start(t, cfg)
	_, port, _ := net.SplitHostPort(d.Addr())
	initialize := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`
	send := func(method, path, host, origin, body string) int {
		t.Helper()
		var rd io.Reader
		if body != "" {
			rd = strings.NewReader(body)
		}
		req, _ := http.NewRequestWithContext(t.Context(), method, d.URL()+path, rd)
		req.Host = host
		req.Header.Set("Authorization", "Bearer "+d.Token())
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if origin != "" {
			req.Header.Set("Origin", origin)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v", method, path, err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode == http.StatusForbidden && !strings.Contains(string(b), `"forbidden"`) {
			t.Errorf("%s %s = 403 %s, want the forbidden error shape", method, path, b)
		}
		return resp.StatusCode
	}
	for _, tc := range []struct {
		method, path, host, origin, body string
		want                             int
	}{
		{"POST", "/mcp", "evil.example.com:" + port, "http://evil.example.com:" + port, initialize, 403},
		{"POST", "/mcp", "localhost:" + port, "http://localhost:" + port, initialize, 200},
		{"POST", "/mcp", "127.0.0.1:" + port, "http://evil.example.com", initialize, 403},
		{"GET", "/mcp", "127.0.0.1:" + port, "http://evil.example.com", "", 403},
		{"POST", "/mcp", "vigil.test:" + port, "https://vigil.test", initialize, 200},
		// public_url's host is allowed: the links vigil mails point there.
		{"GET", "/healthz", "public.vigil.test", "", "", 200},
		{"GET", "/healthz", "evil.example.com", "", "", 403},
		{"GET", "/metrics", "evil.example.com", "", "", 403},
		{"GET", "/v1/watches", "evil.example.com", "", "", 403},
		{"GET", "/v1/watches", "[::1]:" + port, "", "", 200},
		{"GET", "/v1/watches", "vigil.test", "http://evil.example.com", "", 200},
		{"POST", "/v1/watches", "127.0.0.1:" + port, "http://evil.example.com", `{"kind":"timer","recipient":"r","predicate":{"in":"1h"}}`, 403},
		{"POST", "/v1/watches", "127.0.0.1:" + port, "http://127.0.0.1:" + port, `{"kind":"timer","recipient":"r","predicate":{"in":"1h"}}`, 201},
	} {
		if got := send(tc.method, tc.path, tc.host, tc.origin, tc.body); got != tc.want {
			t.Errorf("%s %s Host %q Origin %q = %d, want %d", tc.method, tc.path, tc.host, tc.origin, got, tc.want)
		}
	}
}
