package daemon_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/vigil-run/vigil"
	"github.com/vigil-run/vigil/client"
	"github.com/vigil-run/vigil/internal/daemontest"
)

// harnessScript is a fake agent harness (claude, codex): each run appends
// a line to <rec>/<watch id>.runs and records its argv (NUL-separated),
// environment and stdin under <rec>/<watch id>.*. While <rec>/hold exists
// it waits, so a test can kill the daemon mid-run.
func harnessScript(rec string) string {
	return "#!/bin/sh\nr='" + rec + "'/\"$VIGIL_WATCH_ID\"\necho run >> \"$r.runs\"\n" +
		"printf '%s\\0' \"$(basename \"$0\")\" \"$@\" > \"$r.argv\"\nenv > \"$r.env\"\ncat > \"$r.stdin\"\n" +
		"while [ -e '" + rec + "/hold' ]; do sleep 0.05; done\n"
}

// fakeHarnesses writes fake claude and codex executables into a new
// directory and returns it (to put first on PATH) and the directory
// their records go to.
func fakeHarnesses(t *testing.T) (bin, rec string) {
	t.Helper()
	bin, rec = t.TempDir(), t.TempDir()
	for _, name := range []string{"claude", "codex", "my-agent"} {
		if err := os.WriteFile(filepath.Join(bin, name), []byte(harnessScript(rec)), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return bin, rec
}

// runs returns how many times a fake harness ran for watch id.
func runs(t *testing.T, rec, id string) int {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(rec, id+".runs"))
	if errors.Is(err, os.ErrNotExist) {
		return 0
	}
	if err != nil {
		t.Fatal(err)
	}
	return strings.Count(string(b), "run\n")
}

func recorded(t *testing.T, rec, id, what string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(rec, id+"."+what))
	if err != nil {
		t.Fatalf("watch %s: %v", id, err)
	}
	return string(b)
}

