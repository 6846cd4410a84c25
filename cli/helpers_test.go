package cli

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"go.uber.org/goleak"

	"github.com/vigil-run/vigil/daemon"
	"github.com/vigil-run/vigil/internal/daemontest"
	"github.com/vigil-run/vigil/watcher/run"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

// TestMain fails the package if a test leaves a goroutine behind. Started
// as "supervise" (a run watch of a test daemon, whose executable is this
// test binary), it is the supervisor instead.
func TestMain(m *testing.M) {
	if len(os.Args) == 2 && os.Args[1] == "supervise" {
		os.Exit(run.Supervise(os.Stdin, os.Stdout, os.Stderr))
	}
	goleak.VerifyTestMain(m)
}

// testDaemon is an in-process daemon on 127.0.0.1:0 with a temp data dir,
// exec allowed and file watches allowed under root.
type testDaemon struct {
	*daemon.Daemon
	root    string
	dataDir string
}

func startDaemon(t *testing.T) *testDaemon {
	t.Helper()
	cfg := daemontest.Config(t)
	cfg.AllowExec = true
	d := daemontest.Start(t, cfg, nil)
	return &testDaemon{Daemon: d.Daemon, root: cfg.Roots[0], dataDir: cfg.DataDir}
}

// result is what one run of the command tree did.
type result struct {
	stdout, stderr string
	code           int
}

// vigil runs the command tree with args against d (found through
// VIGIL_ADDR and VIGIL_TOKEN in a private environment).
func (d *testDaemon) vigil(t *testing.T, args ...string) result {
	t.Helper()
	env := map[string]string{"HOME": t.TempDir(), "USER": "tester"}
	if d != nil {
		env["VIGIL_ADDR"] = d.Addr()
		env["VIGIL_TOKEN"] = d.Token()
	}
	return runCLI(t, env, args...)
}

// runCLI runs the command tree with args in the environment env.
func runCLI(t *testing.T, vars map[string]string, args ...string) result {
	t.Helper()
	return cliRun{vars: vars}.run(t.Context(), args...)
}

// cliRun is one run of the command tree in the environment vars, with
// what runCLI leaves as usual made plain: stdout (nil: kept in the
// result) and the clock (nil: the real one).
type cliRun struct {
	vars   map[string]string
	stdout io.Writer
	clock  clock
}

// run runs the command tree with args and ctx.
func (cr cliRun) run(ctx context.Context, args ...string) result {
	var out, errb bytes.Buffer
	stdout := cr.stdout
	if stdout == nil {
		stdout = &out
	}
	root := newRoot(&env{stdout: stdout, stderr: &errb, getenv: func(k string) string { return cr.vars[k] },
		terminal: func(io.Writer) bool { return false }, clock: cr.clock})
	root.SetArgs(args)
	err := root.ExecuteContext(ctx)
	return result{stdout: out.String(), stderr: errb.String(), code: ExitCode(err)}
}

// fakeClock is a clock whose Sleep returns at once (unless ctx has
// ended), moving Now on by the time asked and recording it. onSleep, when
// set, is called after each sleep with how many there have been. Past
// maxFakeSleeps, Sleep fails: a loop that would never end does.
type fakeClock struct {
	mu      sync.Mutex
	start   time.Time
	now     time.Time
	slept   []time.Duration
	onSleep func(n int)
}

const maxFakeSleeps = 200

func newFakeClock() *fakeClock {
	start := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	return &fakeClock{start: start, now: start}
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Sleep(ctx context.Context, d time.Duration) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	c.mu.Lock()
	if len(c.slept) >= maxFakeSleeps {
		c.mu.Unlock()
		return fmt.Errorf("fake clock: slept %d times already", maxFakeSleeps)
	}
	c.now = c.now.Add(d)
	c.slept = append(c.slept, d)
	n := len(c.slept)
	c.mu.Unlock()
	if c.onSleep != nil {
		c.onSleep(n)
	}
	return ctx.Err()
}

// pauses returns the sleeps so far.
func (c *fakeClock) pauses() []time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.slept)
}

// elapsed returns how far Now has moved since the clock was made.
func (c *fakeClock) elapsed() time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now.Sub(c.start)
}

// checkPauses holds that a command paused for want, in order, and for
// nothing else.
func checkPauses(t *testing.T, clk *fakeClock, want []time.Duration) {
	t.Helper()
	if diff := cmp.Diff(want, clk.pauses(), cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("pauses (-want +got):\n%s", diff)
	}
}

// checkRetried holds that a command rode out a daemon that could not
// answer: it paused for pauses, in order, and said so on stderr in one
// line, once, telling told (the error that began the outage, or the start
// of it) and that it tries again.
func checkRetried(t *testing.T, r result, clk *fakeClock, told string, pauses []time.Duration) {
	t.Helper()
	checkPauses(t, clk, pauses)
	const again = "; trying again (Ctrl-C to stop)\n"
	if !strings.HasPrefix(r.stderr, "vigil: "+told) || !strings.HasSuffix(r.stderr, again) || strings.Count(r.stderr, "\n") != 1 {
		t.Errorf("stderr = %q, want one line telling %q and that it tries again", r.stderr, told)
	}
}

