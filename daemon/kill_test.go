package daemon_test

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/vigil-run/vigil"
	"github.com/vigil-run/vigil/internal/daemontest"
)

// TestKilledMidSend kills a real vigil process (SIGKILL) while a webhook
// receiver holds its request, after the settlement committed and before
// the answer: after a restart the receipt reads unknown and the receiver
// has had exactly one request.
func TestKilledMidSend(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the vigil binary")
	}
	t.Parallel()
	bin := filepath.Join(t.TempDir(), "vigil")
	build := exec.Command("go", "build", "-o", bin, "../cmd/vigil")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}

	var hits atomic.Int32
	got := make(chan struct{}, 4)
	release := make(chan struct{})
	recv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		got <- struct{}{}
		select { // hold the request: the daemon dies waiting for the answer
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer recv.Close()
	defer close(release)

	dataDir := filepath.Join(t.TempDir(), "data")
	home := t.TempDir()
	addr := freeAddr(t)
	start := func() *exec.Cmd {
		t.Helper()
		cmd := exec.Command(bin, "serve", "--listen", addr, "--data-dir", dataDir)
		cmd.Env = []string{"HOME=" + home, "PATH=" + os.Getenv("PATH")}
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
		return cmd
	}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()

	first := start()
	c := daemontest.ReadyClient(ctx, t, addr, dataDir)
	w, err := c.Register(ctx, vigil.RegisterRequest{Kind: vigil.KindTimer, Recipient: "agent", Predicate: json.RawMessage(`{"in":"1s"}`),
		Deliver: json.RawMessage(`{"webhook":{"url":"` + recv.URL + `/hook"}}`)})
	if err != nil {
		t.Fatalf("Register: %v", err)
	}
	select {
	case <-got:
	case <-ctx.Done():
		t.Fatal("the receiver got no request within 30s")
	}
	// The request is on the wire and unanswered: the receipt says sending.
	if w, err := c.Watch(ctx, w.ID); err != nil || len(w.Receipts) != 1 || w.Receipts[0].Status != vigil.ReceiptSending {
		t.Fatalf("before the kill: %+v, %v; want one sending receipt", w, err)
	}
	if err := first.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = first.Wait()

	start()
	c = daemontest.ReadyClient(ctx, t, addr, dataDir)
	after, err := c.Watch(ctx, w.ID)
	if err != nil {
		t.Fatal(err)
	}
	if after.State != vigil.StateFired || len(after.Receipts) != 1 || after.Receipts[0].Status != vigil.ReceiptUnknown {
		t.Fatalf("after the restart: state %s, receipts %+v; want fired with one unknown receipt", after.State, after.Receipts)
	}
	// Unknown is never resent: give a resend the time it would take.
	select {
	case <-got:
		t.Errorf("the receiver got a second request after the restart")
	case <-time.After(500 * time.Millisecond):
	}
	if n := hits.Load(); n != 1 {
		t.Errorf("the receiver got %d requests, want 1", n)
	}
}

func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return "127.0.0.1:" + strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
}
