package daemon_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/vigil-run/vigil"
	"github.com/vigil-run/vigil/client"
	"github.com/vigil-run/vigil/daemon"
)

// pgStore returns a store URL for a fresh schema of the test database
// (VIGIL_TEST_POSTGRES), dropped at cleanup; it skips without one, and
// fails under CI.
func pgStore(t testing.TB) string {
	t.Helper()
	base := os.Getenv("VIGIL_TEST_POSTGRES")
	if base == "" {
		if os.Getenv("CI") != "" {
			t.Fatal("VIGIL_TEST_POSTGRES is empty under CI: the daemon's PostgreSQL tests must run there")
		}
		t.Skip("VIGIL_TEST_POSTGRES is not set: the daemon's PostgreSQL tests need a database (e.g. postgres://postgres@127.0.0.1:5432/test?sslmode=disable)")
	}
	var b [6]byte
	rand.Read(b[:])
	schema := "vigil_daemon_" + hex.EncodeToString(b[:])
	exec := func(stmt string) {
		ctx := context.Background()
		c, err := pgx.Connect(ctx, base)
		if err != nil {
			t.Fatalf("connect to the test database: %v", err)
		}
		defer c.Close(ctx)
		if _, err := c.Exec(ctx, stmt); err != nil {
			t.Fatalf("%s: %v", stmt, err)
		}
	}
	exec("CREATE SCHEMA " + schema)
	t.Cleanup(func() { exec("DROP SCHEMA " + schema + " CASCADE") })
	u, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	return u.String()
}

