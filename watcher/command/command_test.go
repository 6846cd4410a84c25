package command_test

import (
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/vigil-run/vigil"
	"github.com/vigil-run/vigil/watcher"
	"github.com/vigil-run/vigil/watcher/command"
)

const grace = 200 * time.Millisecond

func newWatcher() *command.Watcher {
	return command.New(command.Config{AllowExec: true, KillGrace: grace})
}

func canon(t *testing.T, w *command.Watcher, in string) json.RawMessage {
	t.Helper()
	c, err := w.Canonicalize(context.Background(), json.RawMessage(in), time.Time{})
	if err != nil {
		t.Fatalf("Canonicalize(%s) = %v", in, err)
	}
	return c.Predicate
}

func probe(t *testing.T, w *command.Watcher, pred json.RawMessage) vigil.Observation {
	t.Helper()
	obs, err := watcher.Run(context.Background(), w, watcher.Probe{WatchID: "w", Kind: vigil.KindCommand, Predicate: pred})
	if err != nil {
		t.Fatalf("Run = %v", err)
	}
	obs.At = time.Time{}
	return obs
}

func TestProbe(t *testing.T) {
	t.Parallel()
	w := newWatcher()
	dir := t.TempDir()
	tests := []struct {
		name string
		pred string
		want vigil.Observation
	}{
		{"exit 0 is done by default", `{"argv":["true"]}`,
			vigil.Observation{Verdict: vigil.VerdictSatisfied, Summary: "exited 0", Facts: map[string]any{"exit_code": 0}}},
		{"another exit is pending", `{"shell":"echo working; exit 3"}`,
			vigil.Observation{Verdict: vigil.VerdictPending, Summary: "exited 3", Facts: map[string]any{"exit_code": 3, "stdout": "working\n"}}},
		{"a listed done code", `{"shell":"exit 3","done":[3,4]}`,
			vigil.Observation{Verdict: vigil.VerdictSatisfied, Summary: "exited 3", Facts: map[string]any{"exit_code": 3}}},
		{"a fail code", `{"shell":"echo broken >&2; exit 1","fail":1}`,
			vigil.Observation{Verdict: vigil.VerdictFailed, Summary: "exited 1", Facts: map[string]any{"exit_code": 1, "stderr": "broken\n"}}},
		{"a code in neither", `{"shell":"exit 2","fail":[1]}`,
			vigil.Observation{Verdict: vigil.VerdictPending, Summary: "exited 2", Facts: map[string]any{"exit_code": 2}}},
		{"JSON stdout matches done", `{"shell":"echo '{\"state\":\"ready\",\"n\":3}'","done":{"path":"state","equals":"ready"}}`,
			vigil.Observation{Verdict: vigil.VerdictSatisfied, Summary: `exited 0; state = "ready"`, Facts: map[string]any{
				"exit_code": 0, "stdout": "{\"state\":\"ready\",\"n\":3}\n",
				"done": []any{map[string]any{"path": "state", "found": true, "matched": true, "value": `"ready"`}},
			}}},
		{"JSON stdout not yet", `{"shell":"echo '{\"state\":\"starting\"}'","done":{"path":"state","equals":"ready"}}`,
			vigil.Observation{Verdict: vigil.VerdictPending, Summary: `exited 0; state = "starting"`, Facts: map[string]any{
				"exit_code": 0, "stdout": "{\"state\":\"starting\"}\n",
				"done": []any{map[string]any{"path": "state", "found": true, "matched": false, "value": `"starting"`}},
			}}},
		{"JSON stdout matches fail, whatever the exit", `{"shell":"echo '{\"state\":\"error\"}'; exit 1","done":{"path":"state","equals":"ready"},"fail":{"path":"state","equals":"error"}}`,
			vigil.Observation{Verdict: vigil.VerdictFailed, Summary: `exited 1; state = "error"`, Facts: map[string]any{
				"exit_code": 1, "stdout": "{\"state\":\"error\"}\n",
				"done": []any{map[string]any{"path": "state", "found": true, "matched": false, "value": `"error"`}},
				"fail": []any{map[string]any{"path": "state", "found": true, "matched": true, "value": `"error"`}},
			}}},
		{"stdout not JSON", `{"argv":["echo","hello"],"done":{"path":"state","exists":false}}`,
			vigil.Observation{Verdict: vigil.VerdictPending, Summary: "exited 0; stdout is not JSON", Facts: map[string]any{
				"exit_code": 0, "stdout": "hello\n",
				"done": []any{map[string]any{"path": "state", "found": false, "matched": false}},
			}}},
		{"cwd is used", `{"argv":["pwd"],"cwd":` + strconv.Quote(dir) + `}`,
			vigil.Observation{Verdict: vigil.VerdictSatisfied, Summary: "exited 0", Facts: map[string]any{"exit_code": 0, "stdout": dir + "\n"}}},
		{"stdin is empty", `{"shell":"cat"}`,
			vigil.Observation{Verdict: vigil.VerdictSatisfied, Summary: "exited 0", Facts: map[string]any{"exit_code": 0}}},
		{"not found is permanent", `{"argv":["vigil-no-such-program"]}`,
			vigil.Observation{Verdict: vigil.VerdictUnavailable, Permanent: true, Reason: "vigil-no-such-program: program not found in PATH"}},
		{"a missing path is permanent", `{"argv":["/nonexistent/vigil-prog"]}`,
			vigil.Observation{Verdict: vigil.VerdictUnavailable, Permanent: true, Reason: "/nonexistent/vigil-prog: no such program"}},
		{"a missing cwd is not permanent", `{"argv":["true"],"cwd":"/nonexistent/dir"}`,
			vigil.Observation{Verdict: vigil.VerdictUnavailable, Reason: "cwd /nonexistent/dir is not a directory that can be entered"}},
		{"killed by a signal", `{"shell":"kill -KILL $$"}`,
			vigil.Observation{Verdict: vigil.VerdictUnavailable, Summary: "killed by signal SIGKILL", Reason: "killed by signal SIGKILL", Facts: map[string]any{}}},
		{"a timeout", `{"shell":"echo started; sleep 1000","timeout":"2s"}`,
			vigil.Observation{Verdict: vigil.VerdictUnavailable, Summary: "timed out after 2s; its process group was terminated",
				Reason: "timed out after 2s; its process group was terminated", Facts: map[string]any{"stdout": "started\n"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := probe(t, w, canon(t, w, tt.pred))
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Probe(%s) (-want +got):\n%s", tt.pred, diff)
			}
		})
	}
}

