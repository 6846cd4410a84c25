package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"time"
)

// Durability is printed with every figure: the daemon opens its store with
// the default settings, which are these.
const durability = "SQLite synchronous=FULL, WAL"

// env is one run of the program: the vigil binary, the temporary
// directory everything lives in, the daemons running, and the stores of
// pending watches shared between scenarios.
type env struct {
	cfg    config
	root   string // temporary directory: the binary, data dirs, logs
	bin    string
	source string // what the binary was built from

	mu       sync.Mutex
	live     map[*proc]struct{}
	fixtures map[int]*fixture
	cleaned  bool
}

func newEnv(c config) (*env, error) {
	root, err := os.MkdirTemp(c.dir, "vigil-scale-")
	if err != nil {
		return nil, err
	}
	e := &env{cfg: c, root: root, bin: filepath.Join(root, "vigil"), live: map[*proc]struct{}{}, fixtures: map[int]*fixture{}}
	if err := e.build(); err != nil {
		os.RemoveAll(root)
		return nil, err
	}
	return e, nil
}

// build compiles the real vigil binary from the repository this bench
// module replaces vigil with (bench/go.mod: replace … => ../).
func (e *env) build() error {
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "github.com/vigil-run/vigil").Output()
	if err != nil {
		return fmt.Errorf("go list: %w", err)
	}
	src := strings.TrimSpace(string(out))
	e.source = sourceState(src)
	cmd := exec.Command("go", "build", "-o", e.bin, "./cmd/vigil")
	cmd.Dir = src
	if out, err := cmd.CombinedOutput(); err != nil {
		return errors.Join(fmt.Errorf("go build: %w", err), errors.New(string(out)))
	}
	return nil
}

// cleanup stops every daemon still running and removes the temporary
// directory (unless -keep). It may be called more than once, from the
// signal handler too.
func (e *env) cleanup() {
	e.mu.Lock()
	if e.cleaned {
		e.mu.Unlock()
		return
	}
	e.cleaned = true
	live := make([]*proc, 0, len(e.live))
	for d := range e.live {
		live = append(live, d)
	}
	e.mu.Unlock()
	for _, d := range live {
		_, _ = d.stop(5 * time.Second)
	}
	if e.cfg.keep {
		fmt.Fprintf(os.Stderr, "scale: kept %s\n", e.root)
		return
	}
	os.RemoveAll(e.root)
}

// dir makes a new directory under the temporary root.
func (e *env) dir(name string) (string, error) {
	return os.MkdirTemp(e.root, name+"-")
}

func (e *env) sizesOr(def ...int) []int {
	if len(e.cfg.sizes) > 0 {
		return e.cfg.sizes
	}
	return def
}

// describe is the one-line context printed first: where and how.
func (e *env) describe() string {
	kernel, _ := os.ReadFile("/proc/sys/kernel/osrelease")
	load, _ := os.ReadFile("/proc/loadavg")
	var l1 string
	if f := strings.Fields(string(load)); len(f) > 0 {
		l1 = f[0]
	}
	return fmt.Sprintf("%s; %d CPUs, Linux %s, %s; load average %s at the start; the daemon is `vigil serve` built from %s; tmp %s",
		durability, runtime.NumCPU(), strings.TrimSpace(string(kernel)), runtime.Version(), l1, e.source, e.root)
}

// sourceState names the commit the binary was built from, and says so if
// files outside bench/ differ from it (the binary has those changes).
func sourceState(root string) string {
	head, err := exec.Command("git", "-C", root, "rev-parse", "--short", "HEAD").Output()
	if err != nil {
		return root + " (not a git checkout)"
	}
	s := "commit " + strings.TrimSpace(string(head))
	out, err := exec.Command("git", "-C", root, "status", "--porcelain", "--untracked-files=no", "--", ".", ":(exclude)bench").Output()
	if err == nil && len(strings.TrimSpace(string(out))) > 0 {
		s += fmt.Sprintf(" plus uncommitted changes to %d file(s) outside bench/", len(strings.Split(strings.TrimSpace(string(out)), "\n")))
	}
	return s
}

// fixture is a data directory holding n pending timers due in hours (and
// nothing else), made once and shared by memory, restart and scale idle.
// No daemon runs on it between scenarios.
type fixture struct {
	n       int
	dataDir string
	method  string // how it was filled, for the tables
	took    time.Duration
}

// pendingFixture returns the data directory with n pending timers, making
// it the first time: timer i is due 2 h + i ms from now, for recipient
// r<i mod 1000> (so 1 000 000 fit under the default cap of 1 000 per
// recipient).
func (e *env) pendingFixture(ctx context.Context, n int) (*fixture, error) {
	e.mu.Lock()
	f := e.fixtures[n]
	e.mu.Unlock()
	if f != nil {
		return f, nil
	}
	dir, err := e.dir(fmt.Sprintf("pending-%d", n))
	if err != nil {
		return nil, err
	}
	f = &fixture{n: n, dataDir: filepath.Join(dir, "data")}
	base := time.Now().Add(2 * time.Hour).Truncate(time.Millisecond)
	plan := func(i int) timerPlan {
		return timerPlan{recipient: fmt.Sprintf("r%d", i%1000), at: base.Add(time.Duration(i) * time.Millisecond)}
	}
	progressf("making %d pending timers (%s)", n, e.fillMethod(n))
	f.method, f.took, _, err = e.fillTimers(ctx, f.dataDir, n, plan, nil, false)
	if err != nil {
		return nil, err
	}
	progressf("%d pending timers made in %v (%s)", n, f.took.Round(time.Millisecond), f.method)
	e.mu.Lock()
	e.fixtures[n] = f
	e.mu.Unlock()
	return f, nil
}

// progressf reports progress on stderr, so stdout stays the tables.
func progressf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "scale: %s "+format+"\n", append([]any{time.Now().Format("15:04:05")}, args...)...)
}
