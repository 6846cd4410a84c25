//go:build unix

package command_test

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/vigil-run/vigil"
	"github.com/vigil-run/vigil/deliver/command"
)

// Two outcomes that wake one session do not run two turns of it at once
// (both would start from the same history, each blind to the other's
// outcome): the second waits for the first to end. The fake harness says
// on a FIFO when each run starts and ends, and the first ends only when
// told, so a second run started alongside it is seen, never missed.
func TestResumeOneTurnOfASessionAtATime(t *testing.T) {
	t.Parallel()
	rec := t.TempDir()
	events := filepath.Join(rec, "events")
	if err := syscall.Mkfifo(events, 0o600); err != nil {
		t.Fatal(err)
	}
	bin := t.TempDir()
	script := "#!/bin/sh\nr='" + rec + "'\necho \"start $$\" > \"$r/events\"\n" +
		"while [ ! -e \"$r/go\" ]; do sleep 0.01; done\necho \"end $$\" > \"$r/events\"\n"
	if err := os.WriteFile(filepath.Join(bin, "claude"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	seen := make(chan string, 8)
	go func() {
		// Opened for reading and writing, it stays open between writers.
		f, err := os.OpenFile(events, os.O_RDWR, 0)
		if err != nil {
			t.Error(err)
			return
		}
		defer f.Close()
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			seen <- sc.Text()
		}
	}()

	opts, _ := json.Marshal(map[string]any{"resume": map[string]any{"harness": "claude", "session": "sess-1", "cwd": rec,
		"env": map[string]string{"PATH": bin + ":/usr/bin:/bin"}}})
	r := command.NewResume(command.Config{})
	waiting := make(chan struct{}, 2)
	command.SetWaiting(r, func() { waiting <- struct{}{} })
	sent := make(chan error, 2)
	send := func() {
		d := delivery(t, string(opts), vigil.StateFired)
		retry, err := r.Send(t.Context(), d)
		if retry {
			t.Errorf("Send asked to be tried again: %v", err)
		}
		sent <- err
	}
	go send()
	first := <-seen
	go send()
	select {
	case <-waiting:
	case ev := <-seen:
		t.Fatalf("a second turn of the session started (%q) while the first (%q) ran", ev, first)
	}
	if err := os.WriteFile(filepath.Join(rec, "go"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	got := []string{first}
	for range 3 {
		got = append(got, <-seen)
	}
	for range 2 {
		if err := <-sent; err != nil {
			t.Error(err)
		}
	}
	kinds := make([]string, len(got))
	for i, ev := range got {
		kinds[i], _, _ = strings.Cut(ev, " ")
	}
	if !slices.Equal(kinds, []string{"start", "end", "start", "end"}) || strings.TrimPrefix(got[0], "start ") != strings.TrimPrefix(got[1], "end ") {
		t.Errorf("runs = %q, want one after the other", got)
	}
}
