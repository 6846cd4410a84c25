package run_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/vigil-run/vigil"
	"github.com/vigil-run/vigil/engine"
	"github.com/vigil-run/vigil/scheduler"
	"github.com/vigil-run/vigil/store/memstore"
	"github.com/vigil-run/vigil/watcher"
	"github.com/vigil-run/vigil/watcher/run"
)

// TestMain lets this test binary be the supervisor: the watcher starts it
// with VIGIL_TEST_SUPERVISE=1 and a job on stdin.
func TestMain(m *testing.M) {
	if os.Getenv("VIGIL_TEST_SUPERVISE") == "1" {
		// VIGIL_TEST_SUPERVISE_HOLD holds the supervisor until that file
		// exists, to test what happens while a run starts.
		if hold := os.Getenv("VIGIL_TEST_SUPERVISE_HOLD"); hold != "" {
			waitFile(hold)
		}
		// VIGIL_TEST_SUPERVISE_HOLD2 holds the second stage only, once it
		// has made the file VIGIL_TEST_SUPERVISE_UP, to test what happens
		// when the daemon gives up on a start whose second stage is up.
		if hold := os.Getenv("VIGIL_TEST_SUPERVISE_HOLD2"); hold != "" && os.Getenv(run.EnvStage) == "2" {
			_ = os.WriteFile(os.Getenv("VIGIL_TEST_SUPERVISE_UP"), nil, 0o600)
			waitFile(hold)
		}
		// VIGIL_TEST_SUPERVISE_HOLD3 holds the second stage once its
		// record is on disk, just before it starts the program, once it
		// has made the file VIGIL_TEST_SUPERVISE_UP.
		// It is let go by the SIGTERM the test sends meanwhile: once its
		// own channel has it, signal.Stop returns only when the signal
		// has been handed to every channel, the supervisor's included,
		// so that the supervisor surely sees it before it would start
		// the program (or by the hold file, the test's cleanup's, if none
		// comes).
		if hold := os.Getenv("VIGIL_TEST_SUPERVISE_HOLD3"); hold != "" && os.Getenv(run.EnvStage) == "2" {
			term := make(chan os.Signal, 1)
			signal.Notify(term, syscall.SIGTERM)
			run.SetBeforeStart(func() {
				_ = os.WriteFile(os.Getenv("VIGIL_TEST_SUPERVISE_UP"), nil, 0o600)
				held := make(chan struct{})
				go func() { waitFile(hold); close(held) }()
				select {
				case <-term:
				case <-held:
				}
				signal.Stop(term)
			})
		}
		os.Exit(run.Supervise(os.Stdin, os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}

// waitFile waits (at most 20 s) for path to exist.
func waitFile(path string) {
	for end := time.Now().Add(20 * time.Second); time.Now().Before(end); time.Sleep(5 * time.Millisecond) {
		if _, err := os.Stat(path); err == nil {
			return
		}
	}
}

func newWatcher(t *testing.T, dir string, poke func(string)) *run.Watcher {
	t.Helper()
	return run.New(testConfig(t, dir, poke, nil))
}

// testConfig is the run watcher's configuration with this test binary as
// the supervisor; st, when set, answers StartFunc as the daemon's store
// does on one daemon.
func testConfig(t *testing.T, dir string, poke func(string), st vigil.Store) run.Config {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	c := run.Config{AllowExec: true, Dir: dir, SupervisorArgv: []string{exe}, SupervisorEnv: []string{"VIGIL_TEST_SUPERVISE=1"},
		KillGrace: 500 * time.Millisecond, PokeFunc: poke}
	if st != nil {
		c.StartFunc = run.StoreStart(st, false)
	}
	return c
}

// daemon is an engine on the real clock with the run watcher and its
// run-directory watch, as the daemon wires them.
type daemon struct {
	eng    *engine.Engine
	cancel context.CancelFunc
	done   chan struct{}
}

func startDaemon(t *testing.T, st vigil.Store, dir string) *daemon {
	t.Helper()
	return startDaemonAt(t, st, dir, nil)
}

// startDaemonAt is startDaemon on the clock now (nil: the real one).
func startDaemonAt(t *testing.T, st vigil.Store, dir string, now func() time.Time) *daemon {
	t.Helper()
	return startDaemonWith(t, st, dir, now, nil)
}

// startDaemonWith is startDaemonAt with the run watcher's configuration
// changed by edit.
func startDaemonWith(t *testing.T, st vigil.Store, dir string, now func() time.Time, edit func(*run.Config)) *daemon {
	t.Helper()
	d := &daemon{done: make(chan struct{})}
	sched := scheduler.New(scheduler.Config{})
	cfg := testConfig(t, dir, sched.Poke, st)
	if edit != nil {
		edit(&cfg)
	}
	w := run.New(cfg)
	d.eng = engine.New(engine.Config{Store: st, Watchers: watcher.NewRegistry(w), Scheduler: sched, NowFunc: now})
	ctx, cancel := context.WithCancel(context.Background())
	d.cancel = cancel
	if err := d.eng.Prime(ctx); err != nil {
		t.Fatal(err)
	}
	go func() {
		defer close(d.done)
		go func() { _ = w.Run(ctx) }()
		_ = d.eng.Run(ctx)
	}()
	t.Cleanup(d.stop)
	return d
}

func (d *daemon) stop() {
	d.cancel()
	<-d.done
}

// register registers a run watch and waits for its first probe, which
// starts the command.
func register(t *testing.T, d *daemon, pred string, deadline string, depth int) *vigil.Watch {
	t.Helper()
	w, err := d.eng.Register(context.Background(), vigil.RegisterRequest{Kind: vigil.KindRun, Recipient: "r",
		Predicate: json.RawMessage(pred), Deadline: deadline, ChainDepth: depth, Observe: true})
	if err != nil {
		t.Fatalf("Register(%s) = %v", pred, err)
	}
	return w
}

func wait(t *testing.T, d *daemon, id string, within time.Duration) *vigil.Watch {
	t.Helper()
	w, err := d.eng.Wait(context.Background(), id, within)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

func messages(t *testing.T, d *daemon) []*vigil.Message {
	t.Helper()
	zero := int64(0)
	p, err := d.eng.Messages(context.Background(), vigil.MessagesRequest{Recipient: "r", After: &zero})
	if err != nil {
		t.Fatal(err)
	}
	return p.Messages
}

// TestRunFires: a 3 s command fires when it exits — woken by its status
// file, long before the 30 s fallback interval — with its exit code,
// duration and output tail; its child sees VIGIL_CHAIN_DEPTH one deeper.
func TestRunFires(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, memstore.New(), t.TempDir())
	start := time.Now()
	w := register(t, d, `{"shell":"echo start depth=$VIGIL_CHAIN_DEPTH; sleep 3; echo done >&2","tail":1000}`, "", 2)
	got := wait(t, d, w.ID, 10*time.Second)
	took := time.Since(start)
	if got.State != vigil.StateFired {
		t.Fatalf("after %v the watch is %s (%+v), want fired", took, got.State, got.LastObservation)
	}
	if took < 3*time.Second || took > 8*time.Second {
		t.Fatalf("fired after %v, want soon after the 3 s command ended", took)
	}
	f := got.Outcome.Observation.Facts
	if factNumber(f["exit_code"]) != 0 {
		t.Errorf("exit_code = %v", f["exit_code"])
	}
	if tail, _ := f["tail"].(string); tail != "start depth=3\ndone\n" {
		t.Errorf("tail = %q, want both streams and VIGIL_CHAIN_DEPTH=3", tail)
	}
	if ms := factNumber(f["duration_ms"]); !(ms >= 3000) {
		t.Errorf("duration_ms = %v, want >= 3000", f["duration_ms"])
	}
	if msgs := messages(t, d); len(msgs) != 1 || msgs[0].Type != vigil.MessageFired || !strings.Contains(msgs[0].Text, "exited 0 after 3") {
		t.Fatalf("mailbox = %+v", msgs)
	}
}

// factNumber is a numeric fact as a float64, whichever type the store
// gave it back as (stores keep numbers exact: json.Number); NaN when v is
// not a number.
func factNumber(v any) float64 {
	switch n := v.(type) {
	case json.Number:
		if f, err := n.Float64(); err == nil {
			return f
		}
	case float64:
		return n
	case int64:
		return float64(n)
	case int:
		return float64(n)
	}
	return math.NaN()
}

func TestRunExit1Fails(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, memstore.New(), t.TempDir())
	w := register(t, d, `{"shell":"echo oops; exit 1"}`, "", 0)
	got := wait(t, d, w.ID, 10*time.Second)
	if got.State != vigil.StateFailed || !strings.Contains(got.Outcome.Sentence, "exited 1") {
		t.Fatalf("watch = %s %+v, want failed saying exited 1", got.State, got.Outcome)
	}
	if tail := got.Outcome.Observation.Facts["tail"]; tail != "oops\n" {
		t.Errorf("tail = %q", tail)
	}
}

// TestRunSurvivesRestart: the daemon dies while the command runs; the
// command goes on, and the restarted daemon reports its outcome exactly
// once. A second restart after that reports nothing more.
func TestRunSurvivesRestart(t *testing.T) {
	t.Parallel()
	st, dir := memstore.New(), t.TempDir()
	d1 := startDaemon(t, st, dir)
	w := register(t, d1, `{"shell":"sleep 2; echo finished"}`, "", 0)
	if got := wait(t, d1, w.ID, 0); got.State != vigil.StatePending || got.LastObservation == nil || !strings.HasPrefix(got.LastObservation.Summary, "running") {
		t.Fatalf("before the restart the watch is %s %+v, want pending and running", got.State, got.LastObservation)
	}
	d1.stop() // the daemon is gone; its scheduler state with it

	d2 := startDaemon(t, st, dir)
	got := wait(t, d2, w.ID, 10*time.Second)
	if got.State != vigil.StateFired || got.Outcome.Observation.Facts["tail"] != "finished\n" {
		t.Fatalf("after the restart the watch is %s %+v, want fired", got.State, got.Outcome)
	}
	if msgs := messages(t, d2); len(msgs) != 1 || msgs[0].Type != vigil.MessageFired {
		t.Fatalf("mailbox = %+v, want exactly one fired message", msgs)
	}
}

// TestStopWhileStarting: a Stop that arrives while the supervisor is being
// started ends the run as soon as it is up, rather than missing it.
func TestStopWhileStarting(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	hold := filepath.Join(t.TempDir(), "go")
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	w := run.New(run.Config{AllowExec: true, Dir: dir, SupervisorArgv: []string{exe},
		SupervisorEnv: []string{"VIGIL_TEST_SUPERVISE=1", "VIGIL_TEST_SUPERVISE_HOLD=" + hold}, KillGrace: 500 * time.Millisecond})
	c, err := w.Canonicalize(t.Context(), json.RawMessage(`{"shell":"sleep 60"}`), time.Now())
	if err != nil {
		t.Fatal(err)
	}
	const id = "01STOPWHILESTARTING"
	probed := make(chan error, 1)
	go func() {
		_, err := w.Probe(context.Background(), watcher.Probe{WatchID: id, Kind: vigil.KindRun, Predicate: c.Predicate, Now: time.Now()})
		probed <- err
	}()
	// The supervisor is held before it starts anything; the pid file
	// exists from the start's first step.
	for end := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		if _, err := os.Stat(filepath.Join(dir, id+".pid")); err == nil {
			break
		}
		if time.Now().After(end) {
			t.Fatal("the start never made its pid file")
		}
	}
	if err := w.Stop(t.Context(), id); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(hold, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := <-probed; err != nil {
		t.Fatalf("Probe = %v", err)
	}
	if s := waitStatus(t, dir, id); !s.Terminated {
		t.Fatalf("status = %+v, want the run terminated once it was up", s)
	}
}

// waitStatus waits for the supervisor to record the end of id's run.
func waitStatus(t *testing.T, dir, id string) run.Status {
	t.Helper()
	path := filepath.Join(dir, id+".json")
	for end := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if b, err := os.ReadFile(path); err == nil {
			var s run.Status
			if err := json.Unmarshal(b, &s); err != nil {
				t.Fatalf("status %s: %v", b, err)
			}
			return s
		}
		if time.Now().After(end) {
			t.Fatalf("no status file for %s", id)
		}
	}
}

// TestRunRefusals: bad input is refused at registration with its code.
func TestRunRefusals(t *testing.T) {
	t.Parallel()
	w := newWatcher(t, t.TempDir(), nil)
	long := `["x"` + strings.Repeat(`,"x"`, 300) + `]`
	for _, tt := range []struct{ pred, field string }{
		{`{"argv":` + long + `}`, "predicate.argv"},
		{`{"argv":["date"],"tail":2000000}`, "predicate.tail"},
		{`{}`, "predicate"},
	} {
		_, err := w.Canonicalize(context.Background(), json.RawMessage(tt.pred), time.Time{})
		if vigil.ErrorCode(err) != vigil.CodeInvalidPredicate || vigil.ErrorField(err) != tt.field {
			t.Errorf("Canonicalize(%.40s) = %v, want invalid_predicate on %s", tt.pred, err, tt.field)
		}
	}
	if err := run.New(run.Config{Dir: t.TempDir()}).Admit(context.Background(), nil); vigil.ErrorCode(err) != vigil.CodeWatchUnobservable {
		t.Errorf("Admit without exec = %v", err)
	}
}

// TestProbeReadsTheRunDirectory: a probe answers from the files alone: a
// status file settles the watch; a pid file nobody locks, with no status,
// whose record names a supervisor (or cannot be read) is a supervisor that
// died without a word, which may have started the program.
func TestProbeReadsTheRunDirectory(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	w := newWatcher(t, dir, nil)
	pred := json.RawMessage(`{"argv":["true"],"tail":4}`)
	t0 := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	code := func(n int) *int { return &n }
	tests := []struct {
		name    string
		st      *run.Status
		pid     string // the pid file's record, when st is nil
		verdict vigil.Verdict
		summary string
	}{
		{"exit 0", &run.Status{ExitCode: code(0), Tail: "all done\n"}, "", vigil.VerdictSatisfied, "exited 0 after 1m30s"},
		{"exit 2", &run.Status{ExitCode: code(2)}, "", vigil.VerdictFailed, "exited 2 after 1m30s"},
		{"signal", &run.Status{Signal: "SIGKILL"}, "", vigil.VerdictFailed, "killed by SIGKILL after 1m30s"},
		{"deadline", &run.Status{Signal: "SIGTERM", Terminated: true}, "", vigil.VerdictFailed, "terminated by vigil (SIGTERM) after 1m30s"},
		{"could not start", &run.Status{Error: "starting x: permission denied"}, "", vigil.VerdictUnavailable, ""},
		{"supervisor gone", nil, `{"supervisor":1,"pid":2}`, vigil.VerdictUnavailable, ""},
		{"supervisor gone while starting", nil, `{"supervisor":1,"pid":0,"started_at":"0001-01-01T00:00:00Z"}`, vigil.VerdictUnavailable, ""},
		{"record cut short", nil, `{"supervisor":1,"pi`, vigil.VerdictUnavailable, ""},
	}
	for i, tt := range tests {
		id := fmt.Sprintf("W%d", i)
		if tt.st != nil {
			tt.st.WatchID, tt.st.StartedAt, tt.st.EndedAt = id, t0, t0.Add(90*time.Second)
			b, _ := json.Marshal(tt.st)
			if err := os.WriteFile(filepath.Join(dir, id+".json"), b, 0o600); err != nil {
				t.Fatal(err)
			}
		} else if err := os.WriteFile(filepath.Join(dir, id+".pid"), []byte(tt.pid), 0o600); err != nil {
			t.Fatal(err)
		}
		obs, err := watcher.Run(context.Background(), w, watcher.Probe{WatchID: id, Kind: vigil.KindRun, Predicate: pred})
		if err != nil || obs.Verdict != tt.verdict || obs.Summary != tt.summary {
			t.Errorf("%s: %+v, %v; want %s %q", tt.name, obs, err, tt.verdict, tt.summary)
		}
		if tt.verdict == vigil.VerdictUnavailable && !obs.Permanent {
			t.Errorf("%s: %+v, want a permanent answer", tt.name, obs)
		}
		if tt.name == "exit 0" && obs.Facts["tail"] != "…\n" {
			t.Errorf("tail %q, want the predicate's last 4 bytes, the cut marked", obs.Facts["tail"])
		}
	}
}
