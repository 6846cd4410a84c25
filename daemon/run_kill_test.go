package daemon_test

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/vigil-run/vigil"
	"github.com/vigil-run/vigil/internal/daemontest"
)

// TestRunSurvivesSIGKILL kills a real vigil process (SIGKILL) while a run
// watch's command is going: the command goes on under its supervisor, and
// the restarted daemon reports its outcome, exactly once.
func TestRunSurvivesSIGKILL(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the vigil binary")
	}
	t.Parallel()
	bin := filepath.Join(t.TempDir(), "vigil")
	if out, err := exec.Command("go", "build", "-o", bin, "../cmd/vigil").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	dataDir := filepath.Join(t.TempDir(), "data")
	home := t.TempDir()
	addr := freeAddr(t)
	start := func() *exec.Cmd {
		t.Helper()
		cmd := exec.Command(bin, "serve", "--listen", addr, "--data-dir", dataDir, "--allow-exec")
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
	starts := filepath.Join(t.TempDir(), "starts")
	w, err := c.Register(ctx, vigil.RegisterRequest{Kind: vigil.KindRun, Recipient: "agent", Observe: true,
		Predicate: json.RawMessage(`{"shell":"echo started >> ` + starts + `; sleep 2; echo survived"}`)})
	if err != nil {
		t.Fatalf("Register: %v", err)
	}
	if w.State != vigil.StatePending || w.LastObservation == nil || !strings.HasPrefix(w.LastObservation.Summary, "running") {
		t.Fatalf("before the kill: %s %+v, want pending and running", w.State, w.LastObservation)
	}
	if err := first.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = first.Wait()

	start()
	c = daemontest.ReadyClient(ctx, t, addr, dataDir)
	got, err := c.Wait(ctx, w.ID, 15*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if got.State != vigil.StateFired || got.Outcome.Observation.Facts["tail"] != "survived\n" {
		t.Fatalf("after the restart: %s %+v, want fired with the command's output", got.State, got.Outcome)
	}
	zero := int64(0)
	page, err := c.Messages(ctx, vigil.MessagesRequest{Recipient: "agent", After: &zero})
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Messages) != 1 || page.Messages[0].Type != vigil.MessageFired {
		t.Fatalf("mailbox = %+v, want exactly one fired message", page.Messages)
	}
	if b, _ := os.ReadFile(starts); string(b) != "started\n" {
		t.Fatalf("the command started %q, want once", b)
	}
}
