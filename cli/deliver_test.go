package cli

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vigil-run/vigil"
	"github.com/vigil-run/vigil/deliver/webhook"
)

// TestWebhookRejected: receivers answering 410 and 400 leave the receipt
// undeliverable, shown by show and ls; the watch still fired and its
// mailbox message is there. The receiver checks each signature with the
// daemon's secret.
func TestWebhookRejected(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	var (
		mu    sync.Mutex
		count = map[string]int{}
		bad   []string
	)
	var secret string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		defer mu.Unlock()
		count[r.URL.Path]++
		if err := webhook.Verify(secret, r.Header, body, time.Now(), 0); err != nil {
			bad = append(bad, r.URL.Path+": "+err.Error())
		}
		if r.URL.Path == "/gone" {
			w.WriteHeader(http.StatusGone)
			return
		}
		w.WriteHeader(http.StatusBadRequest)
	}))
	defer srv.Close()
	b, err := os.ReadFile(filepath.Join(d.dataDir, "webhook.secret"))
	if err != nil {
		t.Fatalf("the daemon wrote no webhook secret: %v", err)
	}
	secret = strings.TrimSpace(string(b))
	if fi, _ := os.Stat(filepath.Join(d.dataDir, "webhook.secret")); fi.Mode().Perm() != 0o600 {
		t.Errorf("webhook.secret mode = %v, want 0600", fi.Mode().Perm())
	}

	ids := map[string]string{}
	for _, path := range []string{"/gone", "/bad"} {
		r := d.vigil(t, "add", "timer", "1s", "--for", "hooked", "--webhook", srv.URL+path, "-q")
		if r.code != 0 {
			t.Fatalf("add --webhook: %d %s", r.code, r.stderr)
		}
		ids[path] = strings.TrimSpace(r.stdout)
	}
	want := map[string]string{"/gone": "HTTP 410 Gone", "/bad": "HTTP 400 Bad Request"}
	for path, id := range ids {
		var w vigil.Watch
		for end := time.Now().Add(15 * time.Second); ; time.Sleep(50 * time.Millisecond) {
			r := d.vigil(t, "show", id, "--json")
			if err := json.Unmarshal([]byte(r.stdout), &w); err != nil {
				t.Fatalf("show --json: %v: %s", err, r.stdout)
			}
			if len(w.Receipts) == 1 && w.Receipts[0].Status == vigil.ReceiptUndeliverable {
				break
			}
			if time.Now().After(end) {
				t.Fatalf("%s: receipts %+v after 15s, want undeliverable", path, w.Receipts)
			}
		}
		if w.State != vigil.StateFired {
			t.Errorf("%s: state %s, want fired: a rejected push is not the watch's failure", path, w.State)
		}
		show := d.vigil(t, "show", id).stdout
		if !strings.Contains(show, "webhook undeliverable after 1 attempt: "+want[path]) {
			t.Errorf("%s: show does not give the receipt:\n%s", path, show)
		}
		if strings.Contains(show, strings.TrimPrefix(secret, "whsec_")) {
			t.Errorf("show holds the daemon's secret")
		}
	}
	ls := d.vigil(t, "ls", "--for", "hooked").stdout
	if n := strings.Count(ls, "fired, webhook undeliverable"); n != 2 {
		t.Errorf("ls marks %d watches undeliverable, want 2:\n%s", n, ls)
	}
	inbox := d.vigil(t, "inbox", "--for", "hooked", "--json")
	for _, id := range ids {
		if !strings.Contains(inbox.stdout, id) {
			t.Errorf("the mailbox has no message of %s:\n%s", id, inbox.stdout)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if count["/gone"] != 1 || count["/bad"] != 1 {
		t.Errorf("receiver got %v, want one request each: a rejection is not retried", count)
	}
	if len(bad) > 0 {
		t.Errorf("signatures that did not verify: %v", bad)
	}
}

// TestDeliverSecretNeverShown: a watch's own webhook secret goes into the
// store but never comes back through add, show or ls.
func TestDeliverSecretNeverShown(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	const secret = "whsec_c2VjcmV0LXNlY3JldC1zZWNyZXQtc2VjcmV0LXh5eg=="
	opts := `{"webhook":{"url":"http://127.0.0.1:9/hook","secret":"` + secret + `"},"progress":true}`
	add := d.vigil(t, "add", "timer", "1h", "--for", "s", "--deliver", opts, "--json")
	if add.code != 0 {
		t.Fatalf("add: %d %s", add.code, add.stderr)
	}
	var w vigil.Watch
	if err := json.Unmarshal([]byte(add.stdout), &w); err != nil {
		t.Fatal(err)
	}
	for what, out := range map[string]string{
		"add":       add.stdout,
		"show":      d.vigil(t, "show", w.ID).stdout,
		"show json": d.vigil(t, "show", w.ID, "--json").stdout,
		"ls json":   d.vigil(t, "ls", "--json").stdout,
	} {
		if strings.Contains(out, strings.TrimPrefix(secret, "whsec_")) {
			t.Errorf("%s shows the secret:\n%s", what, out)
		}
		if what != "ls json" && !strings.Contains(out, "whsec_…redacted") {
			t.Errorf("%s does not show the secret as redacted:\n%s", what, out)
		}
	}
	// Bad delivery options are refused at registration, nothing written.
	for _, args := range [][]string{
		{"--webhook", "ftp://example.com/x"},
		{"--deliver", `{"webhook":{"url":"https://example.com/x","secret":"not-a-secret"}}`},
		{"--email", "ops@example.com"},
	} {
		r := d.vigil(t, append([]string{"add", "timer", "1h", "--for", "refused"}, args...)...)
		if r.code == 0 {
			t.Errorf("add %v succeeded, want a refusal", args)
		}
	}
	if ls := d.vigil(t, "ls", "--for", "refused", "--json").stdout; strings.Contains(ls, `"id"`) {
		t.Errorf("refused registrations left watches:\n%s", ls)
	}
}
