package cli

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/vigil-run/vigil"
	"github.com/vigil-run/vigil/client"
)

// TestWakeExamples runs the worked examples of docs/agents.md ("Resume a
// session") against a real daemon with fake claude, codex and my-agent
// executables first on its PATH, which record their argv and working
// directory: each runs once, with the prompt (or the sentence) as one
// argument, in the directory vigil add ran in. Not parallel: it sets PATH
// for the daemon in this process.
func TestWakeExamples(t *testing.T) {
	bin, rec := t.TempDir(), t.TempDir()
	script := "#!/bin/sh\nr='" + rec + "'/\"$VIGIL_WATCH_ID\"\necho run >> \"$r.runs\"\npwd > \"$r.pwd\"\n" +
		"printf '%s\\0' \"$(basename \"$0\")\" \"$@\" > \"$r.argv\"\n"
	for _, name := range []string{"claude", "codex", "my-agent"} {
		if err := os.WriteFile(filepath.Join(bin, name), []byte(script), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("PATH", bin+":"+os.Getenv("PATH"))
	d := startDaemon(t)
	c, err := client.New(d.Addr(), d.Token(), nil)
	if err != nil {
		t.Fatal(err)
	}
	wd, _ := os.Getwd()
	for _, tt := range []struct {
		args []string
		argv func(w *vigil.Watch) []string
	}{
		{[]string{"--note", "if green: open the PR", "--wake", "claude:3f9f74a6-6b7c-4a3e-9e1d-2f1f0a9b8c7d"}, func(w *vigil.Watch) []string {
			return []string{"claude", "-p", "--resume", "3f9f74a6-6b7c-4a3e-9e1d-2f1f0a9b8c7d",
				"vigil: your watch " + w.ID + " (timer) fired: " + w.Outcome.Sentence + "\nNote: if green: open the PR\nDetails: vigil show " + w.ID + " (or the watch_get tool)."}
		}},
		{[]string{"--note", "if green: open the PR", "--wake", "codex:019d1afb-b2c7-72d3-b240-f3ee9d31b2c9"}, func(w *vigil.Watch) []string {
			return []string{"codex", "exec", "resume", "019d1afb-b2c7-72d3-b240-f3ee9d31b2c9",
				"vigil: your watch " + w.ID + " (timer) fired: " + w.Outcome.Sentence + "\nNote: if green: open the PR\nDetails: vigil show " + w.ID + " (or the watch_get tool)."}
		}},
		{[]string{"--wake-argv", `["my-agent", "resume", "--session", "s-41", "--message", "{sentence}", "{facts.none}"]`}, func(w *vigil.Watch) []string {
			return []string{"my-agent", "resume", "--session", "s-41", "--message", w.Outcome.Sentence, ""}
		}},
	} {
		r := d.vigil(t, append([]string{"add", "timer", "1s", "--for", "my-project", "-q"}, tt.args...)...)
		if r.code != 0 {
			t.Fatalf("add %q: %d %s", tt.args, r.code, r.stderr)
		}
		id := strings.TrimSpace(r.stdout)
		w := waitResumed(t, c, id)
		b, err := os.ReadFile(filepath.Join(rec, id+".argv"))
		if err != nil {
			t.Fatal(err)
		}
		if got, want := strings.Split(strings.TrimSuffix(string(b), "\x00"), "\x00"), tt.argv(w); !slices.Equal(got, want) {
			t.Errorf("add %q ran %q, want %q", tt.args, got, want)
		}
		if pwd, _ := os.ReadFile(filepath.Join(rec, id+".pwd")); strings.TrimSpace(string(pwd)) != wd {
			t.Errorf("add %q ran in %q, want %s", tt.args, pwd, wd)
		}
		if runs, _ := os.ReadFile(filepath.Join(rec, id+".runs")); string(runs) != "run\n" {
			t.Errorf("add %q: runs %q, want one", tt.args, runs)
		}
	}
}

// waitResumed polls (bounded) until watch id's resume receipt reads
// delivered and returns the watch.
func waitResumed(t *testing.T, c *client.Client, id string) *vigil.Watch {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	for {
		w, err := c.Watch(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if len(w.Receipts) == 1 && w.Receipts[0].Channel == "resume" && w.Receipts[0].Status == vigil.ReceiptDelivered {
			return w
		}
		select {
		case <-ctx.Done():
			t.Fatalf("watch %s: receipts %+v after 30s, want one delivered resume", id, w.Receipts)
		case <-time.After(50 * time.Millisecond):
		}
	}
}
