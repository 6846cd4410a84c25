package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/vigil-run/vigil"
	"github.com/vigil-run/vigil/client"
)

// TestWaitExitCodes drives add and wait to each outcome, against a real
// daemon, waiting by long-poll only.
func TestWaitExitCodes(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	for _, tc := range []struct {
		name string
		add  []string // after "add", before the client flags
		pre  func(tr *transcript, id string)
		wait []string // extra wait flags
		want int
	}{
		{name: "fired", add: []string{"timer", "1s", "--note", "stretch"}, want: ExitOK},
		{name: "failed", add: []string{"command", "--fail-exit", "1", "--", "false"}, want: ExitFailed},
		{name: "cancelled", add: []string{"timer", "1h"}, want: ExitStopped,
			pre: func(tr *transcript, id string) { tr.run(t, d, "cancel", id) }},
		{name: "pending", add: []string{"timer", "1h"}, wait: []string{"--timeout", "1s"}, want: ExitPending},
		{name: "expired", add: []string{"file", filepath.Join(d.root, "never"), "--deadline", "2s", "--every", "1s"}, want: ExitExpired},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tr := &transcript{}
			args := append([]string{"add"}, tc.add...)
			args = append(args[:2], append([]string{"--for", "wait-" + tc.name, "-q"}, args[2:]...)...)
			r := tr.run(t, d, args...)
			if r.code != 0 {
				t.Fatalf("add: exit %d: %s", r.code, r.stderr)
			}
			id := strings.TrimSpace(r.stdout)
			if tc.pre != nil {
				tc.pre(tr, id)
			}
			r = tr.run(t, d, append([]string{"wait", id}, tc.wait...)...)
			if r.code != tc.want {
				t.Errorf("wait exit = %d, want %d (stdout %q, stderr %q)", r.code, tc.want, r.stdout, r.stderr)
			}
			r = tr.run(t, d, "wait", id, "--json", "--timeout", "1ms")
			var w vigil.Watch
			if err := json.Unmarshal([]byte(r.stdout), &w); err != nil || w.ID != id {
				t.Errorf("wait --json printed %q (%v), want the watch", r.stdout, err)
			}
			golden(t, "wait_"+tc.name+".golden", d.normalize(tr.b.String()))
		})
	}
}

// TestListShowWhyInbox registers a few watches for one recipient and
// checks the human output of ls, show, why and inbox.
func TestListShowWhyInbox(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	tr := &transcript{}
	must := func(args ...string) result {
		t.Helper()
		r := tr.run(t, d, args...)
		if r.code != 0 {
			t.Fatalf("vigil %s: exit %d: %s", strings.Join(args, " "), r.code, r.stderr)
		}
		return r
	}
	timer := strings.TrimSpace(must("add", "timer", "1s", "--for", "alice", "--note", "stretch", "-q").stdout)
	must("wait", timer)
	failed := strings.TrimSpace(must("add", "command", "--for", "alice", "--fail-exit", "1", "-q", "--", "false").stdout)
	if r := tr.run(t, d, "wait", failed); r.code != ExitFailed {
		t.Fatalf("wait on a failing command: exit %d", r.code)
	}
	pending := strings.TrimSpace(must("add", "timer", "1h", "--for", "alice", "--note", "later", "--label", "task=T-19", "-q").stdout)
	must("add", "timer", "1h", "--for", "bob", "-q")

	must("ls", "--for", "alice")
	must("ls", "--for", "alice", "--state", "pending")
	must("ls", "--label", "task=T-19")
	must("ls", "--for", "nobody")
	must("show", timer)
	must("show", failed)
	must("why", timer)
	must("why", failed)
	must("why", pending)
	must("inbox", "--for", "alice")
	must("inbox", "--for", "alice")
	must("inbox", "--for", "alice", "--reader", "other", "--no-ack")
	golden(t, "list_show_why_inbox.golden", d.normalize(tr.b.String()))

	js := &transcript{}
	js.add([]string{"ls", "--for", "alice", "--json"}, d.vigil(t, "ls", "--for", "alice", "--json"))
	js.add([]string{"show", timer, "--json"}, d.vigil(t, "show", timer, "--json"))
	js.add([]string{"why", pending, "--json"}, d.vigil(t, "why", pending, "--json"))
	js.add([]string{"inbox", "--for", "alice", "--reader", "json", "--json"}, d.vigil(t, "inbox", "--for", "alice", "--reader", "json", "--json"))
	golden(t, "json.golden", d.normalize(js.b.String()))
}

