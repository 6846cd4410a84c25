package daemon_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/vigil-run/vigil"
	"github.com/vigil-run/vigil/client"
	"github.com/vigil-run/vigil/daemon"
	"github.com/vigil-run/vigil/internal/pgtest"
	"github.com/vigil-run/vigil/store/postgres"
)

// pgStore returns a store URL for a fresh schema of the test database
// (VIGIL_TEST_POSTGRES), dropped at cleanup; it skips without one, and
// fails under CI.
func pgStore(t testing.TB) string {
	t.Helper()
	return pgtest.Schema(t, "vigil_daemon")
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

// shardsOf waits until the replicas behind cs hold every shard between
// them, none twice, each at least want (its fair share), and returns each
// one's shards. It asks each replica (GET /v1/daemon) until then.
func shardsOf(t *testing.T, want int, cs ...*client.Client) [][]int {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		out := make([][]int, len(cs))
		seen := map[int]int{}
		ok := true
		for i, c := range cs {
			info, err := c.Daemon(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			out[i] = info.Shards
			if len(info.Shards) < want {
				ok = false
			}
			for _, s := range info.Shards {
				seen[s]++
			}
		}
		if ok && len(seen) == 64 {
			for s, n := range seen {
				if n != 1 {
					t.Fatalf("shard %d is held by %d replicas", s, n)
				}
			}
			return out
		}
		if time.Now().After(deadline) {
			t.Fatalf("the replicas did not share the shards within 30 s: %v", out)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestPostgresReplicas: two daemons on one database share the 64 shards
// fairly; timers registered on one replica are settled, once each, by the
// replica that holds their shard (it heard of them through the database);
// a check-now on a replica that does not hold the watch reaches its
// holder; when one replica stops, the other takes all its shards at once
// (it left) and settles what it held.
func TestPostgresReplicas(t *testing.T) {
	t.Parallel()
	store := pgStore(t)
	cfgA := testConfig(t.TempDir(), t.TempDir())
	cfgA.Store, cfgA.Replica, cfgA.Lease, cfgA.LeaseRenew = store, "replica-a", 3*time.Second, time.Second
	a := start(t, cfgA)
	ca := newClient(t, a)
	if got := shardsOf(t, 64, ca); len(got[0]) != 64 {
		t.Fatalf("one replica holds %d shards, want 64", len(got[0]))
	}
	cfgB := cfgA
	cfgB.DataDir, cfgB.Replica = t.TempDir(), "replica-b"
	sameKeys(t, cfgA.DataDir, cfgB.DataDir)
	b := start(t, cfgB)
	cb := newClient(t, b)
	held := shardsOf(t, 32, ca, cb)

	// Timers registered on A, half of them (by shard) B's.
	var ids []string
	onB := 0
	for i := range 40 {
		w, err := ca.Register(t.Context(), vigil.RegisterRequest{Kind: vigil.KindTimer,
			Predicate: json.RawMessage(fmt.Sprintf(`{"in": "%dms"}`, 500+i)), Recipient: "r"})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, w.ID)
		if slices.Contains(held[1], postgres.ShardOf(w.ID)) {
			onB++
		}
	}
	if onB == 0 || onB == len(ids) {
		t.Fatalf("%d of %d watches are in B's shards: the test needs some on each", onB, len(ids))
	}
	db := pgConn(t, store)
	settledBy := waitSettled(t, db, ids)
	for _, id := range ids {
		want := "replica-a"
		if slices.Contains(held[1], postgres.ShardOf(id)) {
			want = "replica-b"
		}
		if settledBy[id] != want {
			t.Errorf("%s (shard %d) settled by %q, want %q, the holder of its shard", id, postgres.ShardOf(id), settledBy[id], want)
		}
	}
	if msgs := allMessages(t, ca, "r"); len(msgs) != len(ids) {
		t.Errorf("mailbox holds %d messages, want %d", len(msgs), len(ids))
	}

	// Check-now on A of an http watch B holds: B probes it (the target
	// answers a new count each time, so each probe is recorded), and a
	// cancel on A makes B forget it (no probe after).
	var hits atomic.Int64
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"n": %d}`, hits.Add(1))
	}))
	defer target.Close()
	var hw *vigil.Watch
	for i := 0; hw == nil; i++ {
		w, err := ca.Register(t.Context(), vigil.RegisterRequest{Kind: vigil.KindHTTP, Recipient: "h", Every: "1h",
			Predicate: json.RawMessage(fmt.Sprintf(`{"url": "%s/%d", "done": {"path": "n", "equals": -1}}`, target.URL, i))})
		if err != nil {
			t.Fatal(err)
		}
		if slices.Contains(held[1], postgres.ShardOf(w.ID)) {
			hw = w
		} else if _, err := ca.Cancel(t.Context(), w.ID); err != nil {
			t.Fatal(err)
		}
	}
	polls := func() int {
		var n int
		if err := db.QueryRow(t.Context(), `SELECT polls FROM watches WHERE id = $1`, hw.ID).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	waitFor(t, "the first probe by B", func() bool { return polls() >= 1 })
	before := polls()
	if _, err := ca.Check(t.Context(), hw.ID); err != nil {
		t.Fatalf("Check on the replica that does not hold the watch: %v", err)
	}
	waitFor(t, "B's probe asked for on A", func() bool { return polls() > before })
	if _, err := ca.Cancel(t.Context(), hw.ID); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "B forgetting the cancelled watch", func() bool {
		m, err := http.Get(b.URL() + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(m.Body)
		m.Body.Close()
		return strings.Contains(string(body), "\nvigil_watches_pending 0\n")
	})

	// B stops: A holds everything again, and settles what was B's.
	w, err := ca.Register(t.Context(), vigil.RegisterRequest{Kind: vigil.KindTimer, Predicate: json.RawMessage(`{"in": "3s"}`), Recipient: "r2"})
	if err != nil {
		t.Fatal(err)
	}
	if err := b.stop(); err != nil {
		t.Fatal(err)
	}
	shardsOf(t, 64, ca)
	if got := waitSettled(t, db, []string{w.ID}); got[w.ID] != "replica-a" {
		t.Errorf("after B stopped, %s settled by %q, want replica-a", w.ID, got[w.ID])
	}
}

// pgConn connects to the test database on the schema of store.
func pgConn(t *testing.T, store string) *pgx.Conn {
	t.Helper()
	c, err := pgx.Connect(t.Context(), store)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close(context.Background()) })
	return c
}

// waitSettled waits until every watch of ids has settled and returns who
// settled each (settled_by).
func waitSettled(t *testing.T, db *pgx.Conn, ids []string) map[string]string {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		rows, err := db.Query(t.Context(), `SELECT id, coalesce(settled_by, '') FROM watches WHERE id = ANY($1) AND state <> 'pending'`, ids)
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]string{}
		for rows.Next() {
			var id, by string
			if err := rows.Scan(&id, &by); err != nil {
				t.Fatal(err)
			}
			got[id] = by
		}
		rows.Close()
		if len(got) == len(ids) {
			return got
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d watches settled within 60 s", len(got), len(ids))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// waitFor waits (at most 30 s) until cond holds.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("no %s within 30 s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
