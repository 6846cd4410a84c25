package mcpserver_test

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestClaudeCodeMCPList registers "vigil mcp --channel" with the real
// Claude Code CLI (VIGIL_TEST_CLAUDE, else claude on PATH) and runs its
// health check, "claude mcp list", which starts the server and speaks MCP
// to it: the channel's experimental capability and instructions do not
// stop a real client from connecting. (A live channel event needs a
// signed-in account: TestChannelStdio covers the events with a raw
// client.)
func TestClaudeCodeMCPList(t *testing.T) {
	t.Parallel()
	bin := os.Getenv("VIGIL_TEST_CLAUDE")
	if bin == "" {
		var err error
		if bin, err = exec.LookPath("claude"); err != nil {
			t.Skip("SKIPPED: no Claude Code CLI (set VIGIL_TEST_CLAUDE to its binary, e.g. node_modules/@anthropic-ai/claude-code/bin/claude.exe)")
		}
	}
	d := startDaemon(t)
	home, dir := t.TempDir(), t.TempDir()
	claude := func(args ...string) string {
		t.Helper()
		cmd := exec.CommandContext(t.Context(), bin, args...)
		cmd.Dir = dir
		cmd.Env = []string{"HOME=" + home, "PATH=" + os.Getenv("PATH"), "DISABLE_AUTOUPDATER=1", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1"}
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("claude %q: %v\n%s", args, err, out)
		}
		return string(out)
	}
	claude("mcp", "add", "vigil", "-e", childEnv+"=1", "-e", "VIGIL_ADDR="+d.Addr(), "-e", "VIGIL_TOKEN="+d.Token(),
		"--", os.Args[0], "mcp", "--channel", "--for", "my-project")
	out := claude("mcp", "list")
	if !strings.Contains(out, "vigil:") || !strings.Contains(out, "✔ Connected") {
		t.Errorf("claude mcp list = %q, want vigil connected", out)
	}
}
