//go:build unix

package command_test

import (
	"bufio"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/vigil-run/vigil"
	"github.com/vigil-run/vigil/deliver"
	"github.com/vigil-run/vigil/deliver/command"
	"github.com/vigil-run/vigil/store/memstore"
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

// A resume waiting for its session's turn has written no receipt yet: a
// crash then would leave it sending, read back unknown and never run,
// though it never started. When the daemon starts stopping while it waits
// it starts nothing, even when the turn before it ends within the grace:
// a turn started then would be cut when the grace ends, and read back
// unknown. The next start runs it, once.
func TestResumeWaitingAtShutdownRunsAtNextStart(t *testing.T) {
	t.Parallel()
	rec := t.TempDir()
	bin := t.TempDir()
	// Each run appends the watch id to runs, says so on started, and the
	// first waits for go.
	script := "#!/bin/sh\nr='" + rec + "'\necho \"$VIGIL_WATCH_ID\" >> \"$r/runs\"\necho \"$VIGIL_WATCH_ID\" > \"$r/started\"\n" +
		"while [ ! -e \"$r/go\" ]; do sleep 0.01; done\n"
	if err := os.WriteFile(filepath.Join(bin, "claude"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(rec, "started"), 0o600); err != nil {
		t.Fatal(err)
	}
	started := make(chan string, 4)
	go func() {
		f, err := os.OpenFile(filepath.Join(rec, "started"), os.O_RDWR, 0)
		if err != nil {
			t.Error(err)
			return
		}
		defer f.Close()
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			started <- sc.Text()
		}
	}()
	opts, _ := json.Marshal(map[string]any{"resume": map[string]any{"harness": "claude", "session": "sess-1", "cwd": rec,
		"env": map[string]string{"PATH": bin + ":/usr/bin:/bin"}, "on": "any", "timeout": "10m"}})
	st := memstore.New()
	ws := map[string]*vigil.Watch{}
	msgs := map[string]*vigil.Message{}
	for _, id := range []string{"w1", "w2"} {
		ws[id], msgs[id] = settledWake(t, st, id, string(opts))
	}
	resume := command.NewResume(command.Config{})
	waiting := make(chan struct{}, 4)
	command.SetWaiting(resume, func() { waiting <- struct{}{} })
	newDispatcher := func() *deliver.Dispatcher {
		return deliver.New(deliver.Config{Store: st, Channels: map[string]deliver.Channel{deliver.ChannelResume: resume},
			StopGrace: time.Hour})
	}
	d := newDispatcher()
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	d.Deliver(ws["w1"], msgs["w1"])
	first := <-started
	if first != "w1" {
		t.Fatalf("started %q, want w1", first)
	}
	d.Deliver(ws["w2"], msgs["w2"])
	<-waiting
	// While it waits, nothing is written: a crash now would leave no
	// receipt sending, which would read unknown and never run.
	if w, err := st.WatchGet(t.Context(), "w2"); err != nil || len(w.Receipts) != 0 {
		t.Errorf("w2 waiting for its turn: receipts %+v, %v; want none", w.Receipts, err)
	}
	// The shutdown starts while w2 waits; w1's turn ends within the grace.
	cancel()
	if err := os.WriteFile(filepath.Join(rec, "go"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	receipt := func(id string) vigil.Receipt {
		t.Helper()
		w, err := st.WatchGet(t.Context(), id)
		if err != nil || len(w.Receipts) > 1 {
			t.Fatalf("watch %s: %+v, %v; want one receipt at most", id, w, err)
		}
		if len(w.Receipts) == 0 {
			return vigil.Receipt{}
		}
		return w.Receipts[0]
	}
	if r := receipt("w1"); r.Status != vigil.ReceiptDelivered {
		t.Errorf("w1's receipt = %+v, want delivered", r)
	}
	if r := receipt("w2"); r.Status != "" {
		t.Errorf("w2's receipt = %+v, want none: it started nothing", r)
	}
	if b, _ := os.ReadFile(filepath.Join(rec, "runs")); string(b) != "w1\n" {
		t.Errorf("runs during the shutdown = %q, want w1 only", b)
	}

	// The next start runs it, once.
	d = newDispatcher()
	if err := d.Resume(t.Context()); err != nil {
		t.Fatal(err)
	}
	ctx, cancel = context.WithCancel(t.Context())
	defer cancel()
	go func() { done <- d.Run(ctx) }()
	if got := <-started; got != "w2" {
		t.Fatalf("started %q at the next start, want w2", got)
	}
	// In flight: the shutdown lets it end and record its receipt.
	cancel()
	<-done
	if r := receipt("w2"); r.Status != vigil.ReceiptDelivered || r.Attempts != 1 {
		t.Errorf("w2's receipt after the next start = %+v, want delivered on its first attempt", r)
	}
	if b, _ := os.ReadFile(filepath.Join(rec, "runs")); string(b) != "w1\nw2\n" {
		t.Errorf("runs = %q, want w1 then w2, once each", b)
	}
}

// settledWake stores watch id settled fired, with delivery options opts,
// and returns it and its outcome message.
func settledWake(t *testing.T, st vigil.Store, id, opts string) (*vigil.Watch, *vigil.Message) {
	t.Helper()
	now := time.Now().UTC().Truncate(time.Millisecond)
	w := &vigil.Watch{ID: id, Kind: vigil.KindTimer, Predicate: json.RawMessage(`{"at":"` + id + `"}`), Recipient: "agent-7",
		State: vigil.StatePending, Mode: vigil.ModeUntil, Deadline: now.Add(time.Hour), CreatedAt: now, Deliver: json.RawMessage(opts)}
	w.Identity = vigil.Identity(w.Recipient, w.Kind, w.Mode, w.Predicate)
	if _, err := st.WatchCreate(t.Context(), vigil.WatchCreateParams{Watch: w}); err != nil {
		t.Fatal(err)
	}
	out := &vigil.Outcome{State: vigil.StateFired, Sentence: "The timer went off.", Reason: "satisfied"}
	m := &vigil.Message{ID: "msg-" + id, Recipient: w.Recipient, WatchID: id, Type: vigil.MessageFired, Text: out.Sentence, CreatedAt: now}
	if _, err := st.WatchSettle(t.Context(), []vigil.WatchSettleParams{{ID: id, State: vigil.StateFired, Outcome: out, SettledAt: now, Polls: 1, Message: m}}); err != nil {
		t.Fatal(err)
	}
	got, err := st.WatchGet(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	return got, m
}

// A resume's receipt detail is valid UTF-8 whatever the harness wrote on
// stderr (bytes that are not UTF-8, a long line of multi-byte characters
// cut at the detail's bound): PostgreSQL refuses text that is not, so the
// receipt that ends the attempt was never written there; the dispatcher
// tried again every few seconds while the daemon ran, and the receipt
// read sending, then unknown.
func TestResumeDetailIsUTF8(t *testing.T) {
	t.Parallel()
	for name, stderr := range map[string]string{
		"not UTF-8":  `printf 'session \377\376 not found\n' >&2`,
		"multi-byte": `printf 'x' >&2; i=0; while [ $i -lt 200 ]; do printf '\342\200\246' >&2; i=$((i+1)); done; echo >&2`,
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			bin := t.TempDir()
			if err := os.WriteFile(filepath.Join(bin, "claude"), []byte("#!/bin/sh\n"+stderr+"\nexit 1\n"), 0o755); err != nil {
				t.Fatal(err)
			}
			opts, _ := json.Marshal(map[string]any{"resume": map[string]any{"harness": "claude", "session": "sess-1",
				"env": map[string]string{"PATH": bin + ":/usr/bin:/bin"}, "on": "any", "timeout": "10m"}})
			st := memstore.New()
			w, m := settledWake(t, st, "w1", string(opts))
			recorded := make(chan string, 1)
			d := deliver.New(deliver.Config{Store: st, Channels: map[string]deliver.Channel{deliver.ChannelResume: command.NewResume(command.Config{})},
				ReceiptFunc: func(_, status string) { recorded <- status }})
			ctx, cancel := context.WithCancel(t.Context())
			done := make(chan error, 1)
			go func() { done <- d.Run(ctx) }()
			d.Deliver(w, m)
			<-recorded
			cancel()
			<-done
			got, err := st.WatchGet(t.Context(), "w1")
			if err != nil || len(got.Receipts) != 1 {
				t.Fatalf("%+v, %v; want one receipt", got, err)
			}
			if r := got.Receipts[0]; r.Status != vigil.ReceiptUndeliverable || !utf8.ValidString(r.Detail) || !strings.HasPrefix(r.Detail, "exit status 1: ") {
				t.Errorf("receipt = %+v (valid UTF-8: %v), want undeliverable with the exit status, in UTF-8", r, utf8.ValidString(r.Detail))
			}
		})
	}
}