// TestPostgresTimers: a daemon on PostgreSQL registers and fires timer
// watches, each with one message; a restart on the same database keeps the
// pending and the settled watches and the mailbox, and delivers nothing
// twice.
func TestPostgresTimers(t *testing.T) {
	t.Parallel()
	store := pgStore(t)
	cfg := testConfig(t.TempDir(), t.TempDir())
	cfg.Store = store
	d := start(t, cfg)
	c := newClient(t, d)
	info, err := c.Daemon(t.Context())
	if err != nil || info.Store != "postgres" || info.Role != "active" || info.Replica == "" {
		t.Fatalf("Daemon() = %+v, %v; want store postgres, role active, a replica id", info, err)
	}
	resp, err := http.Get(d.URL() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{`vigil_replica_info{replica="` + info.Replica + `",store="postgres"} 1`, "vigil_replica_active 1"} {
		if !strings.Contains(string(body), want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	var ids []string
	for i := range 20 {
		w, err := c.Register(t.Context(), vigil.RegisterRequest{Kind: vigil.KindTimer,
			Predicate: json.RawMessage(fmt.Sprintf(`{"in": "%dms"}`, 1000+i)), Recipient: "r"})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, w.ID)
	}
	long, err := c.Register(t.Context(), vigil.RegisterRequest{Kind: vigil.KindTimer, Predicate: json.RawMessage(`{"in": "1h"}`), Recipient: "r"})
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range ids {
		if got := settle(t, c, id); got.State != vigil.StateFired {
			t.Fatalf("%s = %s, want fired", id, got.State)
		}
	}
	if msgs := allMessages(t, c, "r"); len(msgs) != len(ids) {
		t.Fatalf("mailbox holds %d messages, want %d", len(msgs), len(ids))
	}
	if err := d.stop(); err != nil {
		t.Fatal(err)
	}

	// Another daemon (its own data dir) on the same database.
	cfg2 := testConfig(t.TempDir(), t.TempDir())
	cfg2.Store = store
	d2 := start(t, cfg2)
	c2 := newClient(t, d2)
	w, err := c2.Watch(t.Context(), long.ID)
	if err != nil || w.State != vigil.StatePending {
		t.Fatalf("after restart, the 1 h timer = %+v, %v; want pending", w, err)
	}
	for _, id := range ids {
		w, err := c2.Watch(t.Context(), id)
		if err != nil || w.State != vigil.StateFired {
			t.Fatalf("after restart, %s = %+v, %v; want fired", id, w, err)
		}
	}
	if msgs := allMessages(t, c2, "r"); len(msgs) != len(ids) {
		t.Errorf("after restart the mailbox holds %d messages, want %d: nothing delivered twice", len(msgs), len(ids))
	}
}

// TestPostgresStandby: a second daemon on the same database stands by
// (503, role standby) while the first schedules, and takes over when it
// stops: a timer registered on the first fires once, on the second.
func TestPostgresStandby(t *testing.T) {
	t.Parallel()
	store := pgStore(t)
	cfg := testConfig(t.TempDir(), t.TempDir())
	cfg.Store = store
	a := start(t, cfg)
	ca := newClient(t, a)

	cfgB := testConfig(t.TempDir(), t.TempDir())
	cfgB.Store = store
	b, err := daemon.New(t.Context(), cfgB, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- b.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-errc; err != nil {
			t.Errorf("standby Run = %v", err)
		}
	})
	cb, err := client.New(b.Addr(), b.Token(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cb.CloseIdleConnections)
	waitRole(t, cb, "standby")
	select {
	case <-b.Primed():
		t.Fatal("second daemon primed while the first holds the scheduling lock")
	default:
	}
	if _, err := cb.Watches(t.Context(), vigil.ListRequest{}); vigil.ErrorCode(err) != vigil.CodeUnavailable {
		t.Errorf("standby's API: %v, want unavailable", err)
	}

	// A standby stopped while it waits for the lock stops at once.
	cfgC := testConfig(t.TempDir(), t.TempDir())
	cfgC.Store = store
	dc, err := daemon.New(t.Context(), cfgC, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctxC, cancelC := context.WithCancel(context.Background())
	errC := make(chan error, 1)
	go func() { errC <- dc.Run(ctxC) }()
	cc, err := client.New(dc.Addr(), dc.Token(), nil)
	if err != nil {
		t.Fatal(err)
	}
	waitRole(t, cc, "standby")
	cc.CloseIdleConnections()
	cancelC()
	select {
	case err := <-errC:
		if err != nil {
			t.Errorf("standby stopped while waiting: Run = %v, want nil", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("a standby did not stop within 20 s of being asked to")
	}

	w, err := ca.Register(t.Context(), vigil.RegisterRequest{Kind: vigil.KindTimer, Predicate: json.RawMessage(`{"in": "2s"}`), Recipient: "r"})
	if err != nil {
		t.Fatal(err)
	}
	if err := a.stop(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-b.Primed():
	case err := <-errc:
		t.Fatalf("standby stopped instead of taking over: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("standby did not take over within 30 s of the first daemon stopping")
	}
	got := settle(t, cb, w.ID)
	if got.State != vigil.StateFired {
		t.Fatalf("%s = %s on the new active daemon, want fired", w.ID, got.State)
	}
	if msgs := allMessages(t, cb, "r"); len(msgs) != 1 {
		t.Errorf("mailbox holds %d messages, want 1", len(msgs))
	}
	if info, err := cb.Daemon(t.Context()); err != nil || info.Role != "active" {
		t.Errorf("after taking over: Daemon() = %+v, %v; want active", info, err)
	}
}

// TestPostgresLockLostStops: a daemon whose scheduling lock's session is
// ended (a database restart, a partition) stops with an error rather than
// schedule beside the daemon that may take the lock next.
func TestPostgresLockLostStops(t *testing.T) {
	t.Parallel()
	store := pgStore(t)
	cfg := testConfig(t.TempDir(), t.TempDir())
	cfg.Store = store
	d, err := daemon.New(t.Context(), cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	errc := make(chan error, 1)
	go func() { errc <- d.Run(context.Background()) }()
	select {
	case <-d.Primed():
	case err := <-errc:
		t.Fatalf("Run returned before it was primed: %v", err)
	}
	u, _ := url.Parse(store)
	h := fnv.New64a()
	h.Write([]byte("vigil scheduler " + u.Query().Get("search_path")))
	ctx := context.Background()
	c, err := pgx.Connect(ctx, os.Getenv("VIGIL_TEST_POSTGRES"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	var ended int
	if err := c.QueryRow(ctx, `SELECT count(pg_terminate_backend(pid)) FROM pg_locks WHERE locktype = 'advisory' AND granted
		AND ((classid::bigint << 32) | objid::bigint) = $1`, int64(h.Sum64())).Scan(&ended); err != nil || ended != 1 {
		t.Fatalf("ending the lock's session: %d ended, %v; want 1", ended, err)
	}
	select {
	case err := <-errc:
		if err == nil || !strings.Contains(err.Error(), "scheduling lock") {
			t.Errorf("Run = %v, want an error about the scheduling lock", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the daemon kept running 30 s after losing its scheduling lock")
	}
}

// TestBackupRefusesPostgres: vigil backup copies SQLite stores only and
// says what to use instead, without the URL's password.
func TestBackupRefusesPostgres(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t.TempDir(), t.TempDir())
	cfg.Store = "postgres://u:secret@db.example/vigil"
	err := daemon.Backup(t.Context(), cfg, t.TempDir()+"/copy.db")
	if err == nil || !strings.Contains(err.Error(), "pg_dump") || strings.Contains(err.Error(), "secret") {
		t.Errorf("Backup of a PostgreSQL store = %v, want a refusal naming pg_dump", err)
	}
}

// waitRole asks the daemon behind c for its role until it is want (it says
// "starting" until it has asked for the scheduling lock).
func waitRole(t *testing.T, c *client.Client, want string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		info, err := c.Daemon(t.Context())
		if err == nil && info.Role == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("Daemon() = %+v, %v; want role %s", info, err, want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
