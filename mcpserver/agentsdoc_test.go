package mcpserver_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/vigil-run/vigil"
	"github.com/vigil-run/vigil/client"
	"github.com/vigil-run/vigil/daemon"
)

// The worked examples of docs/agents.md that are marked
// <!-- tested: NAME --> are what this test gets from a real daemon, with
// ids, times and ports made generic on both sides.

var (
	docULID = regexp.MustCompile(`\b[0-9A-HJKMNP-TV-Z]{26}\b`)
	docTime = regexp.MustCompile(`\d{4}-\d\d-\d\d( |T)\d\d:\d\d:\d\d(\.\d+)?( UTC|Z)`)
	docAddr = regexp.MustCompile(`127\.0\.0\.1:\d+`)
	docMark = regexp.MustCompile("(?s)<!-- tested: ([a-z-]+) -->\\s*```[a-z]*\\n(.*?)```")
)

func docNormalize(s string) string {
	s = docULID.ReplaceAllString(s, "<ID>")
	s = docTime.ReplaceAllString(s, "<TIME>")
	s = docAddr.ReplaceAllString(s, "127.0.0.1:7474")
	return strings.TrimSpace(s)
}

// docBlocks returns the marked blocks of docs/agents.md by name.
func docBlocks(t *testing.T) map[string]string {
	t.Helper()
	b, err := os.ReadFile("../docs/agents.md")
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, m := range docMark.FindAllStringSubmatch(string(b), -1) {
		out[m[1]] = m[2]
	}
	return out
}

// runVigil runs the vigil command tree (this test binary as a child)
// against d and returns its stdout and stderr.
func runVigil(t *testing.T, d *daemon.Daemon, args ...string) (string, string) {
	t.Helper()
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = []string{childEnv + "=1", "HOME=" + t.TempDir(), "USER=tester", "VIGIL_ADDR=" + d.Addr(), "VIGIL_TOKEN=" + d.Token()}
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("vigil %q: %v\nstderr: %s", args, err, errb.String())
	}
	return out.String(), errb.String()
}

func TestAgentsDocExamples(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	cl, err := client.New(d.Addr(), d.Token(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.CloseIdleConnections()
	ctx := t.Context()
	got := map[string]string{}

	// The channel: a timer fires while a Claude Code session is connected.
	c, _, stop := vigilChannel(t, d, "my-project")
	if _, err := cl.Register(ctx, vigil.RegisterRequest{Kind: vigil.KindTimer, Predicate: json.RawMessage(`{"in":"1s"}`),
		Recipient: "my-project", Note: "check the deploy"}); err != nil {
		t.Fatal(err)
	}
	b, _ := json.MarshalIndent(c.next(), "", "  ")
	got["channel-event"] = string(b)
	stop()
	// The hook shows it again at the next prompt (the client did not say
	// it takes channel events), and marks it read.
	if out, _ := runVigil(t, d, "notice", "--for", "my-project"); !strings.Contains(out, "check the deploy") {
		t.Errorf("the hook after the channel's push = %q, want the timer's outcome", out)
	}

	// Notes, by the CLI, and the hook that shows them.
	out, _ := runVigil(t, d, "note", "--for", "my-project", "nightly: 2 flaky tests",
		"TestLogin times out on CI (3 of the last 10 runs)\nTestExport depends on test order")
	got["note-cli"] = "$ vigil note --for my-project \"nightly: 2 flaky tests\" \"$(cat findings.txt)\"\n" + out

	// A note over HTTP.
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, d.URL()+"/v1/recipients/other-agent/notes",
		strings.NewReader(`{"title": "the staging DB was reset", "body": "re-run the migrations before testing"}`))
	req.Header.Set("Authorization", "Bearer "+d.Token())
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var pretty bytes.Buffer
	if resp.StatusCode != http.StatusCreated || json.Indent(&pretty, body, "", "  ") != nil {
		t.Fatalf("POST notes = %d %s", resp.StatusCode, body)
	}
	got["note-http"] = pretty.String()

	// Any MCP client: the inbox resource in resources/list.
	cs, _ := vigilMCP(t, d, nil, "--for", "my-project")
	rl, err := cs.ListResources(ctx, nil)
	if err != nil || len(rl.Resources) != 1 {
		t.Fatalf("resources/list = %+v, %v", rl, err)
	}
	r := rl.Resources[0]
	b, _ = json.MarshalIndent(map[string]any{"resources": []map[string]string{{"uri": r.URI, "name": r.Name, "title": r.Title, "mimeType": r.MIMEType}}}, "", "  ")
	got["resources-list"] = string(b)
	rr, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: r.URI})
	if err != nil || len(rr.Contents) != 1 {
		t.Fatalf("resources/read = %+v, %v", rr, err)
	}
	pretty.Reset()
	if err := json.Indent(&pretty, []byte(rr.Contents[0].Text), "", "  "); err != nil {
		t.Fatal(err)
	}
	got["resource-read"] = pretty.String()

	// The hook shows the note, and marks it read.
	out, _ = runVigil(t, d, "notice", "--for", "my-project")
	got["notice-note"] = out

	docs := docBlocks(t)
	for name, g := range got {
		want, ok := docs[name]
		if !ok {
			t.Errorf("docs/agents.md has no block marked <!-- tested: %s -->; it would be:\n%s", name, g)
			continue
		}
		if diff := cmp.Diff(docNormalize(want), docNormalize(g)); diff != "" {
			t.Errorf("docs/agents.md block %s differs from what the daemon does (-doc +real):\n%s", name, diff)
		}
	}
	for name := range docs {
		if _, ok := got[name]; !ok {
			t.Errorf("docs/agents.md marks a block %q that no test tries", name)
		}
	}
}
