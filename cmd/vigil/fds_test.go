//go:build unix

package main

import (
	"bufio"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vigil-run/vigil"
	"github.com/vigil-run/vigil/internal/daemontest"
)

// TestCommandInheritsNoFileOfTheDaemons starts `vigil serve` (the built
// binary) as whatever starts it may: with a file and a pipe that are not
// close-on-exec, here as its fds 3 and 4 (a shell's redirection, a
// socket of systemd's, a pipe its parent waits on to close). A command
// watch's probe, which the daemon starts itself, lists the files it holds:
// only its stdin, stdout and stderr, which the probe gives it on purpose,
// and none of the daemon's.
func TestCommandInheritsNoFileOfTheDaemons(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the vigil binary")
	}
	if _, err := os.Stat("/proc/self/fd"); err != nil {
		t.Skip("no /proc/self/fd to list a command's files with")
	}
	t.Parallel()
	bin := vigilBin(t)
	dir := t.TempDir()
	dataDir := filepath.Join(dir, "data")

	// What the daemon is given: a started process gets its ExtraFiles
	// without close-on-exec, as it would get a shell's or systemd's.
	given, err := os.Create(filepath.Join(dir, "given"))
	if err != nil {
		t.Fatal(err)
	}
	defer given.Close()
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer pr.Close()
	defer pw.Close()
	logR, logW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer logR.Close()

	cmd := exec.Command(bin, "serve", "--listen", "127.0.0.1:0", "--data-dir", dataDir, "--allow-exec")
	cmd.Env = []string{"HOME=" + dir, "PATH=" + os.Getenv("PATH")}
	cmd.Stderr = logW
	cmd.ExtraFiles = []*os.File{given, pw}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	logW.Close()
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })

	// The daemon says where it listens in its log; the rest of the log is
	// kept for a failure's message.
	var (
		mu  sync.Mutex
		log strings.Builder
	)
	listen := make(chan string, 1)
	go func() {
		re := regexp.MustCompile(`msg="vigil is serving" listen=(\S+)`)
		sc := bufio.NewScanner(logR)
		for sc.Scan() {
			mu.Lock()
			log.WriteString(sc.Text() + "\n")
			mu.Unlock()
			if m := re.FindStringSubmatch(sc.Text()); m != nil {
				listen <- m[1]
			}
		}
		close(listen)
	}()
	t.Cleanup(func() {
		if t.Failed() {
			mu.Lock()
			defer mu.Unlock()
			t.Logf("the daemon's log:\n%s", tail(log.String(), 4000))
		}
	})

	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	var addr string
	select {
	case a, ok := <-listen:
		if !ok {
			t.Fatal("the daemon exited without serving")
		}
		addr = a
	case <-ctx.Done():
		t.Fatal("the daemon did not say it was serving within 30s")
	}
	c := daemontest.ReadyClient(ctx, t, addr, dataDir)

	// ls, started by the probe itself, lists the files it holds, each with
	// what it is.
	w, err := c.Register(ctx, vigil.RegisterRequest{Kind: vigil.KindCommand, Recipient: "agent",
		Predicate: json.RawMessage(`{"argv": ["ls", "-l", "/proc/self/fd"]}`)})
	if err != nil {
		t.Fatalf("Register: %v", err)
	}
	got, err := c.Wait(ctx, w.ID, 20*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if got.State != vigil.StateFired || got.Outcome == nil {
		t.Fatalf("the command watch is %s, %+v; want fired", got.State, got.LastObservation)
	}
	listing, _ := got.Outcome.Observation.Facts["stdout"].(string)
	if fds := heldFDs(listing); !slices.Equal(fds, []int{0, 1, 2}) {
		t.Errorf("the command holds the fds %v; want only 0, 1 and 2, its stdin, stdout and stderr (the daemon was given 3 and 4 without close-on-exec):\n%s", fds, listing)
	}
}

// heldFDs returns the fds `ls -l /proc/self/fd` lists, sorted, but the one
// ls reads that directory with.
func heldFDs(listing string) []int {
	var fds []int
	own := regexp.MustCompile(`^/proc/[0-9]+/fd$`)
	for _, line := range strings.Split(listing, "\n") {
		fields := strings.Fields(line)
		if n := len(fields); n >= 3 && fields[n-2] == "->" && !own.MatchString(fields[n-1]) {
			if fd, err := strconv.Atoi(fields[n-3]); err == nil {
				fds = append(fds, fd)
			}
		}
	}
	slices.Sort(fds)
	return fds
}
