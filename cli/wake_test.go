package cli

import (
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/vigil-run/vigil"
	"github.com/vigil-run/vigil/client"
	"github.com/vigil-run/vigil/deliver"
)

// TestAddWake: --wake HARNESS:SESSION and --wake-argv JSON register a
// resume delivery run in the working directory, and show lists it; bad
// input is refused naming what is wrong, and nothing is registered.
func TestAddWake(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	c, err := client.New(d.Addr(), d.Token(), nil)
	if err != nil {
		t.Fatal(err)
	}
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		args []string
		want deliver.ResumeOptions
		show string
	}{
		{[]string{"--wake", "claude:3f9f74a6-6b7c"}, deliver.ResumeOptions{Harness: "claude", Session: "3f9f74a6-6b7c"},
			"claude -p --resume 3f9f74a6-6b7c {prompt} (runs when the watch fired, failed, errored or expired)"},
		{[]string{"--wake", "codex:019d1afb"}, deliver.ResumeOptions{Harness: "codex", Session: "019d1afb"},
			"codex exec resume 019d1afb {prompt}"},
		{[]string{"--wake-argv", `["my-agent", "--resume", "s1", "{sentence}"]`}, deliver.ResumeOptions{Argv: []string{"my-agent", "--resume", "s1", "{sentence}"}},
			"my-agent --resume s1 {sentence}"},
	} {
		r := d.vigil(t, append([]string{"add", "timer", "1h", "--for", "wake", "-q"}, tt.args...)...)
		if r.code != 0 {
			t.Fatalf("add %q: %d %s", tt.args, r.code, r.stderr)
		}
		id := strings.TrimSpace(r.stdout)
		w, err := c.Watch(t.Context(), id)
		if err != nil {
			t.Fatal(err)
		}
		o, err := deliver.ParseOptions(w.Deliver)
		if err != nil || o.Resume == nil {
			t.Fatalf("add %q: deliver %s (%v), want a resume", tt.args, w.Deliver, err)
		}
		got := *o.Resume
		if got.Harness != tt.want.Harness || got.Session != tt.want.Session || !slices.Equal(got.Argv, tt.want.Argv) || got.Cwd != wd || got.On != "any" {
			t.Errorf("add %q: resume %+v, want %+v run in %s", tt.args, got, tt.want, wd)
		}
		if s := d.vigil(t, "show", id); !strings.Contains(s.stdout, "Resume") || !strings.Contains(s.stdout, tt.show) {
			t.Errorf("show %s does not list the resume %q:\n%s", id, tt.show, s.stdout)
		}
	}
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"--wake", "gemini:s1"}, "deliver.resume.harness"},
		{[]string{"--wake", "claude:"}, "deliver.resume.session"},
		{[]string{"--wake", "claude"}, "HARNESS:SESSION"},
		{[]string{"--wake-argv", `["my-agent", "{message}"]`}, "unknown placeholder"},
		{[]string{"--wake-argv", `my-agent {sentence}`}, "JSON array"},
		{[]string{"--wake", "claude:s1", "--wake-argv", `["x"]`}, "not both"},
	} {
		r := d.vigil(t, append([]string{"add", "timer", "1h", "--for", "refused", "-q"}, tt.args...)...)
		if r.code == 0 || !strings.Contains(r.stderr, tt.want) {
			t.Errorf("add %q: exit %d, stderr %q; want a refusal naming %q", tt.args, r.code, r.stderr, tt.want)
		}
	}
	page, err := c.Watches(t.Context(), vigil.ListRequest{Recipient: "refused"})
	if err != nil || len(page.Watches) != 0 {
		t.Errorf("refused adds registered %d watches (%v), want none", len(page.Watches), err)
	}
}
