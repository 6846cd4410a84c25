package daemon_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vigil-run/vigil"
)

// TestDeliveriesRunUnderTheConfiguredReaper: Config.Reaper names the
// program each command and resume delivery's program runs under (the
// vigil binary's `reap`, which `vigil serve` sets); here a shell script
// that speaks the reaper's protocol (grace, path, argv; "exit N" on fd 3)
// and records each program it runs. A daemon that left it nil (as one
// embedded in another program does) starts its programs directly, as
// every other test here shows: its test binary is no reaper.
func TestDeliveriesRunUnderTheConfiguredReaper(t *testing.T) {
	t.Parallel()
	rec := filepath.Join(t.TempDir(), "reaped")
	cfg := testConfig(t.TempDir(), t.TempDir())
	cfg.Reaper = []string{"/bin/sh", "-c", `printf '%s\n' "$3" >> '` + rec + `'; shift 2; "$@"; echo "exit $?" >&3`, "fake-reaper"}
	d := start(t, cfg)
	c := newClient(t, d)
	deliver, _ := json.Marshal(map[string]any{
		"command": map[string]any{"argv": []string{"/bin/sh", "-c", "cat > /dev/null"}},
		"resume":  map[string]any{"argv": []string{"/bin/echo", "{watch_id}"}},
	})
	w, err := c.Register(t.Context(), vigil.RegisterRequest{Kind: vigil.KindTimer, Recipient: "agent",
		Predicate: json.RawMessage(`{"in":"1s"}`), Deliver: deliver})
	if err != nil {
		t.Fatal(err)
	}
	waitChannel(t, c, w.ID, "command", vigil.ReceiptDelivered)
	waitChannel(t, c, w.ID, "resume", vigil.ReceiptDelivered)
	b, err := os.ReadFile(rec)
	if err != nil {
		t.Fatalf("the reaper ran nothing: %v", err)
	}
	if got := strings.Fields(string(b)); len(got) != 2 || !strings.Contains(string(b), "/bin/sh\n") || !strings.Contains(string(b), "/bin/echo\n") {
		t.Fatalf("the reaper ran %q; want the command's /bin/sh and the resume's /bin/echo", got)
	}
}
