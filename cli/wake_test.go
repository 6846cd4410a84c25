package cli

import (
	"encoding/json"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

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
		{[]string{"--wake", "claude:s1", "--deliver", `{"resume": {"harness": "codex", "session": "s2"}}`}, "not both"},
		{[]string{"--wake-argv", `["x"]`, "--deliver", `{"resume": {"harness": "codex", "session": "s2"}}`}, "not both"},
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

// TestAddWakeOnExisting: "vigil add --wake" for a condition already pending
// for the recipient returns that watch, which keeps its own delivery
// options, and says plainly that the wake was NOT registered and what to
// do: with -q on stderr (stdout stays the id), with --json in
// asked_deliver too. What to do depends on what the watch keeps: another
// session's wake is not to be cancelled away. Asking for what it carries,
// or for no wake, says nothing of the kind.
func TestAddWakeOnExisting(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	c, err := client.New(d.Addr(), d.Token(), nil)
	if err != nil {
		t.Fatal(err)
	}
	base := time.Now().Add(72 * time.Hour).UTC().Truncate(time.Second)
	add := func(at time.Time, args ...string) result {
		t.Helper()
		r := d.vigil(t, append([]string{"add", "timer", "--at", at.Format(time.RFC3339), "--for", "wake-dup"}, args...)...)
		if r.code != 0 {
			t.Fatalf("add %q: %d %s", args, r.code, r.stderr)
		}
		return r
	}

	// The pending watch resumes another session.
	id := strings.TrimSpace(add(base, "-q", "--wake", "claude:session-1").stdout)
	r := add(base, "--wake", "claude:session-2")
	for _, want := range []string{"Already watching", "The wake was NOT registered", "will not resume claude session session-2",
		"It resumes claude session session-1 instead", "--for a recipient of its own"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("add --wake on a pending watch that resumes another session: stdout does not say %q:\n%s", want, r.stdout)
		}
	}
	if q := add(base, "-q", "--wake", "claude:session-2"); strings.TrimSpace(q.stdout) != id || !strings.Contains(q.stderr, "NOT registered") {
		t.Errorf("add -q --wake: stdout %q, stderr %q; want the id, and the warning on stderr", q.stdout, q.stderr)
	}
	j := add(base, "--json", "--wake", "claude:session-2")
	var w vigil.Watch
	err = json.Unmarshal([]byte(j.stdout), &w)
	asked, _ := deliver.ParseOptions(w.AskedDeliver)
	if err != nil || !w.Existing || asked.Resume == nil || asked.Resume.Session != "session-2" || !strings.Contains(j.stderr, "NOT registered") {
		t.Errorf("add --json --wake: %s (%v), stderr %q; want existing with asked_deliver, and the warning on stderr", j.stdout, err, j.stderr)
	}
	for _, args := range [][]string{{"--wake", "claude:session-1"}, nil} {
		if r := add(base, args...); !strings.Contains(r.stdout, "Already watching") || strings.Contains(r.stdout+r.stderr, "NOT") {
			t.Errorf("add %q on the pending watch: %q %q; want it found, and no warning", args, r.stdout, r.stderr)
		}
	}
	got, err := c.Watch(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	if o, err := deliver.ParseOptions(got.Deliver); err != nil || o.Resume == nil || o.Resume.Session != "session-1" {
		t.Errorf("the pending watch's options became %s, want its own resume of session-1", got.Deliver)
	}

	// The pending watch resumes nobody: cancel it and add again.
	other := base.Add(time.Hour)
	id = strings.TrimSpace(add(other, "-q").stdout)
	r = add(other, "--wake", "codex:thread-9")
	for _, want := range []string{"The wake was NOT registered", "codex session thread-9", "none besides the inbox", "vigil cancel " + id, "add again with --wake"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("add --wake on a pending watch without one: stdout does not say %q:\n%s", want, r.stdout)
		}
	}
}
