package command_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/vigil-run/vigil"
	"github.com/vigil-run/vigil/deliver"
	"github.com/vigil-run/vigil/deliver/command"
)

// fakeHarness writes an executable named name into a new directory that
// records its argv (NUL-separated), environment and stdin under rec, and
// exits with code. It returns the directory, to put first on PATH.
func fakeHarness(t *testing.T, name, rec string, code int) string {
	t.Helper()
	dir := t.TempDir()
	script := "#!/bin/sh\nprintf '%s\\0' \"$0\" \"$@\" > '" + rec + "/argv'\nenv > '" + rec + "/env'\ncat > '" + rec + "/stdin'\n" +
		"echo 'it went wrong' >&2\nexit " + string(rune('0'+code)) + "\n"
	if err := os.WriteFile(filepath.Join(dir, name), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

func readArgv(t *testing.T, rec string) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(rec, "argv"))
	if err != nil {
		t.Fatalf("the harness did not run: %v", err)
	}
	return strings.Split(strings.TrimSuffix(string(b), "\x00"), "\x00")
}

// TestResumeRunsHarness: the resume channel runs the harness found on PATH
// with its documented resume command, the prompt as one argument, stdin
// empty and the VIGIL_ variables (chain depth one deeper) set.
func TestResumeRunsHarness(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct{ harness, sub string }{{"claude", "-p --resume"}, {"codex", "exec resume"}} {
		rec := t.TempDir()
		bin := fakeHarness(t, tt.harness, rec, 0)
		opts, _ := json.Marshal(map[string]any{"resume": map[string]any{"harness": tt.harness, "session": "sess-1", "cwd": rec,
			"env": map[string]string{"PATH": bin + ":/usr/bin:/bin"}}})
		d := delivery(t, string(opts), vigil.StateFired)
		retry, err := command.NewResume(command.Config{}).Send(t.Context(), d)
		if err != nil || retry {
			t.Fatalf("%s: Send = %v, %v; want delivered", tt.harness, retry, err)
		}
		argv := readArgv(t, rec)
		want := append([]string{filepath.Join(bin, tt.harness)}, strings.Fields(tt.sub)...)
		want = append(want, "sess-1", "vigil: your watch w1 (timer) fired: The timer went off.\nDetails: vigil show w1 (or the watch_get tool).")
		if !slices.Equal(argv, want) {
			t.Errorf("%s: argv = %q, want %q", tt.harness, argv, want)
		}
		env, _ := os.ReadFile(filepath.Join(rec, "env"))
		for _, v := range []string{"VIGIL_WATCH_ID=w1", "VIGIL_STATE=fired", "VIGIL_MESSAGE_ID=01MSG", "VIGIL_CHAIN_DEPTH=2"} {
			if !slices.Contains(strings.Split(string(env), "\n"), v) {
				t.Errorf("%s: environment lacks %s:\n%s", tt.harness, v, env)
			}
		}
		if stdin, err := os.ReadFile(filepath.Join(rec, "stdin")); err != nil || len(stdin) != 0 {
			t.Errorf("%s: stdin = %q, %v; want empty", tt.harness, stdin, err)
		}
	}
}

// TestResumeExitStatus: a harness that fails (a session it cannot find)
// is a rejection with its last stderr line, never retried; a state the
// resume does not run for is refused without running anything.
func TestResumeExitStatus(t *testing.T) {
	t.Parallel()
	rec := t.TempDir()
	bin := fakeHarness(t, "claude", rec, 1)
	opts := `{"resume":{"harness":"claude","session":"s","on":"done","env":{"PATH":"` + bin + `"}}}`
	retry, err := command.NewResume(command.Config{}).Send(t.Context(), delivery(t, opts, vigil.StateFired))
	if retry || err == nil || err.Error() != "exit status 1: it went wrong" || deliver.IsUnknown(err) {
		t.Errorf("Send = %v, %v; want an undeliverable exit status 1 with stderr", retry, err)
	}
	rec2 := t.TempDir()
	bin2 := fakeHarness(t, "claude", rec2, 0)
	opts = `{"resume":{"harness":"claude","session":"s","on":"done","env":{"PATH":"` + bin2 + `"}}}`
	if _, err := command.NewResume(command.Config{}).Send(t.Context(), delivery(t, opts, vigil.StateFailed)); err == nil {
		t.Error("Send for a failed outcome with on done = nil, want a refusal")
	}
	if _, err := os.Stat(filepath.Join(rec2, "argv")); err == nil {
		t.Error("the harness ran for an outcome its on does not name")
	}
}

// TestResumeRefusesOptionValue: a template whose placeholder would pass a
// value starting with "-" as an option is undeliverable with the reason,
// and the program never runs.
func TestResumeRefusesOptionValue(t *testing.T) {
	t.Parallel()
	rec := t.TempDir()
	bin := fakeHarness(t, "agent", rec, 0)
	opts := `{"resume":{"argv":["agent","--resume","s1","{facts.title}"],"env":{"PATH":"` + bin + `"}}}`
	d := delivery(t, opts, vigil.StateFired)
	d.Watch.Outcome.Observation = &vigil.Observation{Facts: map[string]any{"title": "--dangerously-skip-permissions"}}
	retry, err := command.NewResume(command.Config{}).Send(t.Context(), d)
	if retry || err == nil || !strings.Contains(err.Error(), `{facts.title} (argv[3]) starts with "-"`) || deliver.IsUnknown(err) {
		t.Errorf("Send = %v, %v; want undeliverable, naming the placeholder", retry, err)
	}
	if _, err := os.Stat(filepath.Join(rec, "argv")); err == nil {
		t.Errorf("the program ran with %q", readArgv(t, rec))
	}
}