func TestNotice(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	tr := &transcript{}
	tr.run(t, d, "notice", "--for", "carol")
	id := strings.TrimSpace(tr.run(t, d, "add", "timer", "1s", "--for", "carol", "--note", "check the deploy", "-q").stdout)
	tr.run(t, d, "wait", id)
	r := tr.run(t, d, "notice", "--for", "carol")
	if !strings.HasPrefix(r.stdout, "<vigil>\n") || !strings.HasSuffix(r.stdout, "</vigil>\n") || r.code != 0 {
		t.Errorf("notice = %q, exit %d; want one <vigil> block", r.stdout, r.code)
	}
	if r := tr.run(t, d, "notice", "--for", "carol"); r.stdout != "" || r.code != 0 {
		t.Errorf("second notice = %q, exit %d; want nothing, 0", r.stdout, r.code)
	}
	// A note shows its body's first lines under its title, escaped for
	// the terminal, and bounded.
	tr.add([]string{"note", "--for", "carol", "nightly findings", "(6 lines, an escape sequence in the second)"},
		d.vigil(t, "note", "--for", "carol", "nightly findings", "2 flaky tests:\nTestA\x1b[2J\nTestB\nTestC\nTestD\nTestE"))
	tr.run(t, d, "note", "--for", "carol", "a bare note")
	r = tr.run(t, d, "notice", "--for", "carol")
	if !strings.Contains(r.stdout, "    TestA\\x1b[2J\n") || strings.Contains(r.stdout, "TestD") || r.code != 0 {
		t.Errorf("notice of notes = %q, exit %d; want the first 4 body lines, escaped", r.stdout, r.code)
	}
	golden(t, "notice.golden", d.normalize(tr.b.String()))
}

