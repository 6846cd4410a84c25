package main

import (
	"context"
	"encoding/json"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/vigil-run/vigil"
	"github.com/vigil-run/vigil/internal/daemontest"
	"github.com/vigil-run/vigil/internal/proc/proctest"
)

// TestCommandDeliveryEndsWhatLeftTheGroup: the vigil binary runs a
// command delivery's program under its own `vigil reap` (main says it
// serves it), so a process the program started in a session of its own
// (setsid, as a daemon does) is killed when the program exits: it ran on
// after the delivery before, out of the process group's reach.
func TestCommandDeliveryEndsWhatLeftTheGroup(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the vigil binary")
	}
	t.Parallel()
	bin := vigilBin(t)
	dir := t.TempDir()
	dataDir := filepath.Join(dir, "data")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	logf, err := os.Create(filepath.Join(dir, "daemon.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	cmd := exec.Command(bin, "serve", "--listen", addr, "--data-dir", dataDir, "--allow-exec")
	cmd.Env = []string{"HOME=" + dir, "PATH=" + os.Getenv("PATH")}
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		_ = cmd.Wait()
		if t.Failed() {
			b, _ := os.ReadFile(logf.Name())
			t.Logf("the daemon's log:\n%s", tail(string(b), 4000))
		}
	})
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	c := daemontest.ReadyClient(ctx, t, addr, dataDir)

	bg := filepath.Join(dir, "bg.pid")
	shell := `setsid -f sh -c 'echo $$ > ` + bg + `.tmp; mv ` + bg + `.tmp ` + bg + `; exec sleep 60' </dev/null >/dev/null 2>&1; ` +
		`while [ ! -s ` + bg + ` ]; do sleep 0.01; done`
	deliver, _ := json.Marshal(map[string]any{"command": map[string]any{"shell": shell}})
	w, err := c.Register(ctx, vigil.RegisterRequest{Kind: vigil.KindTimer, Recipient: "agent",
		Predicate: json.RawMessage(`{"in":"1s"}`), Deliver: deliver})
	if err != nil {
		t.Fatal(err)
	}
	for {
		got, err := c.Watch(ctx, w.ID)
		if err != nil {
			t.Fatal(err)
		}
		if len(got.Receipts) == 1 && got.Receipts[0].Status != vigil.ReceiptSending && got.Receipts[0].Status != vigil.ReceiptRetrying {
			if got.Receipts[0].Status != vigil.ReceiptDelivered {
				t.Fatalf("the command's receipt is %+v, want delivered", got.Receipts[0])
			}
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("no receipt for the command within 60s: %+v", got.Receipts)
		case <-time.After(20 * time.Millisecond):
		}
	}
	proctest.RequireGone(t, bg)
}
