//go:build unix

package command_test

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/json"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/vigil-run/vigil"
	"github.com/vigil-run/vigil/deliver"
	"github.com/vigil-run/vigil/deliver/command"
	"github.com/vigil-run/vigil/internal/pgtest"
	"github.com/vigil-run/vigil/store/postgres"
)

// turnHarness writes a fake claude that says on the FIFO it returns the
// events of ("start W", "end W", W its watch id) and ends only once the
// file go exists in rec; it returns the directory to put first on PATH,
// rec, and the events as they come.
func turnHarness(t *testing.T) (bin, rec string, seen <-chan string) {
	t.Helper()
	rec = t.TempDir()
	events := filepath.Join(rec, "events")
	if err := syscall.Mkfifo(events, 0o600); err != nil {
		t.Fatal(err)
	}
	bin = t.TempDir()
	script := "#!/bin/sh\nr='" + rec + "'\necho \"start $VIGIL_WATCH_ID\" > \"$r/events\"\n" +
		"while [ ! -e \"$r/go\" ]; do sleep 0.01; done\necho \"end $VIGIL_WATCH_ID\" > \"$r/events\"\n"
	if err := os.WriteFile(filepath.Join(bin, "claude"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	ch := make(chan string, 16)
	f, err := os.OpenFile(events, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	go func() {
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			ch <- sc.Text()
		}
	}()
	return bin, rec, ch
}

// replica is one daemon's store, resume channel and dispatcher on the
// shared test database.
type replica struct {
	st      *postgres.Store
	waiting chan struct{}
	// recorded hears the status of each receipt that ends an attempt.
	recorded chan string
	d        *deliver.Dispatcher
	// app is the application_name of its connections.
	app string
}

// startReplica opens a store on u (its connections named apart) and runs
// a dispatcher over it whose resume channel takes its turns there, until
// t's cleanup.
func startReplica(t *testing.T, u string) *replica {
	t.Helper()
	app := "vigil_test_" + strings.ToLower(rand.Text()[:8])
	pu, err := url.Parse(u)
	if err != nil {
		t.Fatal(err)
	}
	q := pu.Query()
	q.Set("application_name", app)
	pu.RawQuery = q.Encode()
	st, err := postgres.Open(t.Context(), pu.String(), &postgres.Options{MaxConns: 2})
	if err != nil {
		t.Fatal(err)
	}
	r := &replica{st: st, waiting: make(chan struct{}, 8), recorded: make(chan string, 8), app: app}
	res := command.NewResume(command.Config{Turns: st})
	command.SetWaiting(res, func() { r.waiting <- struct{}{} })
	r.d = deliver.New(deliver.Config{Store: st, Channels: map[string]deliver.Channel{deliver.ChannelResume: res},
		ReceiptFunc: func(_, status string) { r.recorded <- status }})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.d.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		<-done
		st.Close()
	})
	return r
}

func wakeOpts(bin, rec, session string) string {
	b, _ := json.Marshal(map[string]any{"resume": map[string]any{"harness": "claude", "session": session, "cwd": rec,
		"env": map[string]string{"PATH": bin + ":/usr/bin:/bin"}, "on": "any", "timeout": "10m"}})
	return string(b)
}

// deliverOn settles watch id (waking session) and hands its outcome to
// r's dispatcher.
func deliverOn(t *testing.T, r *replica, id, opts string) {
	t.Helper()
	w, m := settledWake(t, r.st, id, opts)
	r.d.Deliver(w, m)
}

