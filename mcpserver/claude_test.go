package mcpserver_test

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vigil-run/vigil/daemon"
)

// claudeCode is the real Claude Code CLI with "vigil mcp --channel --for
// my-project" registered in a HOME of its own, behind a wrapper that logs
// what each side writes: in.log the client's messages, out.log the
// server's, one a line.
type claudeCode struct {
	t              *testing.T
	bin, home, dir string
	in, out        string
}

// newClaudeCode finds the CLI (VIGIL_TEST_CLAUDE, else claude on PATH), or
// skips the test saying so.
func newClaudeCode(t *testing.T, d *daemon.Daemon) *claudeCode {
	t.Helper()
	bin := os.Getenv("VIGIL_TEST_CLAUDE")
	if bin == "" {
		var err error
		if bin, err = exec.LookPath("claude"); err != nil {
			t.Skip("SKIPPED: no Claude Code CLI (set VIGIL_TEST_CLAUDE to its binary, e.g. node_modules/@anthropic-ai/claude-code/bin/claude.exe)")
		}
	}
	logs := t.TempDir()
	c := &claudeCode{t: t, bin: bin, home: t.TempDir(), dir: t.TempDir(), in: filepath.Join(logs, "in.log"), out: filepath.Join(logs, "out.log")}
	wrapper := filepath.Join(logs, "vigil-mcp.sh")
	script := "#!/bin/sh\ntee -a '" + c.in + "' | '" + os.Args[0] + "' mcp --channel --for my-project | tee -a '" + c.out + "'\n"
	if err := os.WriteFile(wrapper, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	c.run("mcp", "add", "vigil", "-e", childEnv+"=1", "-e", "VIGIL_ADDR="+d.Addr(), "-e", "VIGIL_TOKEN="+d.Token(), "--", wrapper)
	return c
}

func (c *claudeCode) env() []string {
	return []string{"HOME=" + c.home, "PATH=" + os.Getenv("PATH"), "TERM=xterm", "DISABLE_AUTOUPDATER=1", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1"}
}

func (c *claudeCode) run(args ...string) string {
	c.t.Helper()
	cmd := exec.CommandContext(c.t.Context(), c.bin, args...)
	cmd.Dir = c.dir
	cmd.Env = c.env()
	out, err := cmd.CombinedOutput()
	if err != nil {
		c.t.Fatalf("claude %q: %v\n%s", args, err, out)
	}
	return string(out)
}

// wire returns the messages each side wrote, by method (a response under
// the method of the request it answers, as "-> initialize", then its
// result or error).
func (c *claudeCode) wire() (client, server []string) {
	c.t.Helper()
	methods := map[string]string{}
	read := func(path string, side *[]string) {
		b, err := os.ReadFile(path)
		if err != nil {
			c.t.Fatalf("the wrapper logged nothing: %v", err)
		}
		for line := range strings.Lines(string(b)) {
			var m rawMsg
			if err := json.Unmarshal([]byte(line), &m); err != nil {
				c.t.Fatalf("a line on the wire that is not JSON: %q", line)
			}
			switch {
			case m.Method != "" && m.ID != nil:
				methods[string(m.ID)] = m.Method
				*side = append(*side, m.Method)
			case m.Method != "":
				*side = append(*side, m.Method)
			default:
				*side = append(*side, "-> "+methods[string(m.ID)]+" "+string(m.Result)+string(m.Error))
			}
		}
	}
	read(c.in, &client)
	read(c.out, &server)
	return client, server
}

// TestClaudeCodeMCPList runs the real Claude Code's health check, "claude
// mcp list", which starts "vigil mcp --channel" and speaks MCP to it: the
// channel's capability and instructions do not stop a real client from
// connecting, and the handshake it makes is the one in which Claude Code
// takes channel events: its server/discover probe of the 2026-07-28
// protocol is refused, and it initializes at 2025-11-25. (A live channel
// event needs a signed-in account: TestChannelClaudeHandshake speaks the
// same messages with a raw client and receives it.)
func TestClaudeCodeMCPList(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	c := newClaudeCode(t, d)
	out := c.run("mcp", "list")
	if !strings.Contains(out, "vigil:") || !strings.Contains(out, "✔ Connected") {
		t.Errorf("claude mcp list = %q, want vigil connected", out)
	}
	client, server := c.wire()
	t.Logf("client wrote %q", client)
	if len(client) < 2 || client[0] != "server/discover" || client[1] != "initialize" {
		t.Errorf("Claude Code wrote %q, want server/discover, then initialize", client)
	}
	var refused, legacy bool
	for _, m := range server {
		refused = refused || strings.HasPrefix(m, "-> server/discover ") && strings.Contains(m, `"code":-32022`)
		legacy = legacy || strings.HasPrefix(m, "-> initialize ") && strings.Contains(m, `"protocolVersion":"2025-11-25"`)
	}
	if !refused || !legacy {
		for i, m := range server {
			if len(m) > 200 {
				server[i] = m[:200] + "…"
			}
		}
		t.Errorf("the server wrote %q, want server/discover refused (-32022) and initialize answered at 2025-11-25", server)
	}
}
