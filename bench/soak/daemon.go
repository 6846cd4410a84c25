package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/vigil-run/vigil/daemon"
)

// proc is the daemon under test: a vigil serve process.
type proc struct {
	dir, bin, dataDir, addr string
	plain                   bool // the stock cmd/vigil binary, no sidecar
	cmd                     *exec.Cmd
	logf                    *os.File
	exited                  chan struct{}
	exitErr                 error

	// metricsURL is where goroutines are read: the daemon's own /metrics
	// when it serves one, else the sidecar of bench/soak/vigild; "" when
	// neither is there (-plain on a daemon without /metrics).
	metricsURL string
	metricsOwn bool   // metricsURL is the daemon's own /metrics
	sidecar    string // the file the sidecar writes its address to
	sidecarURL string // http://ADDR of the sidecar; "" with -plain
	hc         *http.Client
}

// build compiles the daemon: bench/soak/vigild (cmd/vigil plus the
// sidecar), or with plain the stock ./cmd/vigil of the repository root.
func (p *proc) build() error {
	p.bin = filepath.Join(p.dir, "vigil")
	var cmd *exec.Cmd
	if p.plain {
		out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "github.com/vigil-run/vigil").Output()
		if err != nil {
			return fmt.Errorf("go list: %w", err)
		}
		cmd = exec.Command("go", "build", "-o", p.bin, "./cmd/vigil")
		cmd.Dir = strings.TrimSpace(string(out))
	} else {
		cmd = exec.Command("go", "build", "-o", p.bin, "github.com/vigil-run/vigil/bench/soak/vigild")
	}
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build: %w\n%s", err, out)
	}
	return nil
}

// start runs vigil serve on a free loopback port with a fresh data dir.
func (p *proc) start() error {
	var err error
	if p.addr, err = freeAddr(); err != nil {
		return err
	}
	p.dataDir = filepath.Join(p.dir, "data")
	home := filepath.Join(p.dir, "home")
	if err := os.MkdirAll(home, 0o700); err != nil {
		return err
	}
	if p.logf, err = os.Create(filepath.Join(p.dir, "daemon.log")); err != nil {
		return err
	}
	p.sidecar = filepath.Join(p.dir, "metrics.addr")
	cmd := exec.Command(p.bin, "serve", "--listen", p.addr, "--data-dir", p.dataDir)
	cmd.Env = []string{"HOME=" + home, "PATH=" + os.Getenv("PATH")}
	if !p.plain {
		cmd.Env = append(cmd.Env, "VIGIL_SOAK_METRICS_FILE="+p.sidecar)
	}
	cmd.Stdout, cmd.Stderr = p.logf, p.logf
	if err := cmd.Start(); err != nil {
		return err
	}
	p.cmd = cmd
	p.exited = make(chan struct{})
	go func() { p.exitErr = cmd.Wait(); close(p.exited) }()
	p.hc = &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 2}}
	return nil
}

func (p *proc) pid() int { return p.cmd.Process.Pid }

