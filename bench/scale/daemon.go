package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"

	"github.com/vigil-run/vigil/client"
	"github.com/vigil-run/vigil/daemon"
)

// daemonArgs are the flags every daemon here runs with beyond its address
// and data directory: the caps on pending watches raised out of the way
// (they bound admission only; nothing else depends on them). Everything
// else is the default: SQLite in the data dir, synchronous=FULL, 8 probe
// workers, loopback probe targets allowed (deny_private=false).
var daemonArgs = []string{"--max-active", "100000000", "--max-active-per-recipient", "100000000"}

// proc is one `vigil serve` process.
type proc struct {
	e       *env
	dataDir string
	addr    string
	logPath string
	cmd     *exec.Cmd
	started time.Time     // just before exec
	done    chan struct{} // closed once the process has exited
	exit    error
}

// start execs `vigil serve` on dataDir, on a free loopback port. Its output
// goes to daemon.log beside the data directory.
func (e *env) start(dataDir string) (*proc, error) {
	addr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	home := filepath.Join(e.root, "home")
	if err := os.MkdirAll(home, 0o700); err != nil {
		return nil, err
	}
	d := &proc{e: e, dataDir: dataDir, addr: addr, logPath: filepath.Join(filepath.Dir(dataDir), "daemon.log"), done: make(chan struct{})}
	logf, err := os.OpenFile(d.logPath, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	fmt.Fprintf(logf, "--- start at %s\n", time.Now().Format(time.RFC3339Nano))
	args := append([]string{"serve", "--listen", addr, "--data-dir", dataDir}, daemonArgs...)
	d.cmd = exec.Command(e.bin, args...)
	// HOME gives the daemon its default roots; nothing of the user's.
	d.cmd.Env = []string{"HOME=" + home, "PATH=" + os.Getenv("PATH")}
	d.cmd.Stdout, d.cmd.Stderr = logf, logf
	// If this program dies without cleaning up, the kernel kills the daemon.
	d.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	e.mu.Lock()
	if e.cleaned {
		e.mu.Unlock()
		return nil, errors.New("shutting down")
	}
	d.started = time.Now()
	err = d.cmd.Start()
	if err == nil {
		e.live[d] = struct{}{}
	}
	e.mu.Unlock()
	if err != nil {
		return nil, err
	}
	go func() {
		d.exit = d.cmd.Wait()
		close(d.done)
	}()
	return d, nil
}

func (d *proc) pid() int { return d.cmd.Process.Pid }

// ready polls /readyz every 5 ms until it answers 200. It returns, counted
// from exec, when the daemon first answered at all (its listener is up:
// store opened and migrated) and when /readyz said ready (the scheduler is
// primed with every pending watch: daemon.Run sets ready only after
// engine.Prime).
func (d *proc) ready(timeout time.Duration) (listening, ready time.Duration, err error) {
	hc := &http.Client{Timeout: 5 * time.Second}
	defer hc.CloseIdleConnections()
	for {
		select {
		case <-d.done:
			return 0, 0, fmt.Errorf("vigil serve exited before it was ready (%v); %s", d.exit, d.logTail())
		default:
		}
		resp, err := hc.Get("http://" + d.addr + "/readyz")
		if err == nil {
			at := time.Since(d.started)
			code := resp.StatusCode
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if listening == 0 {
				listening = at
			}
			if code == http.StatusOK {
				return listening, at, nil
			}
		}
		if time.Since(d.started) > timeout {
			return 0, 0, fmt.Errorf("vigil serve was not ready %v after exec; %s", timeout, d.logTail())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// client returns a client of the daemon with the admin token (no
// registration rate limit: that applies to scoped tokens).
func (d *proc) client(conns int) (*client.Client, error) {
	tok, err := daemon.ReadToken(daemon.TokenPath(d.dataDir))
	if err != nil {
		return nil, err
	}
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: conns}}
	return client.New(d.addr, tok, &client.Options{HTTPClient: hc})
}

// stop sends SIGTERM and waits up to grace for the daemon to exit (SIGKILL
// after that). It returns how long the exit took.
func (d *proc) stop(grace time.Duration) (time.Duration, error) {
	defer func() {
		d.e.mu.Lock()
		delete(d.e.live, d)
		d.e.mu.Unlock()
	}()
	t := time.Now()
	select {
	case <-d.done:
		return 0, fmt.Errorf("vigil serve had already exited (%v); %s", d.exit, d.logTail())
	default:
	}
	_ = d.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-d.done:
		took := time.Since(t)
		var ee *exec.ExitError
		if d.exit != nil && !errors.As(d.exit, &ee) {
			return took, d.exit
		}
		if d.exit != nil {
			return took, fmt.Errorf("vigil serve exited with %v on SIGTERM; %s", d.exit, d.logTail())
		}
		return took, nil
	case <-time.After(grace):
		_ = d.cmd.Process.Kill()
		<-d.done
		return time.Since(t), fmt.Errorf("vigil serve did not exit within %v of SIGTERM: killed", grace)
	}
}

// logTail is the end of the daemon's log, for error messages.
func (d *proc) logTail() string {
	b, err := os.ReadFile(d.logPath)
	if err != nil {
		return "no log"
	}
	if len(b) > 2000 {
		b = b[len(b)-2000:]
		if i := bytes.IndexByte(b, '\n'); i >= 0 {
			b = b[i+1:]
		}
	}
	return "end of " + d.logPath + ":\n" + string(b)
}

func freeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}