// checkGaveUp holds that a command gave up on a daemon that never
// answered once after had passed on clk: exit 2, the last error (lastErr)
// last on stderr.
func checkGaveUp(t *testing.T, r result, clk *fakeClock, after time.Duration, lastErr string) {
	t.Helper()
	if r.code != ExitUsage || !strings.HasSuffix(r.stderr, "vigil: "+lastErr+"\n") {
		t.Errorf("daemon down: exit %d, stderr %q; want %d and the error %q", r.code, r.stderr, ExitUsage, lastErr)
	}
	if got := clk.elapsed(); got != after {
		t.Errorf("it gave up after %s, want %s", got, after)
	}
}

// checkNotRetried holds that a command ended at once, without a pause:
// exit 2, with stderr.
func checkNotRetried(t *testing.T, r result, clk *fakeClock, stderr string) {
	t.Helper()
	if r.code != ExitUsage || r.stderr != stderr || len(clk.pauses()) > 0 {
		t.Errorf("exit %d, stderr %q, pauses %v; want %d at once, %q", r.code, r.stderr, clk.pauses(), ExitUsage, stderr)
	}
}

// listenAt serves h on addr (127.0.0.1:0: a free port) until the test
// ends, and returns the listener: closed, the daemon no longer listens,
// as when it stops, and listenAt on its address starts it again.
func listenAt(t *testing.T, addr string, h http.Handler) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("listen on %s: %v", addr, err)
	}
	srv := &http.Server{Handler: h}
	t.Cleanup(func() { srv.Close() })
	go srv.Serve(ln)
	return ln
}

// failWriter fails every write, as stdout sent to /dev/full does.
type failWriter struct{}

func (failWriter) Write([]byte) (int, error) {
	return 0, errors.New("write /dev/stdout: no space left on device")
}

// transcript records commands and what they printed, for a golden file.
type transcript struct {
	mu sync.Mutex
	b  strings.Builder
}

func (tr *transcript) add(args []string, r result) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	fmt.Fprintf(&tr.b, "$ vigil %s\n", strings.Join(quoteArgs(args), " "))
	tr.b.WriteString(r.stdout)
	for _, l := range strings.SplitAfter(r.stderr, "\n") {
		if l != "" {
			tr.b.WriteString("stderr: " + l)
		}
	}
	fmt.Fprintf(&tr.b, "[exit %d]\n", r.code)
}

func quoteArgs(args []string) []string {
	out := make([]string, len(args))
	for i, a := range args {
		if a == "" || strings.ContainsAny(a, " \"'$") {
			a = "'" + a + "'"
		}
		out[i] = a
	}
	return out
}

// run runs one command, records it, and returns its result.
func (tr *transcript) run(t *testing.T, d *testDaemon, args ...string) result {
	t.Helper()
	r := d.vigil(t, args...)
	tr.add(args, r)
	return r
}

var (
	ulidRE    = regexp.MustCompile(`\b[0-9A-HJKMNP-TV-Z]{26}\b`)
	wordTime  = regexp.MustCompile(`\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC`)
	wireTime  = regexp.MustCompile(`\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z`)
	pollsJSON = regexp.MustCompile(`"polls": \d+`)
	localAddr = regexp.MustCompile(`127\.0\.0\.1:\d+`)
)

// normalize replaces what changes from run to run with placeholders of
// the same width where alignment depends on it: watch ids (numbered in
// order of appearance), times, loopback ports, the temp root and the
// working directory, and poll counts in JSON.
func (d *testDaemon) normalize(s string) string {
	if d != nil {
		s = strings.ReplaceAll(s, d.root, "$ROOT")
	}
	if wd, err := os.Getwd(); err == nil {
		s = strings.ReplaceAll(s, wd, "$CWD")
	}
	ids := map[string]string{}
	s = ulidRE.ReplaceAllStringFunc(s, func(id string) string {
		if n, ok := ids[id]; ok {
			return n
		}
		n := fmt.Sprintf("WATCH%021d", len(ids)+1)
		ids[id] = n
		return n
	})
	s = wordTime.ReplaceAllString(s, "YYYY-MM-DD hh:mm:ss UTC")
	s = wireTime.ReplaceAllString(s, "YYYY-MM-DDThh:mm:ss.sssZ")
	s = localAddr.ReplaceAllString(s, "127.0.0.1:PORT")
	// How many probes fit before a deadline depends on timing.
	s = pollsJSON.ReplaceAllString(s, `"polls": N`)
	return s
}

// golden compares got with testdata/name, or rewrites it with -update.
func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if diff := cmp.Diff(string(want), got); diff != "" {
		t.Errorf("%s differs (-want +got; go test -update rewrites it):\n%s", path, diff)
	}
}
