package daemon_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sort"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/goleak"

	"github.com/vigil-run/vigil"
	"github.com/vigil-run/vigil/client"
	"github.com/vigil-run/vigil/daemon"
	"github.com/vigil-run/vigil/internal/daemontest"
	"github.com/vigil-run/vigil/store/sqlite"
)

// TestMain fails the package if any test leaves a goroutine behind: every
// daemon the tests start is shut down, and shutdown must leave nothing.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// testConfig is a daemon on 127.0.0.1:0 keeping its data in dataDir and
// watching files under root, with exec allowed.
func testConfig(dataDir, root string) daemon.Config {
	cfg := daemon.DefaultConfig()
	cfg.Listen = "127.0.0.1:0"
	cfg.DataDir = dataDir
	cfg.Roots = []string{root}
	cfg.AllowExec = true
	cfg.ProbeWorkers = 4
	return cfg
}

// running is a daemon started by start.
type running struct {
	*daemon.Daemon
	stop func() error
}

// start runs a daemon for cfg until the test ends (or stop is called) and
// returns once it is primed.
func start(t testing.TB, cfg daemon.Config) *running {
	t.Helper()
	d := daemontest.Start(t, cfg, nil)
	return &running{Daemon: d.Daemon, stop: d.Stop}
}

// newClient returns a client of d with its admin token.
func newClient(t testing.TB, d *running) *client.Client {
	t.Helper()
	c, err := client.New(d.Addr(), d.Token(), nil)
	if err != nil {
		t.Fatalf("client.New: %v", err)
	}
	t.Cleanup(c.CloseIdleConnections)
	return c
}

// settle long-polls until w is no longer pending.
func settle(t *testing.T, c *client.Client, id string) *vigil.Watch {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	for {
		w, err := c.Wait(ctx, id, 20*time.Second)
		if err != nil {
			t.Fatalf("Wait(%s): %v", id, err)
		}
		if w.State != vigil.StatePending {
			return w
		}
	}
}

func allMessages(t *testing.T, c *client.Client, recipient string) []*vigil.Message {
	t.Helper()
	zero := int64(0)
	page, err := c.Messages(t.Context(), vigil.MessagesRequest{Recipient: recipient, After: &zero, Limit: 1000})
	if err != nil {
		t.Fatalf("Messages: %v", err)
	}
	return page.Messages
}