// waitChannel polls (bounded) until watch id's receipt on channel has
// status, and returns the watch.
func waitChannel(t *testing.T, c *client.Client, id, channel, status string) *vigil.Watch {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	for {
		w, err := c.Watch(ctx, id)
		if err != nil && !errors.Is(err, context.DeadlineExceeded) {
			t.Fatal(err)
		}
		if w != nil {
			for _, r := range w.Receipts {
				if r.Channel == channel && r.Status == status {
					return w
				}
			}
		}
		select {
		case <-ctx.Done():
			t.Fatalf("watch %s: no %s %s receipt within 30s (%+v)", id, status, channel, w)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// TestResumeDelivery drives resume delivery end to end with fake claude
// and codex executables on the run's PATH: each fires once per outcome
// with its documented resume command and the prompt as one argument,
// stdin empty and the chain depth one deeper; a template gets the
// sentence as one argument; nothing runs for a cancelled watch; nothing
// runs again after a restart; and the resumed agent's own registrations
// count one deeper, up to the limit.
func TestResumeDelivery(t *testing.T) {
	t.Parallel()
	bin, rec := fakeHarnesses(t)
	dataDir := t.TempDir()
	cfg := testConfig(dataDir, t.TempDir())
	d := start(t, cfg)
	c := newClient(t, d)
	ctx := t.Context()
	path := bin + ":" + os.Getenv("PATH")
	resume := func(r map[string]any) json.RawMessage {
		r["env"] = map[string]string{"PATH": path}
		b, _ := json.Marshal(map[string]any{"resume": r})
		return b
	}
	register := func(pred string, depth int, r map[string]any) *vigil.Watch {
		t.Helper()
		w, err := c.Register(ctx, vigil.RegisterRequest{Kind: vigil.KindTimer, Recipient: "agent", Predicate: json.RawMessage(pred),
			Note: "merge PR 41", ChainDepth: depth, Deliver: resume(r)})
		if err != nil {
			t.Fatalf("Register: %v", err)
		}
		return w
	}

	// Cancelled before it settles: nothing is resumed.
	gone := register(`{"in":"1h"}`, 0, map[string]any{"harness": "claude", "session": "sess-gone"})
	if _, err := c.Cancel(ctx, gone.ID); err != nil {
		t.Fatal(err)
	}
	cl := register(`{"in":"1s"}`, 1, map[string]any{"harness": "claude", "session": "3f9f74a6-6b7c-4a3e-9e1d-2f1f0a9b8c7d", "cwd": rec})
	cx := register(`{"in":"1001ms"}`, 0, map[string]any{"harness": "codex", "session": "019d1afb-b2c7-72d3"})
	tpl := register(`{"in":"1002ms"}`, 3, map[string]any{"argv": []string{"my-agent", "--session", "s9", "{sentence}", "{state}", "{watch_id}"}})
	for _, w := range []*vigil.Watch{cl, cx, tpl} {
		got := waitChannel(t, c, w.ID, "resume", vigil.ReceiptDelivered)
		if got.State != vigil.StateFired || got.Receipts[0].Attempts != 1 {
			t.Errorf("watch %s: %s, receipts %+v; want fired, resumed once", w.ID, got.State, got.Receipts)
		}
	}
	// Each prompt is built from its own watch's sentence: two timers
	// a millisecond apart can fire either side of a second boundary.
	prompt := func(w *vigil.Watch) string {
		t.Helper()
		fired, err := c.Watch(ctx, w.ID)
		if err != nil {
			t.Fatal(err)
		}
		return "vigil: your watch " + w.ID + " (timer) fired: " + fired.Outcome.Sentence + "\nNote: merge PR 41\nDetails: vigil show " + w.ID + " (or the watch_get tool)."
	}
	tplWatch, _ := c.Watch(ctx, tpl.ID)
	for _, tt := range []struct {
		w     *vigil.Watch
		argv  []string
		depth string
	}{
		{cl, []string{"claude", "-p", "--resume", "3f9f74a6-6b7c-4a3e-9e1d-2f1f0a9b8c7d", prompt(cl)}, "2"},
		{cx, []string{"codex", "exec", "resume", "019d1afb-b2c7-72d3", prompt(cx)}, "1"},
		{tpl, []string{"my-agent", "--session", "s9", tplWatch.Outcome.Sentence, "fired", tpl.ID}, "4"},
	} {
		if got := strings.Split(strings.TrimSuffix(recorded(t, rec, tt.w.ID, "argv"), "\x00"), "\x00"); !slices.Equal(got, tt.argv) {
			t.Errorf("watch %s: argv %q, want %q", tt.w.ID, got, tt.argv)
		}
		env := strings.Split(recorded(t, rec, tt.w.ID, "env"), "\n")
		for _, v := range []string{"VIGIL_WATCH_ID=" + tt.w.ID, "VIGIL_STATE=fired", "VIGIL_CHAIN_DEPTH=" + tt.depth} {
			if !slices.Contains(env, v) {
				t.Errorf("watch %s: the environment lacks %s", tt.w.ID, v)
			}
		}
		if s := recorded(t, rec, tt.w.ID, "stdin"); s != "" {
			t.Errorf("watch %s: stdin %q, want empty", tt.w.ID, s)
		}
	}
	if pwd := recorded(t, rec, cl.ID, "env"); !strings.Contains(pwd, "\nPWD="+rec+"\n") && !strings.HasPrefix(pwd, "PWD="+rec+"\n") {
		t.Errorf("claude did not run in its cwd %s", rec)
	}
	// The agent resumed from a depth-3 watch runs at depth 4: what it
	// registers is refused, so resumes cannot loop.
	_, err := c.Register(ctx, vigil.RegisterRequest{Kind: vigil.KindTimer, Recipient: "agent", Predicate: json.RawMessage(`{"in":"1h"}`), ChainDepth: 4})
	if vigil.ErrorCode(err) != vigil.CodeChainTooDeep {
		t.Errorf("a registration from the resumed agent at depth 4 = %v, want chain_too_deep", err)
	}

	// A restart resumes nothing again; a new outcome after it runs once.
	if err := d.stop(); err != nil {
		t.Fatal(err)
	}
	d = start(t, cfg)
	c = newClient(t, d)
	after := register(`{"in":"1s"}`, 0, map[string]any{"harness": "claude", "session": "sess-after"})
	waitChannel(t, c, after.ID, "resume", vigil.ReceiptDelivered)
	for _, w := range []*vigil.Watch{cl, cx, tpl, after} {
		if n := runs(t, rec, w.ID); n != 1 {
			t.Errorf("watch %s: the harness ran %d times, want once", w.ID, n)
		}
	}
	if n := runs(t, rec, gone.ID); n != 0 {
		t.Errorf("the cancelled watch resumed its session %d times, want never", n)
	}
	if w, _ := c.Watch(ctx, gone.ID); len(w.Receipts) != 0 {
		t.Errorf("the cancelled watch has receipts %+v, want none", w.Receipts)
	}
}

// TestResumeRefusedAtRegistration: the bad input through the API —
// each refused naming the field at fault, and nothing written.
func TestResumeRefusedAtRegistration(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t.TempDir(), t.TempDir())
	d := start(t, cfg)
	c := newClient(t, d)
	noExec := testConfig(t.TempDir(), t.TempDir())
	noExec.AllowExec = false
	cNoExec := newClient(t, start(t, noExec))
	for _, tt := range []struct {
		name    string
		c       *client.Client
		deliver string
		code    vigil.Code
		field   string
	}{
		{"unknown adapter", c, `{"resume":{"harness":"aider","session":"s1"}}`, vigil.CodeInvalidRequest, "deliver.resume.harness"},
		{"empty session", c, `{"resume":{"harness":"claude","session":""}}`, vigil.CodeInvalidRequest, "deliver.resume.session"},
		{"unknown placeholder", c, `{"resume":{"argv":["my-agent","{message}"]}}`, vigil.CodeInvalidRequest, "deliver.resume.argv[1]"},
		{"exec not allowed", cNoExec, `{"resume":{"harness":"codex","session":"s1"}}`, vigil.CodeWatchUnobservable, "deliver.resume"},
	} {
		_, err := tt.c.Register(t.Context(), vigil.RegisterRequest{Kind: vigil.KindTimer, Recipient: "bad-" + strings.ReplaceAll(tt.name, " ", "-"),
			Predicate: json.RawMessage(`{"in":"1h"}`), Deliver: json.RawMessage(tt.deliver)})
		if vigil.ErrorCode(err) != tt.code || vigil.ErrorField(err) != tt.field {
			t.Errorf("%s: Register = %v (code %s, field %q); want %s on %s", tt.name, err, vigil.ErrorCode(err), vigil.ErrorField(err), tt.code, tt.field)
		}
	}
	for _, cc := range []*client.Client{c, cNoExec} {
		page, err := cc.Watches(t.Context(), vigil.ListRequest{})
		if err != nil {
			t.Fatal(err)
		}
		if len(page.Watches) != 0 {
			t.Errorf("refused registrations left %d watches, want none", len(page.Watches))
		}
	}
}

// TestResumeKilledMidRun kills a real vigil process (SIGKILL) while a
// fake claude it resumed is still running: after a restart the receipt
// reads unknown and the session is not resumed again, while a new outcome
// after the restart resumes its own session once.
func TestResumeKilledMidRun(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the vigil binary")
	}
	t.Parallel()
	exe := filepath.Join(t.TempDir(), "vigil")
	if out, err := exec.Command("go", "build", "-o", exe, "../cmd/vigil").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	bin, rec := fakeHarnesses(t)
	hold := filepath.Join(rec, "hold")
	if err := os.WriteFile(hold, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	// However the test ends, the orphaned harness is let go.
	t.Cleanup(func() { _ = os.Remove(hold) })

	dataDir := filepath.Join(t.TempDir(), "data")
	home := t.TempDir()
	addr := freeAddr(t)
	startVigil := func() *exec.Cmd {
		t.Helper()
		cmd := exec.Command(exe, "serve", "--listen", addr, "--data-dir", dataDir, "--allow-exec")
		cmd.Env = []string{"HOME=" + home, "PATH=" + bin + ":" + os.Getenv("PATH")}
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
		return cmd
	}
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	register := func(c *client.Client, session string) *vigil.Watch {
		t.Helper()
		w, err := c.Register(ctx, vigil.RegisterRequest{Kind: vigil.KindTimer, Recipient: "agent", Predicate: json.RawMessage(`{"in":"1s"}`),
			Deliver: json.RawMessage(`{"resume":{"harness":"claude","session":"` + session + `"}}`)})
		if err != nil {
			t.Fatalf("Register: %v", err)
		}
		return w
	}

	first := startVigil()
	c := daemontest.ReadyClient(ctx, t, addr, dataDir)
	w := register(c, "sess-killed")
	for runs(t, rec, w.ID) == 0 {
		select {
		case <-ctx.Done():
			t.Fatal("the fake claude did not start within 60s")
		case <-time.After(20 * time.Millisecond):
		}
	}
	// The harness is running and has not exited: the receipt says sending.
	if got, err := c.Watch(ctx, w.ID); err != nil || len(got.Receipts) != 1 || got.Receipts[0].Status != vigil.ReceiptSending {
		t.Fatalf("before the kill: %+v, %v; want one sending receipt", got, err)
	}
	if err := first.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = first.Wait()
	if err := os.Remove(hold); err != nil {
		t.Fatal(err)
	}

	startVigil()
	c = daemontest.ReadyClient(ctx, t, addr, dataDir)
	got, err := c.Watch(ctx, w.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.State != vigil.StateFired || len(got.Receipts) != 1 || got.Receipts[0].Channel != "resume" || got.Receipts[0].Status != vigil.ReceiptUnknown {
		t.Fatalf("after the restart: state %s, receipts %+v; want fired with one unknown resume receipt", got.State, got.Receipts)
	}
	// A new outcome resumes its session once; by the time it has, a
	// second run of the first (queued at start-up, before anything
	// settles) would have started too.
	next := register(c, "sess-next")
	waitChannel(t, c, next.ID, "resume", vigil.ReceiptDelivered)
	if n := runs(t, rec, w.ID); n != 1 {
		t.Errorf("the interrupted session was resumed %d times, want once", n)
	}
	if n := runs(t, rec, next.ID); n != 1 {
		t.Errorf("the new outcome resumed its session %d times, want once", n)
	}
	if got, _ := c.Watch(ctx, w.ID); got.Receipts[0].Status != vigil.ReceiptUnknown || got.Receipts[0].Attempts != 1 {
		t.Errorf("the unknown receipt became %+v, want it left unknown after one attempt", got.Receipts[0])
	}
}