func TestBoundedOutput(t *testing.T) {
	t.Parallel()
	w := newWatcher()
	got := probe(t, w, canon(t, w, `{"shell":"head -c 1048576 /dev/zero | tr '\\0' a; echo; echo END"}`))
	out, _ := got.Facts["stdout"].(string)
	if len(out) > command.FactTail || !strings.HasSuffix(out, "aaaa\nEND\n") || !strings.HasPrefix(out, "…") {
		t.Errorf("stdout fact is %d bytes (%.20q…%q), want at most %d, clipped at the front, ending with the output's end",
			len(out), out, out[max(0, len(out)-10):], command.FactTail)
	}
}

// TestEnvAllowList sets a variable the child must not see. It changes the
// test process's environment, so it cannot run in parallel.
func TestEnvAllowList(t *testing.T) {
	t.Setenv("VIGIL_TEST_LEAK", "secret")
	t.Setenv("TZ", "UTC")
	w := newWatcher()
	got := probe(t, w, canon(t, w, `{"argv":["env"],"env":{"FOO":"bar","TZ":"Europe/Paris"}}`))
	out, _ := got.Facts["stdout"].(string)
	vars := map[string]bool{}
	for line := range strings.Lines(out) {
		name, _, _ := strings.Cut(strings.TrimSpace(line), "=")
		vars[name] = true
	}
	if vars["VIGIL_TEST_LEAK"] {
		t.Errorf("the child saw VIGIL_TEST_LEAK, which is not allow-listed:\n%s", out)
	}
	if !vars["FOO"] || !vars["PATH"] || !strings.Contains(out, "TZ=Europe/Paris\n") {
		t.Errorf("the child's environment = %q, want FOO, PATH and the predicate's TZ", out)
	}
	for name := range vars {
		allowed := []string{"PATH", "HOME", "USER", "LOGNAME", "LANG", "LC_ALL", "TZ", "TMPDIR", "SHELL", "FOO", "PWD", "SHLVL", "_"}
		if !slicesContains(allowed, name) && name != "" {
			t.Errorf("the child saw %s, which is not allow-listed", name)
		}
	}
}

func slicesContains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

func TestAdmit(t *testing.T) {
	t.Parallel()
	pred := json.RawMessage(`{"argv":["true"],"done":[0],"timeout":"1m"}`)
	err := command.New(command.Config{}).Admit(context.Background(), pred)
	want := "command watches run programs: start the daemon with --allow-exec (VIGIL_ALLOW_EXEC=1)"
	if vigil.ErrorCode(err) != vigil.CodeWatchUnobservable || vigil.ErrorMessage(err) != want {
		t.Errorf("Admit without exec = %v, want watch_unobservable %q", err, want)
	}
	if err := newWatcher().Admit(context.Background(), pred); err != nil {
		t.Errorf("Admit with exec = %v, want nil", err)
	}
	obs := probe(t, command.New(command.Config{}), pred)
	if obs.Verdict != vigil.VerdictUnavailable || !obs.Permanent {
		t.Errorf("Probe without exec = %+v, want a permanent refusal", obs)
	}
}

