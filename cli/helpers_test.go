package cli

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
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
	now     time.Time
	slept   []time.Duration
	onSleep func(n int)
}

const maxFakeSleeps = 200

func newFakeClock() *fakeClock {
	return &fakeClock{now: time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)}
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