// TestNote checks vigil note: a title and a body (from stdin with -), the
// refusals, and that a note for a recipient the token may not use is
// not found.
func TestNote(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	r := d.vigil(t, "note", "--for", "erin", "findings", "--json")
	var m vigil.Message
	if err := json.Unmarshal([]byte(r.stdout), &m); err != nil || r.code != 0 || m.Type != vigil.MessageNote || m.Text != "findings" || m.Recipient != "erin" {
		t.Fatalf("note --json = %+v (%v)", r, err)
	}
	var out, errb bytes.Buffer
	root := newRoot(&env{stdout: &out, stderr: &errb, getenv: func(k string) string {
		return map[string]string{"VIGIL_ADDR": d.Addr(), "VIGIL_TOKEN": d.Token()}[k]
	}, terminal: func(io.Writer) bool { return false }})
	root.SetArgs([]string{"note", "--for", "erin", "from stdin", "-"})
	root.SetIn(strings.NewReader("line 1\nline 2\n"))
	if err := root.ExecuteContext(t.Context()); err != nil || !strings.HasPrefix(out.String(), "Left a note for erin (message ") {
		t.Fatalf("note with a body on stdin: %v, %q %q", err, out.String(), errb.String())
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"note", "--for", "erin", ""}, "title"},
		{[]string{"note", "--for", "erin", "a\nb"}, "one line"},
		{[]string{"note", "--for", "erin", "t", strings.Repeat("x", vigil.MaxNoteBodyBytes+1)}, "body"},
		{[]string{"note", "--for", "bad name", "t"}, "recipient"},
	} {
		if r := d.vigil(t, tc.args...); r.code != ExitUsage || !strings.Contains(r.stderr, tc.want) {
			t.Errorf("vigil %q = %+v, want exit %d naming %s", tc.args, r, ExitUsage, tc.want)
		}
	}
	tok := d.vigil(t, "token", "create", "--for", "frank")
	secret := strings.TrimSpace(tok.stdout)
	if tok.code != 0 || secret == "" {
		t.Fatalf("token create = %+v", tok)
	}
	r = runCLI(t, map[string]string{"VIGIL_ADDR": d.Addr(), "VIGIL_TOKEN": secret}, "note", "--for", "erin", "sneaky")
	if r.code != ExitUsage || !strings.Contains(r.stderr, "no recipient") {
		t.Errorf("note for another recipient with a scoped token = %+v, want not found", r)
	}
	r = runCLI(t, map[string]string{"VIGIL_ADDR": d.Addr(), "VIGIL_TOKEN": secret}, "notice", "--for", "erin")
	if r.code != 0 || r.stdout != "" || r.stderr != "vigil notice: the token may not read erin's messages (not_found)\n" {
		t.Errorf("notice for another recipient with a scoped token = %+v, want exit 0 and one stderr line", r)
	}
	c, err := client.New(d.Addr(), d.Token(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.CloseIdleConnections()
	page, err := c.Messages(t.Context(), vigil.MessagesRequest{Recipient: "erin", Reader: "t"})
	if err != nil || len(page.Messages) != 2 || page.Messages[1].Text != "from stdin" || !strings.Contains(string(page.Messages[1].Data), `"body":"line 1\nline 2\n"`) {
		t.Fatalf("erin's mailbox = %+v, %v; want the two notes only", page.Messages, err)
	}
}

// TestNoticeDaemonDown checks notice prints nothing and exits 0 when the
// daemon is down, when there is no token, and when the token is wrong.
func TestNoticeDaemonDown(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	down := ln.Addr().String()
	ln.Close()
	for _, args := range [][]string{
		{"notice", "--for", "dave", "--addr", down, "--token", "x"},
		{"notice", "--for", "dave", "--addr", down, "--data-dir", t.TempDir()},
	} {
		var out, errb bytes.Buffer
		cmd := New(&out, &errb)
		cmd.SetArgs(args)
		err := cmd.ExecuteContext(t.Context())
		// Down, or no token at all: nothing on stdout, exit 0; a missing
		// token is said in one line on stderr.
		wantErr := 0
		if args[len(args)-2] == "--data-dir" {
			wantErr = 1
		}
		if code := ExitCode(err); code != 0 || out.Len() != 0 || strings.Count(errb.String(), "\n") != wantErr || wantErr == 1 && !strings.Contains(errb.String(), "no token") {
			t.Errorf("vigil %v: exit %d, stdout %q, stderr %q; want 0, nothing on stdout and %d stderr lines", args, code, out.String(), errb.String(), wantErr)
		}
	}
	d := startDaemon(t)
	r := runCLI(t, map[string]string{"VIGIL_ADDR": d.Addr(), "VIGIL_TOKEN": "wrong"}, "notice", "--for", "dave")
	if r.code != 0 || r.stdout != "" || strings.Count(r.stderr, "\n") != 1 || !strings.HasPrefix(r.stderr, "vigil notice: the daemon refused the token (unauthorized)") {
		t.Errorf("notice with a wrong token: %+v, want exit 0, nothing on stdout and one stderr line", r)
	}
}

// TestErrors checks that errors are one sentence on stderr with exit 2.
func TestErrors(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	down := ln.Addr().String()
	ln.Close()
	tr := &transcript{}
	for _, args := range [][]string{
		{"show", "01ARZ3NDEKTSV4RRFFQ69G5FAV"},
		{"add", "timer", "soon"},
		{"add", "timer"},
		{"add", "http", "ftp://example.com/"},
		{"add", "kettle"},
		{"add", "timr", "5s"},
		{"add", "file", "/etc"},
		{"add", "timer", "1m", "--label", "oops"},
		{"ls", "--state", "asleep"},
		{"ls", "--bogus"},
		{"wait"},
		{"wait", "nope", "--timeout", "never"},
		{"ls", "--addr", down},
		{"ls", "--token", "wrong"},
	} {
		r := tr.run(t, d, args...)
		if r.code != ExitUsage {
			t.Errorf("vigil %v: exit %d, want %d", args, r.code, ExitUsage)
		}
		if r.stdout != "" || strings.Count(r.stderr, "\n") != 1 || !strings.HasPrefix(r.stderr, "vigil: ") {
			t.Errorf("vigil %v: stdout %q stderr %q, want one line on stderr", args, r.stdout, r.stderr)
		}
	}
	s := d.normalize(tr.b.String())
	s = strings.ReplaceAll(s, down, "127.0.0.1:PORT")
	golden(t, "errors.golden", s)
}

// TestAddRequests checks the registration each add command sends, against
// a fake daemon that records it: predicates from arguments and flags, and
// no deadline or interval unless given (the daemon resolves defaults).
func TestAddRequests(t *testing.T) {
	t.Parallel()
	var got vigil.RegisterRequest
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = vigil.RegisterRequest{}
		b, _ := io.ReadAll(r.Body)
		if err := json.Unmarshal(b, &got); err != nil {
			t.Errorf("request body %s: %v", b, err)
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(vigil.Watch{ID: "01ARZ3NDEKTSV4RRFFQ69G5FAV", Kind: got.Kind, Predicate: got.Predicate, Recipient: got.Recipient, State: vigil.StatePending})
	}))
	defer srv.Close()
	env := map[string]string{"VIGIL_ADDR": srv.URL, "VIGIL_TOKEN": "t", "USER": "tester", "VIGIL_RECIPIENT": "agent-7"}

	for _, tc := range []struct {
		args []string
		want vigil.RegisterRequest
	}{
		{[]string{"add", "timer", "10m"}, vigil.RegisterRequest{Kind: "timer", Predicate: json.RawMessage(`{"in":"10m"}`), Recipient: "agent-7"}},
		{[]string{"add", "timer", "--at", "2030-01-02T03:04:05Z", "--for", "me", "--note", "n", "--label", "a=b", "--label", "c=d"},
			vigil.RegisterRequest{Kind: "timer", Predicate: json.RawMessage(`{"at":"2030-01-02T03:04:05Z"}`), Recipient: "me", Note: "n", Labels: map[string]string{"a": "b", "c": "d"}}},
		{[]string{"add", "http", "https://x.test/h", "--method", "post", "--status", "200,2xx", "--header", "X-A: 1", "--done-path", "a.b", "--done-equals", "3", "--fail-path", "err", "--deadline", "2h", "--every", "30s", "--mode", "unless", "--observe", "--idempotency-key", "k1"},
			vigil.RegisterRequest{Kind: "http", Recipient: "agent-7", Deadline: "2h", Every: "30s", Mode: "unless", Observe: true, IdempotencyKey: "k1",
				Predicate: json.RawMessage(`{"done":{"equals":3,"path":"a.b"},"fail":{"path":"err","truthy":true},"headers":{"X-A":"1"},"method":"post","status":[200,"2xx"],"url":"https://x.test/h"}`)}},
		{[]string{"add", "http", "https://x.test/h", "--done-path", "s", "--done-equals", "Ready"},
			vigil.RegisterRequest{Kind: "http", Recipient: "agent-7", Predicate: json.RawMessage(`{"done":{"equals":"Ready","path":"s"},"url":"https://x.test/h"}`)}},
		{[]string{"add", "tcp", "db:5432", "--timeout", "1s"}, vigil.RegisterRequest{Kind: "tcp", Recipient: "agent-7", Predicate: json.RawMessage(`{"address":"db:5432","timeout":"1s"}`)}},
		{[]string{"add", "file", "/srv/x", "--absent"}, vigil.RegisterRequest{Kind: "file", Recipient: "agent-7", Predicate: json.RawMessage(`{"exists":false,"path":"/srv/x"}`)}},
		{[]string{"add", "file", "/srv/log", "--contains", "listening"}, vigil.RegisterRequest{Kind: "file", Recipient: "agent-7", Predicate: json.RawMessage(`{"contains":"listening","path":"/srv/log"}`)}},
		{[]string{"add", "command", "--cwd", "/src", "--fail-exit", "1,2", "--env", "A=b", "--", "make", "-j", "test"},
			vigil.RegisterRequest{Kind: "command", Recipient: "agent-7", Predicate: json.RawMessage(`{"argv":["make","-j","test"],"cwd":"/src","env":{"A":"b"},"fail":[1,2]}`)}},
		{[]string{"add", "command", "--cwd", "/src", "--shell", "exit 3", "--done-exit", "3"},
			vigil.RegisterRequest{Kind: "command", Recipient: "agent-7", Predicate: json.RawMessage(`{"cwd":"/src","done":[3],"shell":"exit 3"}`)}},
		{[]string{"add", "folder", "--predicate", `{"path": "/srv/docs", "pattern": ["**/*.md"]}`},
			vigil.RegisterRequest{Kind: "folder", Recipient: "agent-7", Predicate: json.RawMessage(`{"path":"/srv/docs","pattern":["**/*.md"]}`)}},
		{[]string{"add", "http", "https://x.test/override", "--predicate", `{"url": "https://x.test/base", "timeout": "5s"}`},
			vigil.RegisterRequest{Kind: "http", Recipient: "agent-7", Predicate: json.RawMessage(`{"timeout":"5s","url":"https://x.test/override"}`)}},
	} {
		r := runCLI(t, env, tc.args...)
		if r.code != 0 {
			t.Errorf("vigil %v: exit %d: %s", tc.args, r.code, r.stderr)
			continue
		}
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("vigil %v sent (-want +got):\n%s", tc.args, diff)
		}
	}
}

