package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vigil-run/vigil"
	"github.com/vigil-run/vigil/client"
)

// lockedBuffer is a bytes.Buffer safe for a writer and a reader.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestWaitShowsProgress: a watch added with --progress publishes an event
// after every check, even when the observation does not change (nothing is
// written then), and the live line of vigil wait counts them.
func TestWaitShowsProgress(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	r := d.vigil(t, "add", "command", "--for", "p", "--every", "1s", "--progress", "-q", "--shell", "echo same; exit 1")
	if r.code != 0 {
		t.Fatalf("add --progress: %d %s", r.code, r.stderr)
	}
	id := strings.TrimSpace(r.stdout)
	c, err := client.New(d.Addr(), d.Token(), nil)
	if err != nil {
		t.Fatal(err)
	}
	w, err := c.Watch(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	var out lockedBuffer
	stop := startLive(t.Context(), &out, c, w)
	defer stop()
	for end := time.Now().Add(15 * time.Second); !strings.Contains(out.String(), "· 3 checks"); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("the live line never counted 3 checks: %q", out.String())
		}
	}
}

// TestOnDone: --on-done runs the command with the outcome on stdin once
// the watch fires; the receipt reads delivered.
func TestOnDone(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	out := filepath.Join(d.root, "outcome.json")
	r := d.vigil(t, "add", "timer", "1s", "--for", "cmd", "--on-done", "cat > "+out, "-q")
	if r.code != 0 {
		t.Fatalf("add --on-done: %d %s", r.code, r.stderr)
	}
	id := strings.TrimSpace(r.stdout)
	c, err := client.New(d.Addr(), d.Token(), nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 15*time.Second)
	defer cancel()
	for {
		w, err := c.Watch(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if len(w.Receipts) == 1 && w.Receipts[0].Status == vigil.ReceiptDelivered {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("receipts %+v after 15s, want one delivered", w.Receipts)
		case <-time.After(50 * time.Millisecond):
		}
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	var p struct {
		WatchID string      `json:"watch_id"`
		State   vigil.State `json:"state"`
	}
	if err := json.Unmarshal(b, &p); err != nil || p.WatchID != id || p.State != vigil.StateFired {
		t.Errorf("stdin of the command = %s (%v), want the fired outcome of %s", b, err, id)
	}
}

// TestOnDoneAndOnFail: a watch takes both commands; show says which
// outcomes each runs for; when it expires, its on-fail command runs (a
// timeout is a failure to whoever waits) and its on-done command does not.
func TestOnDoneAndOnFail(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	done, fail := filepath.Join(d.root, "done"), filepath.Join(d.root, "fail")
	r := d.vigil(t, "add", "file", filepath.Join(d.root, "never"), "--every", "1s", "--deadline", "2s", "--for", "cmds",
		"--on-done", "echo done > "+done, "--on-fail", "echo fail > "+fail, "-q")
	if r.code != 0 {
		t.Fatalf("add --on-done --on-fail: %d %s", r.code, r.stderr)
	}
	id := strings.TrimSpace(r.stdout)
	show := d.vigil(t, "show", id).stdout
	for _, want := range []string{"echo done > " + done + " (runs when the watch fired)", "echo fail > " + fail + " (runs when the watch failed, errored or expired)"} {
		if !strings.Contains(show, want) {
			t.Errorf("show =\n%s\nwant it to say %q", show, want)
		}
	}
	if r := d.vigil(t, "wait", id); r.code != ExitExpired {
		t.Fatalf("wait: exit %d (%s), want expired", r.code, r.stdout)
	}
	c, err := client.New(d.Addr(), d.Token(), nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 15*time.Second)
	defer cancel()
	for {
		w, err := c.Watch(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if len(w.Receipts) == 1 && w.Receipts[0].Status == vigil.ReceiptDelivered {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("receipts %+v after 15s, want the command delivered", w.Receipts)
		case <-time.After(50 * time.Millisecond):
		}
	}
	if b, err := os.ReadFile(fail); err != nil || string(b) != "fail\n" {
		t.Errorf("the on-fail command wrote %q (%v); want it run on expiry", b, err)
	}
	if _, err := os.Stat(done); err == nil {
		t.Errorf("the on-done command ran for an expiry")
	}
}