// ready waits (at most 60 s) for /readyz, then finds where the goroutine
// count is served, and returns the admin token.
func (p *proc) ready(ctx context.Context) (string, error) {
	deadline := time.Now().Add(60 * time.Second)
	for {
		select {
		case <-p.exited:
			return "", fmt.Errorf("the daemon exited before it was ready: %v (log: %s)", p.exitErr, p.logf.Name())
		default:
		}
		if resp, err := p.hc.Get("http://" + p.addr + "/readyz"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return "", errors.New("the daemon was not ready within 60 s")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if !p.plain {
		b, err := os.ReadFile(p.sidecar)
		if err != nil {
			return "", fmt.Errorf("the sidecar wrote no address: %w", err)
		}
		p.sidecarURL = "http://" + strings.TrimSpace(string(b))
		if _, err := p.fetchMetrics(p.sidecarURL + "/metrics"); err != nil {
			return "", fmt.Errorf("the sidecar's /metrics: %w", err)
		}
	}
	// The daemon's own /metrics first (SPEC §7), else the sidecar's.
	if _, err := p.fetchMetrics("http://" + p.addr + "/metrics"); err == nil {
		p.metricsURL, p.metricsOwn = "http://"+p.addr+"/metrics", true
	} else if p.sidecarURL != "" {
		p.metricsURL = p.sidecarURL + "/metrics"
	}
	return daemon.ReadToken(daemon.TokenPath(p.dataDir))
}

// metricsValues are what /metrics says, by name; absent names are absent.
type metricsValues map[string]float64

// fetchMetrics reads a Prometheus text page and requires go_goroutines.
func (p *proc) fetchMetrics(url string) (metricsValues, error) {
	resp, err := p.hc.Get(url)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		_, _ = io.Copy(io.Discard, resp.Body)
		return nil, fmt.Errorf("%s answered %s", url, resp.Status)
	}
	out := metricsValues{}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		name, val, ok := strings.Cut(line, " ")
		if !ok || strings.Contains(name, "{") {
			continue
		}
		if v, err := strconv.ParseFloat(strings.TrimSpace(val), 64); err == nil {
			out[name] = v
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if _, ok := out["go_goroutines"]; !ok {
		return nil, fmt.Errorf("%s has no go_goroutines", url)
	}
	return out, nil
}

// goroutines reads the daemon's goroutine count, or -1.
func (p *proc) goroutines() float64 {
	if p.metricsURL == "" {
		return -1
	}
	m, err := p.fetchMetrics(p.metricsURL)
	if err != nil {
		return -1
	}
	return m["go_goroutines"]
}

// fetch saves one of the sidecar's pprof pages to file.
func (p *proc) fetch(path, file string) error {
	if p.sidecarURL == "" {
		return errors.New("no pprof sidecar (-plain)")
	}
	hc := &http.Client{Timeout: 2 * time.Minute}
	resp, err := hc.Get(p.sidecarURL + path)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	f, err := os.Create(file)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// rss reads VmRSS from /proc/PID/status, in bytes.
func rss(pid int) (float64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			f := strings.Fields(v)
			if len(f) != 2 || f[1] != "kB" {
				return 0, fmt.Errorf("VmRSS line %q", line)
			}
			kb, err := strconv.ParseFloat(f[0], 64)
			return kb * 1024, err
		}
	}
	return 0, errors.New("no VmRSS")
}

// cpuTime reads utime+stime of PID from /proc/PID/stat.
func cpuTime(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// The command name may hold spaces; the fields after it are fixed.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, errors.New("stat without a command name")
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 13 {
		return 0, errors.New("short stat")
	}
	// Fields 14 and 15 of stat: f[0] is field 3.
	ut, err1 := strconv.ParseInt(f[11], 10, 64)
	st, err2 := strconv.ParseInt(f[12], 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return 0, err
	}
	return time.Duration(ut+st) * time.Second / clockTicks, nil
}

// clockTicks is USER_HZ, 100 on every Linux this runs on.
const clockTicks = 100

// stop sends SIGTERM and reports how long the daemon took to exit and
// how; past 15 s it is killed.
func (p *proc) stop() (time.Duration, error) {
	if p.cmd == nil {
		return 0, nil
	}
	t := time.Now()
	select {
	case <-p.exited:
		return 0, fmt.Errorf("the daemon had already exited: %v", p.exitErr)
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
		return time.Since(t), p.exitErr
	case <-time.After(15 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.exited
		return time.Since(t), errors.New("still running 15 s after SIGTERM; killed")
	}
}

// kill ends the daemon at once, for error paths.
func (p *proc) kill() {
	if p.cmd == nil {
		return
	}
	select {
	case <-p.exited:
	default:
		_ = p.cmd.Process.Kill()
		<-p.exited
	}
	if p.logf != nil {
		p.logf.Close()
	}
}

func freeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}