func TestCanonicalize(t *testing.T) {
	t.Parallel()
	w := newWatcher()
	tests := []struct {
		spellings []string
		want      string
	}{
		{[]string{`{"argv":["make","check"]}`, `{"argv":["make","check"],"done":0,"timeout":"60s"}`, `{"argv":["make","check"],"done":[0,0],"timeout":"60000ms"}`},
			`{"argv":["make","check"],"done":[0],"timeout":"1m"}`},
		{[]string{`{"shell":"x","done":[3,1],"fail":2,"cwd":"/src//app/","env":{"B":"2","A":"1"}}`, `{"env":{"A":"1","B":"2"},"cwd":"/src/app","fail":[2],"done":[1,3],"shell":"x"}`},
			`{"cwd":"/src/app","done":[1,3],"env":{"A":"1","B":"2"},"fail":[2],"shell":"x","timeout":"1m"}`},
		{[]string{`{"shell":"x","done":{"path":"ok","truthy":true},"timeout":"10m"}`, `{"shell":"x","done":[{"truthy":true,"path":"ok"}],"timeout":"600s"}`},
			`{"done":[{"path":"ok","truthy":true}],"shell":"x","timeout":"10m"}`},
		{[]string{`{"argv":["./check.sh"],"cwd":"/src"}`},
			`{"argv":["./check.sh"],"cwd":"/src","done":[0],"timeout":"1m"}`},
	}
	for _, tt := range tests {
		for _, s := range tt.spellings {
			if got := canon(t, w, s); string(got) != tt.want {
				t.Errorf("Canonicalize(%s) =\n%s, want\n%s", s, got, tt.want)
			}
		}
	}
}

func TestCanonicalizeRefusals(t *testing.T) {
	t.Parallel()
	w := newWatcher()
	tests := []struct{ in, field, msgHas string }{
		{`{}`, "predicate", "argv"},
		{`{"argv":[]}`, "predicate", "argv"},
		{`{"argv":["true"],"shell":"true"}`, "predicate", "exactly one"},
		{`{"argv":["-rf","/"]}`, "predicate.argv[0]", "option"},
		{`{"argv":[""]}`, "predicate.argv[0]", "program"},
		{`{"argv":["./x"]}`, "predicate.argv[0]", "relative"},
		{`{"argv":["a","b\u0000"]}`, "predicate.argv[1]", "NUL"},
		{`{"argv":["a","` + strings.Repeat("x", command.MaxArg+1) + `"]}`, "predicate.argv[1]", "longer"},
		{`{"argv":[` + strings.Repeat(`"a",`, command.MaxArgs) + `"a"]}`, "predicate.argv", "at most"},
		{`{"shell":"` + strings.Repeat("x", command.MaxShell+1) + `"}`, "predicate.shell", "longer"},
		{`{"argv":["true"],"cwd":"rel"}`, "predicate.cwd", "absolute"},
		{`{"argv":["true"],"env":{"1A":"x"}}`, "predicate.env.1A", "variable name"},
		{`{"argv":["true"],"env":{"A=B":"x"}}`, "predicate.env.A=B", "variable name"},
		{`{"argv":["true"],"env":{"A":"` + strings.Repeat("x", command.MaxEnvValue+1) + `"}}`, "predicate.env.A", "longer"},
		{`{"argv":["true"],"timeout":"11m"}`, "predicate.timeout", "at most 10m"},
		{`{"argv":["true"],"done":[256]}`, "predicate.done[0]", "0 to 255"},
		{`{"argv":["true"],"done":-1}`, "predicate.done", "0 to 255"},
		{`{"argv":["true"],"done":[]}`, "predicate.done", "empty"},
		{`{"argv":["true"],"done":[0,{"path":"a","exists":true}]}`, "predicate.done[1]", "exit code"},
		{`{"argv":["true"],"done":[{"path":"a","exists":true},0]}`, "predicate.done[1]", "object"},
		{`{"argv":["true"],"done":"0"}`, "predicate.done", "exit code"},
		{`{"argv":["true"],"fail":[0]}`, "predicate.fail", "done lists too"},
		{`{"argv":["true"],"done":{"path":"a","matches":"("}}`, "predicate.done.matches", "RE2"},
		{`{"argv":["true"],"stdin":"x"}`, "predicate.stdin", "not a known field"},
	}
	for _, tt := range tests {
		_, err := w.Canonicalize(context.Background(), json.RawMessage(tt.in), time.Time{})
		if vigil.ErrorCode(err) != vigil.CodeInvalidPredicate || vigil.ErrorField(err) != tt.field || !strings.Contains(vigil.ErrorMessage(err), tt.msgHas) {
			t.Errorf("Canonicalize(%.80s) = %v (field %q), want invalid_predicate on %s mentioning %q", tt.in, err, vigil.ErrorField(err), tt.field, tt.msgHas)
		}
	}
}

// TestTimeoutSendsTermToTheGroup checks the polite step: on timeout every
// process of the group gets SIGTERM (and may clean up) before any SIGKILL.
func TestTimeoutSendsTermToTheGroup(t *testing.T) {
	t.Parallel()
	w := command.New(command.Config{AllowExec: true, KillGrace: 2 * time.Second})
	shell := `(trap 'echo grandchild-got-term; exit 0' TERM; while :; do sleep 0.05; done) & wait`
	got := probe(t, w, canon(t, w, `{"shell":`+strconv.Quote(shell)+`,"timeout":"200ms"}`))
	if out, _ := got.Facts["stdout"].(string); !strings.Contains(out, "grandchild-got-term") {
		t.Errorf("Probe = %+v, want the grandchild to have received SIGTERM", got)
	}
}
