//go:build unix

package mcpserver_test

import (
	"bufio"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestClaudeCodeChannelGate starts the real Claude Code interactively (in
// a pseudo-terminal, with no account) with the channel enabled for the
// session, and reads its debug log for the decision on the channel: it
// must not be skipped for the protocol the connection negotiated, which
// Claude Code 2.1.328 does to a channel on 2026-07-28. Without an account
// it is then skipped for a later reason (the feature is not available to
// this session), which only a signed-in session passes.
func TestClaudeCodeChannelGate(t *testing.T) {
	t.Parallel()
	pty, err := exec.LookPath("script")
	if err != nil {
		t.Skip("SKIPPED: no script(1) to give Claude Code a terminal")
	}
	d := startDaemon(t)
	c := newClaudeCode(t, d)
	// No onboarding screens and a trusted folder: the session starts
	// and connects its MCP servers at once.
	cfgPath := filepath.Join(c.home, ".claude.json")
	var cfg map[string]any
	b, err := os.ReadFile(cfgPath)
	if err != nil || json.Unmarshal(b, &cfg) != nil {
		t.Fatalf("reading %s: %v", cfgPath, err)
	}
	cfg["hasCompletedOnboarding"] = true
	projects, _ := cfg["projects"].(map[string]any)
	for _, p := range projects {
		if p, ok := p.(map[string]any); ok {
			p["hasTrustDialogAccepted"] = true
		}
	}
	if b, err = json.Marshal(cfg); err != nil || os.WriteFile(cfgPath, b, 0o600) != nil {
		t.Fatalf("writing %s: %v", cfgPath, err)
	}

	debug := filepath.Join(t.TempDir(), "debug.log")
	cmd := exec.Command(pty, "-q", "-c", c.bin+" --dangerously-load-development-channels server:vigil --debug-file "+debug, os.DevNull)
	cmd.Dir, cmd.Env = c.dir, c.env()
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
		_ = cmd.Wait()
	}()
	const bound = 60 * time.Second
	var gate string
	for start := time.Now(); gate == "" && time.Since(start) < bound; time.Sleep(100 * time.Millisecond) {
		f, err := os.Open(debug)
		if err != nil {
			continue
		}
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if _, after, ok := strings.Cut(sc.Text(), `MCP server "vigil": Channel notifications `); ok {
				gate = after
			}
		}
		f.Close()
	}
	if gate == "" {
		t.Skipf("SKIPPED: Claude Code logged no decision on the channel within %s (another version, or it could not start here)", bound)
	}
	t.Logf("Claude Code's channel decision: %s", gate)
	if strings.Contains(gate, "protocol") {
		t.Errorf("Claude Code skipped the channel for its protocol: %s", gate)
	}
}