func TestServiceUnits(t *testing.T) {
	t.Parallel()
	p := unitParams{
		Binary:  "/home/ada/go/bin/vigil",
		Args:    []string{"serve", "--data-dir", "/home/ada/.local/share/vigil"},
		LogPath: "/Users/ada/Library/Logs/vigil.log",
	}
	golden(t, "vigil.service.golden", systemdUnit(p))
	golden(t, "run.vigil.plist.golden", launchdPlist(p))

	for in, want := range map[string]string{
		"/usr/bin/vigil":   "/usr/bin/vigil",
		"/opt/my apps/v":   `"/opt/my apps/v"`,
		`/a"b\c`:           `"/a\"b\\c"`,
		"/data/100%/vigil": "/data/100%%/vigil",
		"/x/$HOME":         "/x/$$HOME",
	} {
		if got := systemdQuote(in); got != want {
			t.Errorf("systemdQuote(%q) = %q, want %q", in, got, want)
		}
	}

	for _, goos := range []string{"linux", "darwin"} {
		env := map[string]string{"HOME": "/home/ada"}
		r := runCLI(t, env, "service", "install", "--dry-run", "--os", goos, "--binary", "/usr/local/bin/vigil")
		if r.code != 0 {
			t.Fatalf("service install --dry-run --os %s: exit %d: %s", goos, r.code, r.stderr)
		}
		golden(t, "service_install_"+goos+".golden", r.stdout)
	}
	if r := runCLI(t, map[string]string{"HOME": "/h"}, "service", "install", "--dry-run", "--os", "plan9"); r.code != ExitUsage {
		t.Errorf("service install on plan9: exit %d, want %d", r.code, ExitUsage)
	}
}

