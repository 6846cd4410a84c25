package command_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vigil-run/vigil"
	"github.com/vigil-run/vigil/deliver"
	"github.com/vigil-run/vigil/deliver/command"
	runner "github.com/vigil-run/vigil/internal/proc"
)

func delivery(t *testing.T, opts string, state vigil.State) *deliver.Delivery {
	t.Helper()
	w := &vigil.Watch{ID: "w1", Kind: vigil.KindTimer, Recipient: "agent-7", State: state, ChainDepth: 1,
		Outcome: &vigil.Outcome{State: state, Sentence: "The timer went off.", Reason: "satisfied"}}
	o, err := deliver.ParseOptions(json.RawMessage(opts))
	if err != nil {
		t.Fatal(err)
	}
	p, _ := json.Marshal(deliver.NewPayload(w, "01MSG"))
	return &deliver.Delivery{Watch: w, MessageID: "01MSG", Options: o, Payload: p, Attempt: 1, Now: time.Now()}
}

// TestRunsWithOutcome: the program gets the outcome JSON on stdin and the
// watch id, state and chain depth in its environment; exit 0 is delivered.
func TestRunsWithOutcome(t *testing.T) {
	t.Parallel()
	out := filepath.Join(t.TempDir(), "out")
	opts, _ := json.Marshal(map[string]any{"command": map[string]any{"shell": `cat > ` + out + `; printf '\n%s %s %s' "$VIGIL_WATCH_ID" "$VIGIL_STATE" "$VIGIL_CHAIN_DEPTH" >> ` + out, "timeout": "10s"}})
	ch := command.New(command.Config{})
	retry, err := ch.Send(t.Context(), delivery(t, string(opts), vigil.StateFired))
	if err != nil || retry {
		t.Fatalf("Send = %v, %v; want delivered", retry, err)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	body, env, _ := strings.Cut(string(b), "\n")
	var p deliver.Payload
	if err := json.Unmarshal([]byte(body), &p); err != nil || p.WatchID != "w1" || p.State != vigil.StateFired {
		t.Errorf("stdin = %s (%v), want the outcome JSON", body, err)
	}
	if env != "w1 fired 2" {
		t.Errorf("environment = %q, want %q", env, "w1 fired 2")
	}
}

// TestExitStatusIsTheReceipt: a non-zero exit and a timeout are
// rejections, never retried.
func TestExitStatusIsTheReceipt(t *testing.T) {
	t.Parallel()
	ch := command.New(command.Config{Runner: runner.Runner{KillGrace: 100 * time.Millisecond}})
	retry, err := ch.Send(t.Context(), delivery(t, `{"command":{"shell":"echo nope >&2; exit 3","timeout":"10s"}}`, vigil.StateFailed))
	if retry || err == nil || err.Error() != "exit status 3: nope" {
		t.Errorf("exit 3: Send = %v, %v; want a rejection saying exit status 3: nope", retry, err)
	}
	start := time.Now()
	retry, err = ch.Send(t.Context(), delivery(t, `{"command":{"shell":"sleep 30","timeout":"1s"}}`, vigil.StateFailed))
	if retry || err == nil || !strings.Contains(err.Error(), "timed out") {
		t.Errorf("timeout: Send = %v, %v; want a rejection saying it timed out", retry, err)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("a 1s timeout took %s", d)
	}
	retry, err = ch.Send(t.Context(), delivery(t, `{"command":{"argv":["/nonexistent/vigil-test-program"]}}`, vigil.StateFired))
	if retry || err == nil {
		t.Errorf("missing program: Send = %v, %v; want a rejection", retry, err)
	}
}

// TestOnDoneAndOnFail: with both commands, the outcome runs the one its
// class names: fired the done command, an expiry the fail command.
func TestOnDoneAndOnFail(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	opts, _ := json.Marshal(map[string]any{"command": []map[string]any{
		{"shell": "echo done >> " + filepath.Join(dir, "log"), "on": "done"},
		{"shell": "echo fail >> " + filepath.Join(dir, "log"), "on": "fail"},
	}})
	ch := command.New(command.Config{})
	for _, s := range []vigil.State{vigil.StateFired, vigil.StateExpired} {
		if retry, err := ch.Send(t.Context(), delivery(t, string(opts), s)); err != nil || retry {
			t.Fatalf("Send(%s) = %v, %v", s, retry, err)
		}
	}
	b, _ := os.ReadFile(filepath.Join(dir, "log"))
	if string(b) != "done\nfail\n" {
		t.Errorf("ran %q; want the done command, then the fail command", b)
	}
}