// Two replicas that each resume the same session, for outcomes of watches
// on shards they each hold, run the two turns one after the other, not at
// once (both would start from the same history, each blind to the other's
// outcome): the per-daemon turn does not reach the other replica; the turn
// in the database does.
func TestResumeOneTurnOfASessionAcrossReplicas(t *testing.T) {
	t.Parallel()
	u := pgtest.Schema(t, "vigil_turns")
	a, b := startReplica(t, u), startReplica(t, u)
	bin, rec, seen := turnHarness(t)
	opts := wakeOpts(bin, rec, "sess-1")

	deliverOn(t, a, "w1", opts)
	first := <-seen
	if first != "start w1" {
		t.Fatalf("first event %q, want start w1", first)
	}
	deliverOn(t, b, "w2", opts)
	select {
	case <-b.waiting:
	case ev := <-seen:
		t.Fatalf("replica b started a second turn of the session (%q) while replica a's ran", ev)
	}
	if err := os.WriteFile(filepath.Join(rec, "go"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	got := []string{first, <-seen, <-seen, <-seen}
	want := []string{"start w1", "end w1", "start w2", "end w2"}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("events = %q, want %q: one turn after the other", got, want)
	}
	delivered(t, a, "w1")
	delivered(t, b, "w2")
}

// Different sessions are not held up by each other's turns, on two
// replicas as on one.
func TestResumeOtherSessionsRunAtOnceAcrossReplicas(t *testing.T) {
	t.Parallel()
	u := pgtest.Schema(t, "vigil_turns")
	a, b := startReplica(t, u), startReplica(t, u)
	bin, rec, seen := turnHarness(t)

	deliverOn(t, a, "w1", wakeOpts(bin, rec, "sess-1"))
	if ev := <-seen; ev != "start w1" {
		t.Fatalf("first event %q, want start w1", ev)
	}
	deliverOn(t, b, "w2", wakeOpts(bin, rec, "sess-2"))
	select {
	case ev := <-seen:
		if ev != "start w2" {
			t.Errorf("second event %q, want start w2 while w1's turn runs", ev)
		}
	case <-b.waiting:
		t.Fatal("the resume of another session waits for sess-1's turn")
	}
	if err := os.WriteFile(filepath.Join(rec, "go"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	delivered(t, a, "w1")
	delivered(t, b, "w2")
}

// A turn held by a replica whose connection to the database dies (the
// replica died, or was cut off) ends with it: the resume another replica
// waits with takes the turn over and runs, instead of waiting for good.
func TestResumeTurnOfADeadReplicaIsTakenOver(t *testing.T) {
	t.Parallel()
	u := pgtest.Schema(t, "vigil_turns")
	a, b := startReplica(t, u), startReplica(t, u)
	bin, rec, seen := turnHarness(t)
	opts := wakeOpts(bin, rec, "sess-1")

	deliverOn(t, a, "w1", opts)
	if ev := <-seen; ev != "start w1" {
		t.Fatalf("first event %q, want start w1", ev)
	}
	deliverOn(t, b, "w2", opts)
	select {
	case <-b.waiting:
	case ev := <-seen:
		t.Fatalf("replica b started a second turn of the session (%q) while replica a's ran", ev)
	}
	// Replica a's turns connection dies; its program runs on (as a
	// replica cut off from the database would).
	pgtest.Exec(t, u, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = $1`, a.app+" resume turns")
	if ev := <-seen; ev != "start w2" {
		t.Errorf("event after replica a's connection died = %q, want start w2", ev)
	}
	if err := os.WriteFile(filepath.Join(rec, "go"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	delivered(t, a, "w1")
	delivered(t, b, "w2")
}

// delivered waits for the receipt that ends the attempt of r's
// dispatcher, and says that the receipt of watch id is delivered.
func delivered(t *testing.T, r *replica, id string) {
	t.Helper()
	if status := <-r.recorded; status != vigil.ReceiptDelivered {
		t.Errorf("watch %s: receipt %s, want delivered", id, status)
	}
	w, err := r.st.WatchGet(t.Context(), id)
	if err != nil || len(w.Receipts) != 1 || w.Receipts[0].Status != vigil.ReceiptDelivered {
		t.Errorf("watch %s: %+v, %v; want one receipt, delivered", id, w, err)
	}
}