func TestBackupCommand(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	if r := d.vigil(t, "add", "timer", "1h", "--for", "erin"); r.code != 0 {
		t.Fatalf("add: %+v", r)
	}
	dest := filepath.Join(t.TempDir(), "copy.db")
	dataDir := d.dataDir
	r := runCLI(t, map[string]string{"HOME": t.TempDir()}, "backup", "--data-dir", dataDir, dest)
	if r.code != 0 || !strings.Contains(r.stdout, "Backed up") {
		t.Fatalf("backup: %+v", r)
	}
	if r := runCLI(t, map[string]string{"HOME": t.TempDir()}, "backup", "--data-dir", dataDir, dest); r.code == 0 {
		t.Errorf("backup onto an existing file: exit 0")
	}
}

func TestStatus(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	d.vigil(t, "add", "timer", "1h", "--for", "fay")
	r := d.vigil(t, "status")
	if r.code != 0 || !strings.Contains(r.stdout, "reachable") || !strings.Contains(r.stdout, "1 (1 pending)") ||
		!strings.Contains(r.stdout, "store: sqlite, replica ") || !regexp.MustCompile(`\nsigning keys: webhook\.secret [0-9a-f]{16}, link\.key [0-9a-f]{16}\n`+
		`signing settings: webhook_secrets [0-9a-f]{16}, webhooks [0-9a-f]{16}, public_url [0-9a-f]{16}\n`).MatchString(r.stdout) {
		t.Errorf("status: %+v", r)
	}
	r = d.vigil(t, "status", "--json")
	var s struct {
		Reachable bool           `json:"reachable"`
		Watches   map[string]int `json:"watches"`
		Daemon    struct {
			Store, Role string
			Keys        struct {
				LinkKey string `json:"link_key"`
			}
		} `json:"daemon"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &s); err != nil || !s.Reachable || s.Watches["pending"] != 1 ||
		s.Daemon.Store != "sqlite" || s.Daemon.Role != "active" || len(s.Daemon.Keys.LinkKey) != 16 {
		t.Errorf("status --json = %q (%v)", r.stdout, err)
	}
}

func TestExitCode(t *testing.T) {
	t.Parallel()
	if got := ExitCode(nil); got != 0 {
		t.Errorf("ExitCode(nil) = %d", got)
	}
	if got := ExitCode(&ExitError{Code: 124}); got != 124 {
		t.Errorf("ExitCode(124) = %d", got)
	}
	if got := ExitCode(io.EOF); got != ExitUsage {
		t.Errorf("ExitCode(plain error) = %d, want %d", got, ExitUsage)
	}
}

// TestWaitLiveLine checks that on a terminal wait shows a status line,
// updated in place, and clears it before the result.
func TestWaitLiveLine(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	// A watch that settles only when told, so that the live line is
	// drawn however slowly wait starts (a 1 s timer could fire first on a
	// loaded machine, and wait then had no line to draw).
	id := strings.TrimSpace(d.vigil(t, "add", "timer", "1h", "--for", "gus", "-q").stdout)
	var out, errb lockedBuffer
	vars := map[string]string{"VIGIL_ADDR": d.Addr(), "VIGIL_TOKEN": d.Token()}
	root := newRoot(&env{stdout: &out, stderr: &errb, getenv: func(k string) string { return vars[k] }, terminal: func(io.Writer) bool { return true }})
	root.SetArgs([]string{"wait", id})
	done := make(chan error, 1)
	go func() { done <- root.ExecuteContext(t.Context()) }()
	const line = "\r\x1b[2K⠋ waiting 0s for the timer set for "
	giveUp := time.After(time.Minute) // a bound on a hang, not a timing claim
	for !strings.Contains(out.String(), line) {
		select {
		case err := <-done:
			t.Fatalf("wait returned before drawing the live line: %v (stdout %q, stderr %q)", err, out.String(), errb.String())
		case <-giveUp:
			t.Fatalf("output %q lacks the live line", out.String())
		case <-time.After(10 * time.Millisecond):
		}
	}
	if r := d.vigil(t, "cancel", id); r.code != 0 {
		t.Fatalf("cancel: %+v", r)
	}
	if err := <-done; err == nil {
		t.Errorf("wait on a cancelled watch returned no error, want exit %d", ExitStopped)
	}
	s := out.String()
	if !strings.HasSuffix(s, "\r\x1b[2Kcancelled: "+strings.SplitN(s, "cancelled: ", 2)[1]) {
		t.Errorf("output %q does not clear the line before the result", s)
	}
}

// TestAddWaitAndInboxWait checks add --wait exits with the outcome, and
// inbox --wait long-polls until a message arrives.
func TestAddWaitAndInboxWait(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	r := d.vigil(t, "add", "command", "--for", "hal", "--fail-exit", "1", "--wait", "--", "false")
	if r.code != ExitFailed || !strings.Contains(r.stdout, "failed: The command `false` failed") {
		t.Errorf("add --wait on a failing command: %+v, want exit 1 and the outcome", r)
	}
	r = d.vigil(t, "inbox", "--for", "hal")
	if r.code != 0 || !strings.Contains(r.stdout, "failed") {
		t.Fatalf("inbox: %+v", r)
	}
	if r := d.vigil(t, "add", "timer", "1s", "--for", "hal", "-q"); r.code != 0 {
		t.Fatalf("add: %+v", r)
	}
	r = d.vigil(t, "inbox", "--for", "hal", "--wait", "30s")
	if r.code != 0 || !strings.Contains(r.stdout, "went off") {
		t.Errorf("inbox --wait: %+v, want the timer's message", r)
	}
	r = d.vigil(t, "add", "timer", "1s", "--for", "hal", "--wait", "--json")
	var w vigil.Watch
	if err := json.Unmarshal([]byte(r.stdout), &w); err != nil || r.code != 0 || w.State != vigil.StateFired {
		t.Errorf("add --wait --json: %+v (%v), want the fired watch as JSON", r, err)
	}
}

// TestNoticeFolderReport checks the notice block carries a folder
// report's summary and the first lines of its review, escaped.
func TestNoticeFolderReport(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	r := d.vigil(t, "add", "folder", d.root, "--for", "gina", "--standing", "--settle", "0", "-q", "--",
		"sh", "-c", `cat >/dev/null; printf 'LGTM: one new file\nnit: \033[31mname\033[0m it better\nthird\nfourth\nfifth\n'`)
	if r.code != 0 {
		t.Fatalf("add folder = %+v", r)
	}
	// Write a file and wait (a long-poll, as another reader) for the
	// change to land. A write that races the watch's start is in its
	// baseline: write another then.
	changed := false
	for i := 0; i < 3 && !changed; i++ {
		if err := os.WriteFile(filepath.Join(d.root, fmt.Sprintf("new%d.txt", i)), []byte("hello\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		changed = strings.Contains(d.vigil(t, "inbox", "--for", "gina", "--reader", "test", "--wait", "20s").stdout, "changed")
	}
	if !changed {
		t.Fatalf("no change reported; the watch: %+v", d.vigil(t, "show", strings.TrimSpace(r.stdout)))
	}
	r = d.vigil(t, "notice", "--for", "gina")
	// A baseline read while the file was being written (created, not yet
	// filled) reports its filling as an edit.
	if !strings.Contains(r.stdout, "\n    report: 1 added\n") && !strings.Contains(r.stdout, "\n    report: 1 edited\n") {
		t.Errorf("notice = %q; want it to carry the report, 1 added (or edited)", r.stdout)
	}
	for _, want := range []string{"\n    review: LGTM: one new file\n", "\n    nit: \\x1b[31mname\\x1b[0m it better\n"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("notice = %q; want it to contain %q", r.stdout, want)
		}
	}
	if strings.Contains(r.stdout, "fourth") {
		t.Errorf("notice = %q; want the review bounded", r.stdout)
	}
}