// TestEndToEnd registers one watch of every kind this build has against
// real targets, waits for each through the API, checks the mailbox, then
// restarts the daemon on the same data dir and checks that everything is
// still there and nothing was delivered twice.
func TestEndToEnd(t *testing.T) {
	t.Parallel()
	dataDir, root := t.TempDir(), t.TempDir()
	cfg := testConfig(dataDir, root)
	d := start(t, cfg)
	c := newClient(t, d)
	ctx := t.Context()
	const rcpt = "e2e"

	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"deploy": {"state": "live"}}`)
	}))
	defer api.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	readyFile := filepath.Join(root, "build", "done.txt")
	if err := os.MkdirAll(filepath.Dir(readyFile), 0o755); err != nil {
		t.Fatal(err)
	}

	regs := []struct {
		kind vigil.Kind
		pred string
	}{
		{vigil.KindTimer, `{"in": "1s"}`},
		{vigil.KindHTTP, fmt.Sprintf(`{"url": %q, "done": {"path": "deploy.state", "equals": "live"}}`, api.URL)},
		{vigil.KindTCP, fmt.Sprintf(`{"address": %q}`, ln.Addr().String())},
		{vigil.KindFile, fmt.Sprintf(`{"path": %q, "contains": "ok"}`, readyFile)},
		{vigil.KindCommand, `{"argv": ["true"]}`},
	}
	ids := map[vigil.Kind]string{}
	for _, r := range regs {
		w, err := c.Register(ctx, vigil.RegisterRequest{Kind: r.kind, Predicate: json.RawMessage(r.pred), Recipient: rcpt, Every: "1s"})
		if r.kind == vigil.KindTimer {
			// A timer is not probed on an interval: every is refused.
			if vigil.ErrorCode(err) != vigil.CodeInvalidRequest {
				t.Fatalf("Register(timer, every 1s) error = %v, want invalid_request", err)
			}
			w, err = c.Register(ctx, vigil.RegisterRequest{Kind: r.kind, Predicate: json.RawMessage(r.pred), Recipient: rcpt})
		}
		if err != nil {
			t.Fatalf("Register(%s): %v", r.kind, err)
		}
		if w.State != vigil.StatePending {
			t.Fatalf("Register(%s) state = %s, want pending", r.kind, w.State)
		}
		ids[r.kind] = w.ID
	}
	// The file appears only now, after the watch was registered.
	if err := os.WriteFile(readyFile, []byte("build ok\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// One more that stays pending across the restart.
	later, err := c.Register(ctx, vigil.RegisterRequest{Kind: vigil.KindTimer, Predicate: json.RawMessage(`{"in": "1h"}`), Recipient: rcpt, Note: "later"})
	if err != nil {
		t.Fatal(err)
	}

	for _, r := range regs {
		w := settle(t, c, ids[r.kind])
		if w.State != vigil.StateFired {
			t.Errorf("%s watch settled %s (%v), want fired", r.kind, w.State, w.Outcome)
		}
		if w.Outcome == nil || w.Outcome.Sentence == "" {
			t.Errorf("%s watch has no outcome sentence", r.kind)
		}
	}

	msgs := allMessages(t, c, rcpt)
	perWatch := map[string]int{}
	for _, m := range msgs {
		perWatch[m.WatchID]++
		if m.Type != vigil.MessageFired {
			t.Errorf("message %d type = %s, want fired", m.Seq, m.Type)
		}
	}
	want := map[string]int{}
	for _, id := range ids {
		want[id] = 1
	}
	if diff := cmp.Diff(want, perWatch); diff != "" {
		t.Errorf("messages per watch (-want +got):\n%s", diff)
	}
	before := listAll(t, c)

	// Restart on the same data dir.
	if err := d.stop(); err != nil {
		t.Fatalf("Run after shutdown = %v, want nil", err)
	}
	d2 := start(t, cfg)
	if d2.Token() != d.Token() {
		t.Errorf("token after restart differs from the first")
	}
	c2 := newClient(t, d2)
	after := listAll(t, c2)
	if diff := cmp.Diff(before, after); diff != "" {
		t.Errorf("watches after restart (-before +after):\n%s", diff)
	}
	if got := allMessages(t, c2, rcpt); len(got) != len(msgs) {
		t.Errorf("after restart the mailbox holds %d messages, want %d", len(got), len(msgs))
	}
	w, err := c2.Watch(ctx, later.ID)
	if err != nil {
		t.Fatal(err)
	}
	if w.State != vigil.StatePending || w.Note != "later" {
		t.Errorf("pending timer after restart: state %s note %q, want pending \"later\"", w.State, w.Note)
	}
	if _, err := c2.Cancel(ctx, later.ID); err != nil {
		t.Fatal(err)
	}
	if got := allMessages(t, c2, rcpt); len(got) != len(msgs)+1 {
		t.Errorf("after a cancel the mailbox holds %d messages, want %d", len(got), len(msgs)+1)
	}
}

// watchRow is what must survive a restart unchanged.
type watchRow struct {
	ID, State, Sentence string
	Polls               int
	Settled             string
}

func listAll(t *testing.T, c *client.Client) []watchRow {
	t.Helper()
	page, err := c.Watches(t.Context(), vigil.ListRequest{Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	var rows []watchRow
	for _, w := range page.Watches {
		r := watchRow{ID: w.ID, State: string(w.State), Settled: vigil.FormatTime(w.SettledAt)}
		if w.State.Terminal() {
			r.Polls = w.Polls
		}
		if w.Outcome != nil {
			r.Sentence = w.Outcome.Sentence
		}
		rows = append(rows, r)
	}
	sort.Slice(rows, func(i, j int) bool { return rows[i].ID < rows[j].ID })
	return rows
}

func TestTimerFiresOnce(t *testing.T) {
	t.Parallel()
	d := start(t, testConfig(t.TempDir(), t.TempDir()))
	c := newClient(t, d)
	w, err := c.Register(t.Context(), vigil.RegisterRequest{Kind: vigil.KindTimer, Predicate: json.RawMessage(`{"in": "1s"}`), Recipient: "r1", Note: "stretch"})
	if err != nil {
		t.Fatal(err)
	}
	got := settle(t, c, w.ID)
	if got.State != vigil.StateFired {
		t.Fatalf("Wait state = %s, want fired", got.State)
	}
	msgs := allMessages(t, c, "r1")
	if len(msgs) != 1 {
		t.Fatalf("inbox holds %d messages, want exactly 1: %v", len(msgs), msgs)
	}
	if msgs[0].WatchID != w.ID || msgs[0].Text != got.Outcome.Sentence {
		t.Errorf("message = %+v, want watch %s with text %q", msgs[0], w.ID, got.Outcome.Sentence)
	}
	// Waiting again answers at once with the same settled watch.
	again, err := c.Wait(t.Context(), w.ID, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if again.State != vigil.StateFired || !again.SettledAt.Equal(got.SettledAt) {
		t.Errorf("second Wait = %s at %v, want fired at %v", again.State, again.SettledAt, got.SettledAt)
	}
}

func TestAuth(t *testing.T) {
	t.Parallel()
	dataDir := filepath.Join(t.TempDir(), "vigil") // created by the daemon
	d := start(t, testConfig(dataDir, t.TempDir()))

	fi, err := os.Stat(filepath.Join(dataDir, "admin.token"))
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("admin.token mode = %v, want 0600", fi.Mode().Perm())
	}
	di, err := os.Stat(dataDir)
	if err != nil {
		t.Fatal(err)
	}
	if di.Mode().Perm()&0o077 != 0 {
		t.Errorf("data dir mode = %v, want no access for group or others", di.Mode().Perm())
	}
	tok, err := daemon.ReadToken(filepath.Join(dataDir, "admin.token"))
	if err != nil || tok != d.Token() || len(tok) != 64 {
		t.Errorf("ReadToken = %q, %v; want the daemon's 64-hex-digit token", tok, err)
	}

	hc := &http.Client{}
	defer hc.CloseIdleConnections()
	for _, tc := range []struct {
		name, auth string
		want       int
	}{
		{"no token", "", http.StatusUnauthorized},
		{"wrong token", "Bearer " + fmt.Sprintf("%064x", 7), http.StatusUnauthorized},
		{"not bearer", "Basic " + d.Token(), http.StatusUnauthorized},
		{"admin token", "Bearer " + d.Token(), http.StatusOK},
	} {
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, d.URL()+"/v1/watches", nil)
		if tc.auth != "" {
			req.Header.Set("Authorization", tc.auth)
		}
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != tc.want {
			t.Errorf("%s: GET /v1/watches = %d, want %d", tc.name, resp.StatusCode, tc.want)
		}
	}
	for _, path := range []string{"/healthz", "/readyz"} {
		resp, err := hc.Get(d.URL() + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("GET %s = %d, want 200", path, resp.StatusCode)
		}
	}

	bad, err := client.New(d.Addr(), "wrong", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer bad.CloseIdleConnections()
	if _, err := bad.Watches(t.Context(), vigil.ListRequest{}); !errors.Is(err, vigil.ErrUnauthorized) {
		t.Errorf("Watches with a wrong token: error = %v, want unauthorized", err)
	}
}

// TestShutdownEndsLongPolls checks that a daemon with a long-poll and an
// event stream open shuts down promptly and ends both.
func TestShutdownEndsLongPolls(t *testing.T) {
	t.Parallel()
	d := start(t, testConfig(t.TempDir(), t.TempDir()))
	c := newClient(t, d)
	w, err := c.Register(t.Context(), vigil.RegisterRequest{Kind: vigil.KindTimer, Predicate: json.RawMessage(`{"in": "1h"}`), Recipient: "r"})
	if err != nil {
		t.Fatal(err)
	}
	// The client resumes a stream that ends, so the daemon's ending it
	// shows as a prompt shutdown; the channel closes once sctx ends.
	sctx, unsubscribe := context.WithCancel(t.Context())
	defer unsubscribe()
	events, err := c.Subscribe(sctx, vigil.EventFilter{WatchID: w.ID})
	if err != nil {
		t.Fatal(err)
	}
	waitErr := make(chan error, 1)
	go func() {
		_, err := c.Wait(t.Context(), w.ID, 55*time.Second)
		waitErr <- err
	}()
	// Let the long-poll reach the daemon: a second request answered means
	// the first is in the server too (one connection each; ordering is not
	// guaranteed, so also accept a shutdown that beats it).
	if _, err := c.Watch(t.Context(), w.ID); err != nil {
		t.Fatal(err)
	}
	began := time.Now()
	if err := d.stop(); err != nil {
		t.Fatalf("Run = %v, want nil", err)
	}
	if took := time.Since(began); took > 8*time.Second {
		t.Errorf("shutdown took %v with a long-poll open, want it prompt", took)
	}
	select {
	case err := <-waitErr:
		if err == nil {
			t.Errorf("Wait across shutdown returned no error")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Wait did not return after shutdown")
	}
	unsubscribe()
	for range events {
		// Drain: the channel must close now the subscription has ended.
	}
}

func TestBackup(t *testing.T) {
	t.Parallel()
	dataDir := t.TempDir()
	cfg := testConfig(dataDir, t.TempDir())
	d := start(t, cfg)
	c := newClient(t, d)
	w, err := c.Register(t.Context(), vigil.RegisterRequest{Kind: vigil.KindTimer, Predicate: json.RawMessage(`{"in": "1h"}`), Recipient: "r"})
	if err != nil {
		t.Fatal(err)
	}
	dest := filepath.Join(t.TempDir(), "copy.db")
	// While the daemon runs.
	if err := daemon.Backup(t.Context(), cfg, dest); err != nil {
		t.Fatalf("Backup: %v", err)
	}
	if err := daemon.Backup(t.Context(), cfg, dest); err == nil {
		t.Errorf("Backup onto an existing file: no error")
	}
	st, err := sqlite.Open(t.Context(), dest, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	got, err := st.WatchGet(t.Context(), w.ID)
	if err != nil {
		t.Fatalf("the copy lacks watch %s: %v", w.ID, err)
	}
	if got.State != vigil.StatePending {
		t.Errorf("copied watch state = %s, want pending", got.State)
	}

	empty := testConfig(t.TempDir(), t.TempDir())
	if err := daemon.Backup(t.Context(), empty, filepath.Join(t.TempDir(), "x.db")); err == nil {
		t.Errorf("Backup of a data dir with no database: no error")
	}
	if _, err := os.Stat(empty.DatabasePath()); err == nil {
		t.Errorf("Backup created a database where there was none")
	}
}

func TestNewerSchemaRefusesToStart(t *testing.T) {
	t.Parallel()
	dataDir := t.TempDir()
	cfg := testConfig(dataDir, t.TempDir())
	d := start(t, cfg)
	if err := d.stop(); err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("sqlite", cfg.DatabasePath())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.ExecContext(t.Context(), "INSERT INTO goose_db_version (version_id, is_applied) VALUES (9999, 1)"); err != nil {
		t.Fatal(err)
	}
	db.Close()
	_, err = daemon.New(t.Context(), cfg, nil)
	if !errors.Is(err, sqlite.ErrSchemaNewer) {
		t.Fatalf("New on a newer schema: error = %v, want ErrSchemaNewer", err)
	}
}

func TestPortInUse(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	cfg := testConfig(t.TempDir(), t.TempDir())
	cfg.Listen = ln.Addr().String()
	if _, err := daemon.New(t.Context(), cfg, nil); err == nil {
		t.Fatal("New on a port in use: no error")
	}
}
