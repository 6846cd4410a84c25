//go:build unix

package main

// The replica tests: real `vigil serve` processes (this package's binary,
// built once) on one PostgreSQL database, each with its own port and data
// directory, killed, frozen and resumed with real signals. They need
// VIGIL_TEST_POSTGRES; without it they skip, and fail under CI.

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/vigil-run/vigil"
	"github.com/vigil-run/vigil/client"
	"github.com/vigil-run/vigil/daemon"
	"github.com/vigil-run/vigil/deliver/webhook"
	"github.com/vigil-run/vigil/internal/pgtest"
	"github.com/vigil-run/vigil/store/postgres"
)

var (
	buildOnce sync.Once
	binPath   string
	buildErr  error
)

// vigilBin builds the vigil binary once per test run.
func vigilBin(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "vigil-replicas-bin-")
		if err != nil {
			buildErr = err
			return
		}
		binPath = filepath.Join(dir, "vigil")
		out, err := exec.Command("go", "build", "-o", binPath, ".").CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binPath
}

// pgSchema returns a store URL for a fresh schema of the test database,
// dropped at cleanup; it skips without VIGIL_TEST_POSTGRES, and fails
// under CI.
func pgSchema(t *testing.T) string {
	t.Helper()
	return pgtest.Schema(t, "vigil_replicas")
}

// The signing keys every replica of a test is given: the webhook secret
// (the receivers check each request against it, whichever replica sent
// it) and the link key.
const (
	testWebhookSecret = "whsec_cmVwbGljYXMtc2hhcmUtb25lLXdlYmhvb2stc2VjcmV0LSE="
	testLinkKey       = "cmVwbGljYXMtc2hhcmUtb25lLWxpbmsta2V5LXRvby0hIQ=="
)

// replica is one `vigil serve` process.
type replica struct {
	id      string
	addr    string
	dataDir string
	cmd     *exec.Cmd
	c       *client.Client
	log     *os.File
}

// cluster starts n replicas on store with a short lease, waits until they
// share the 64 shards, and stops them at cleanup.
func cluster(t *testing.T, store string, n int, lease, renew time.Duration) []*replica {
	t.Helper()
	bin := vigilBin(t)
	rs := make([]*replica, n)
	for i := range rs {
		rs[i] = startReplica(t, bin, store, fmt.Sprintf("replica-%c", 'a'+i), lease, renew)
	}
	waitShared(t, rs...)
	return rs
}

func startReplica(t *testing.T, bin, store, id string, lease, renew time.Duration) *replica {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	dir := t.TempDir()
	r := &replica{id: id, addr: addr, dataDir: filepath.Join(dir, "data")}
	// Every replica signs with the same keys (docs/operations.md,
	// Running replicas): a replica with others refuses to start.
	if err := os.MkdirAll(r.dataDir, 0o700); err != nil {
		t.Fatal(err)
	}
	for name, text := range map[string]string{daemon.WebhookSecretFile: testWebhookSecret, daemon.LinkKeyFile: testLinkKey} {
		if err := os.WriteFile(filepath.Join(r.dataDir, name), []byte(text+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if r.log, err = os.Create(filepath.Join(dir, "daemon.log")); err != nil {
		t.Fatal(err)
	}
	r.cmd = exec.Command(bin, "serve", "--listen", addr, "--data-dir", r.dataDir, "--store", store, "--replica", id,
		"--lease", lease.String(), "--lease-renew", renew.String(),
		// The same roots on every replica, as their settings must be
		// (its default, HOME, is each one's own here).
		"--roots", os.TempDir())
	r.cmd.Env = []string{"HOME=" + dir, "PATH=" + os.Getenv("PATH")}
	r.cmd.Stdout, r.cmd.Stderr = r.log, r.log
	if err := r.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		r.stop()
		if t.Failed() {
			b, _ := os.ReadFile(r.log.Name())
			t.Logf("log of %s:\n%s", id, tail(string(b), 4000))
		}
		if keep := os.Getenv("VIGIL_TEST_KEEP_LOGS"); keep != "" {
			b, _ := os.ReadFile(r.log.Name())
			_ = os.WriteFile(filepath.Join(keep, t.Name()+"-"+id+".log"), b, 0o600)
		}
	})
	deadline := time.Now().Add(30 * time.Second)
	for {
		if resp, err := http.Get("http://" + addr + "/readyz"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s was not ready within 30 s", id)
		}
		time.Sleep(50 * time.Millisecond)
	}
	token, err := os.ReadFile(daemon.TokenPath(r.dataDir))
	if err != nil {
		t.Fatal(err)
	}
	if r.c, err = client.New(addr, strings.TrimSpace(string(token)), nil); err != nil {
		t.Fatal(err)
	}
	return r
}

func tail(s string, n int) string {
	if len(s) > n {
		return "…" + s[len(s)-n:]
	}
	return s
}

// stop ends the process (SIGCONT first, in case it is frozen).
func (r *replica) stop() {
	if r.cmd == nil || r.cmd.Process == nil || r.cmd.ProcessState != nil {
		return
	}
	_ = r.cmd.Process.Signal(syscall.SIGCONT)
	_ = r.cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { _ = r.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(15 * time.Second):
		_ = r.cmd.Process.Kill()
		<-done
	}
}

func (r *replica) signal(t *testing.T, s syscall.Signal) {
	t.Helper()
	if err := r.cmd.Process.Signal(s); err != nil {
		t.Fatal(err)
	}
	if s == syscall.SIGKILL {
		_ = r.cmd.Wait()
	}
}

// shards asks r which shards it holds.
func (r *replica) shards(t *testing.T) []int {
	t.Helper()
	info, err := r.c.Daemon(t.Context())
	if err != nil {
		t.Fatalf("%s: %v", r.id, err)
	}
	return info.Shards
}

// waitShared waits until rs hold the 64 shards between them, none twice,
// each its fair share at least (floor).
func waitShared(t *testing.T, rs ...*replica) map[string][]int {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		out := map[string][]int{}
		seen := map[int]int{}
		fair := true
		for _, r := range rs {
			out[r.id] = r.shards(t)
			if len(out[r.id]) < 64/len(rs) {
				fair = false
			}
			for _, s := range out[r.id] {
				seen[s]++
			}
		}
		// Two replicas may both say they hold a shard for a moment: one
		// that was frozen says so until its next step (the fence stops
		// its writes meanwhile). It must not last.
		overlap := false
		for _, n := range seen {
			overlap = overlap || n > 1
		}
		if fair && !overlap && len(seen) == 64 {
			return out
		}
		if time.Now().After(deadline) {
			t.Fatalf("the replicas did not share the shards, each once, within 30 s: %v", out)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// row is what the tests read back of a watch.
type row struct {
	state, settledBy, predicate string
	created, settled            int64
	messages                    int
}

// rows reads ids back from the database, with how many mailbox messages
// each has.
func rows(t *testing.T, db *pgx.Conn, ids []string) map[string]row {
	t.Helper()
	rs, err := db.Query(t.Context(), `SELECT w.id, w.state, coalesce(w.settled_by, ''), w.created_at, coalesce(w.settled_at, 0),
			w.predicate, (SELECT count(*) FROM messages AS m WHERE m.watch_id = w.id)
		FROM watches AS w WHERE w.id = ANY($1)`, ids)
	if err != nil {
		t.Fatal(err)
	}
	defer rs.Close()
	out := map[string]row{}
	for rs.Next() {
		var id string
		var r row
		if err := rs.Scan(&id, &r.state, &r.settledBy, &r.created, &r.settled, &r.predicate, &r.messages); err != nil {
			t.Fatal(err)
		}
		out[id] = r
	}
	if err := rs.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// waitSettled waits until none of ids is pending, and returns the rows.
func waitSettled(t *testing.T, db *pgx.Conn, ids []string, within time.Duration) map[string]row {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		var pending int
		if err := db.QueryRow(t.Context(), `SELECT count(*) FROM watches WHERE id = ANY($1) AND state = 'pending'`, ids).Scan(&pending); err != nil {
			t.Fatal(err)
		}
		if pending == 0 {
			return rows(t, db, ids)
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d watches still pending after %s", pending, len(ids), within)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func connect(t *testing.T, store string) *pgx.Conn {
	t.Helper()
	db, err := pgx.Connect(t.Context(), store)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close(context.Background()) })
	return db
}

// timer is a timer request firing after d; n makes its identity unique.
func timer(d time.Duration, n int, deliver string) vigil.RegisterRequest {
	r := vigil.RegisterRequest{Kind: vigil.KindTimer, Recipient: fmt.Sprintf("agent-%d", n%40),
		Predicate: json.RawMessage(fmt.Sprintf(`{"in": %q}`, (d + time.Duration(n)*time.Millisecond).String()))}
	if deliver != "" {
		r.Deliver = json.RawMessage(deliver)
	}
	return r
}

// registerBatches registers rs on the replicas in turn, a batch of 100 on
// each, and returns the ids.
func registerBatches(t *testing.T, reps []*replica, rs []vigil.RegisterRequest) []string {
	t.Helper()
	var ids []string
	for i, c := range slices.Collect(slices.Chunk(rs, 100)) {
		res, err := reps[i%len(reps)].c.RegisterBatch(t.Context(), c)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range res {
			if r.Watch == nil {
				t.Fatalf("batch item refused: %v", r.Err)
			}
			if r.Watch.Existing {
				t.Fatalf("watch %s is an existing one: the requests were meant to be distinct", r.Watch.ID)
			}
			ids = append(ids, r.Watch.ID)
		}
	}
	return ids
}

// TestReplicasTimers: three replicas on one database; 3 000 timers
// registered round-robin over them all fire exactly once, each with
// exactly one mailbox message, each settled by exactly one replica: the
// holder of its shard, which heard of it from whichever replica
// registered it (cross-replica wake: two thirds of the timers were
// registered on a replica that does not hold them).
func TestReplicasTimers(t *testing.T) {
	store := pgSchema(t)
	reps := cluster(t, store, 3, 8*time.Second, time.Second)
	held := waitShared(t, reps...)
	owner := map[int]string{}
	for id, ss := range held {
		for _, s := range ss {
			owner[s] = id
		}
	}
	var reqs []vigil.RegisterRequest
	for i := range 3000 {
		reqs = append(reqs, timer(2*time.Second+time.Duration(i)*time.Millisecond, i, ""))
	}
	ids := registerBatches(t, reps, reqs)
	db := connect(t, store)
	got := waitSettled(t, db, ids, 90*time.Second)
	by := map[string]int{}
	moved := 0
	for _, id := range ids {
		r := got[id]
		if r.state != string(vigil.StateFired) || r.messages != 1 || r.settledBy == "" {
			t.Fatalf("%s: state %s, %d messages, settled by %q; want fired, 1, a replica", id, r.state, r.messages, r.settledBy)
		}
		by[r.settledBy]++
		if r.settledBy != owner[postgres.ShardOf(id)] {
			moved++ // a shard moved while it was pending: allowed, counted
		}
	}
	if len(by) != 3 {
		t.Errorf("settled by %v: want all three replicas to have settled their shards' timers", by)
	}
	if moved > 0 {
		t.Logf("%d timers settled by a replica other than their shard's holder at registration (a shard moved meanwhile)", moved)
	}
	var total int
	if err := db.QueryRow(t.Context(), `SELECT count(*) FROM messages`).Scan(&total); err != nil || total != len(ids) {
		t.Errorf("the mailboxes hold %d messages (%v), want %d", total, err, len(ids))
	}
}

// hookReceiver counts webhook deliveries by webhook-id. hold, when set,
// says whether to hold a request until the test ends (an attempt left in
// flight); status says what to answer the others. Each request must
// verify under testWebhookSecret, whichever replica sent it: the test
// fails at its end if one did not.
type hookReceiver struct {
	mu     sync.Mutex
	got    map[string]int
	forged int
	seen   chan string
	hold   func(id string, n int) bool
	status func(id string, n int) int
	done   chan struct{}
}

func newReceiver(t *testing.T) (*hookReceiver, string) {
	h := &hookReceiver{got: map[string]int{}, seen: make(chan string, 10000), done: make(chan struct{})}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := r.Header.Get("webhook-id")
		body, err := io.ReadAll(r.Body)
		verr := webhook.Verify(testWebhookSecret, r.Header, body, time.Now(), 5*time.Minute)
		h.mu.Lock()
		if err != nil || verr != nil {
			h.forged++
		}
		h.got[id]++
		n := h.got[id]
		hold, status := h.hold, h.status
		h.mu.Unlock()
		h.seen <- id
		if hold != nil && hold(id, n) {
			select {
			case <-r.Context().Done():
			case <-h.done:
			}
			return
		}
		code := http.StatusOK
		if status != nil {
			code = status(id, n)
		}
		w.WriteHeader(code)
	}))
	t.Cleanup(func() {
		close(h.done)
		srv.Close()
		h.mu.Lock()
		defer h.mu.Unlock()
		if h.forged > 0 {
			t.Errorf("%d webhook requests did not verify under the secret every replica shares", h.forged)
		}
	})
	return h, srv.URL
}

func (h *hookReceiver) count(id string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.got[id]
}

// TestReplicasFailover: one of three replicas is SIGKILLed while 1 000
// timers of its shards fall due over the next 20 s, and while webhooks of
// its are in flight. Every timer settles exactly once, by another replica,
// within lease + 5 s of its due time; the webhooks that were in flight end
// unknown and are not sent again.
func TestReplicasFailover(t *testing.T) {
	store := pgSchema(t)
	const lease = 8 * time.Second
	reps := cluster(t, store, 3, lease, time.Second)
	victim := reps[2]
	mine := map[int]bool{}
	for _, s := range waitShared(t, reps...)[victim.id] {
		mine[s] = true
	}
	recv, hookURL := newReceiver(t)
	recv.hold = func(string, int) bool { return true } // every attempt stays in flight
	db := connect(t, store)

	// Webhooked timers first, due at once: those of the victim's shards
	// are in flight on it when it dies.
	deliver := fmt.Sprintf(`{"webhook": {"url": %q}}`, hookURL)
	var hooked []string
	for i := 0; len(hooked) < 10; i++ {
		w, err := reps[i%3].c.Register(t.Context(), timer(200*time.Millisecond, i, deliver))
		if err != nil {
			t.Fatal(err)
		}
		if mine[postgres.ShardOf(w.ID)] {
			hooked = append(hooked, w.ID)
		}
	}
	// Then 1 000 timers of the victim's shards, due over 4 s to 20 s
	// from now (others, registered meanwhile, fire normally).
	var due []string
	for i := 0; len(due) < 1000; i++ {
		w, err := reps[i%2].c.Register(t.Context(), timer(4*time.Second+time.Duration(len(due))*16*time.Millisecond, i, ""))
		if err != nil || w.Existing {
			t.Fatalf("register: %v (existing: %v)", err, w != nil && w.Existing)
		}
		if mine[postgres.ShardOf(w.ID)] {
			due = append(due, w.ID)
		}
	}
	// The victim's webhooks are in flight: their watches settled, and
	// the receiver holds their attempts (webhook-id: the message id).
	waitSettled(t, db, hooked, 30*time.Second)
	msgIDs := messageIDs(t, db, hooked)
	waitReceived(t, recv, msgIDs, 1)
	var killedAt int64
	if err := db.QueryRow(t.Context(), `SELECT (extract(epoch FROM now()) * 1000)::bigint`).Scan(&killedAt); err != nil {
		t.Fatal(err)
	}
	victim.signal(t, syscall.SIGKILL)

	got := waitSettled(t, db, due, 60*time.Second)
	late := 0
	for _, id := range due {
		r := got[id]
		if r.state != string(vigil.StateFired) || r.messages != 1 {
			t.Fatalf("%s: %s with %d messages, want fired with 1", id, r.state, r.messages)
		}
		if r.settledBy == victim.id {
			if r.settled > killedAt {
				t.Fatalf("%s settled by the killed replica after it was killed", id)
			}
			continue // fell due before the kill
		}
		dueAt := dueOf(t, r.predicate)
		if lag := time.Duration(r.settled-dueAt) * time.Millisecond; lag > lease+5*time.Second {
			late++
			t.Errorf("%s settled %s after it was due, more than lease + 5 s", id, lag)
		}
	}
	// The victim's webhooks in flight: unknown, once each, never again.
	waitShared(t, reps[:2]...)
	for _, id := range hooked {
		var status string
		if err := db.QueryRow(t.Context(), `SELECT status FROM receipts WHERE watch_id = $1 AND channel = 'webhook'`, id).Scan(&status); err != nil {
			t.Fatal(err)
		}
		if status != vigil.ReceiptUnknown {
			t.Errorf("%s: receipt %s after its replica was killed mid-send, want unknown", id, status)
		}
		if n := recv.count(msgIDs[id]); n != 1 {
			t.Errorf("%s: webhook received %d times, want once (unknown is not sent again)", id, n)
		}
	}
	if late > 0 {
		t.Fatalf("%d of %d timers settled more than lease + 5 s late", late, len(due))
	}
}

// messageIDs returns the outcome message id of each watch of ids (the
// webhook-id of its deliveries).
func messageIDs(t *testing.T, db *pgx.Conn, ids []string) map[string]string {
	t.Helper()
	out := map[string]string{}
	rs, err := db.Query(t.Context(), `SELECT watch_id, id FROM messages WHERE watch_id = ANY($1)`, ids)
	if err != nil {
		t.Fatal(err)
	}
	defer rs.Close()
	for rs.Next() {
		var w, m string
		if err := rs.Scan(&w, &m); err != nil {
			t.Fatal(err)
		}
		out[w] = m
	}
	if len(out) != len(ids) {
		t.Fatalf("%d of %d watches have a message", len(out), len(ids))
	}
	return out
}

// waitReceived waits until the receiver has had n attempts of each
// message of msgs (watch id -> message id).
func waitReceived(t *testing.T, recv *hookReceiver, msgs map[string]string, n int) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		ok := 0
		for _, m := range msgs {
			if recv.count(m) >= n {
				ok++
			}
		}
		if ok == len(msgs) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d webhooks received %d times", ok, len(msgs), n)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// dueOf reads a timer's instant (its canonical predicate, {"at": …}) in
// unix milliseconds.
func dueOf(t *testing.T, predicate string) int64 {
	t.Helper()
	var v struct {
		At string `json:"at"`
	}
	if err := json.Unmarshal([]byte(predicate), &v); err != nil {
		t.Fatal(err)
	}
	at, err := vigil.ParseTime(v.At)
	if err != nil {
		t.Fatalf("timer predicate %s: %v", predicate, err)
	}
	return at.UnixMilli()
}

// TestReplicasFencing: a replica frozen (SIGSTOP) past its lease, while a
// webhook of its waits to be retried and timers of its shards fall due,
// and then resumed (SIGCONT): the other replica took its shards over,
// settled those timers and made the retry; the resumed one settles
// nothing and sends nothing for the shards it lost (the rows, the
// mailbox and the webhook receiver say so), and gets its share back.
func TestReplicasFencing(t *testing.T) {
	store := pgSchema(t)
	const lease = 6 * time.Second
	reps := cluster(t, store, 2, lease, time.Second)
	zombie, other := reps[0], reps[1]
	mine := map[int]bool{}
	for _, s := range waitShared(t, reps...)[zombie.id] {
		mine[s] = true
	}
	recv, hookURL := newReceiver(t)
	// Every attempt fails (503, retried on the ladder) until allow: the
	// zombie holds retries when it is frozen.
	var allow atomic.Bool
	recv.status = func(string, int) int {
		if allow.Load() {
			return http.StatusOK
		}
		return http.StatusServiceUnavailable
	}
	db := connect(t, store)
	deliver := fmt.Sprintf(`{"webhook": {"url": %q}}`, hookURL)
	var hooked, timers []string
	for i := 0; len(hooked) < 5; i++ {
		w, err := other.c.Register(t.Context(), timer(100*time.Millisecond, i, deliver))
		if err != nil {
			t.Fatal(err)
		}
		if mine[postgres.ShardOf(w.ID)] {
			hooked = append(hooked, w.ID)
		}
	}
	// Timers of the zombie's shards due while it is frozen: armed in its
	// memory now, due well after the freeze below however slowly this
	// setup runs (3 s was overrun on a loaded machine, and the zombie
	// then settled some before it was frozen, as it should).
	const timersIn = 15 * time.Second
	due := time.Now().Add(timersIn)
	for i := 0; len(timers) < 50; i++ {
		w, err := other.c.Register(t.Context(), timer(timersIn+time.Duration(len(timers))*20*time.Millisecond, i, ""))
		if err != nil {
			t.Fatal(err)
		}
		if mine[postgres.ShardOf(w.ID)] {
			timers = append(timers, w.ID)
		}
	}
	// Freeze the zombie once its first attempts failed and their
	// receipts say retrying.
	waitSettled(t, db, hooked, 30*time.Second)
	byWatch := messageIDs(t, db, hooked)
	waitReceipts(t, db, hooked, vigil.ReceiptRetrying)
	zombie.signal(t, syscall.SIGSTOP)
	if time.Now().After(due) {
		t.Fatalf("the setup took more than %s: the timers fell due before the zombie was frozen", timersIn)
	}
	frozen := true
	defer func() {
		if frozen {
			zombie.signal(t, syscall.SIGCONT)
		}
	}()
	allow.Store(true)
	// The other replica takes every shard over, settles the timers and
	// makes the retries.
	if got := waitShared(t, other); len(got[other.id]) != 64 {
		t.Fatalf("the live replica holds %d shards", len(got[other.id]))
	}
	settled := waitSettled(t, db, timers, 60*time.Second)
	for _, id := range timers {
		if r := settled[id]; r.settledBy != other.id || r.messages != 1 {
			t.Fatalf("%s settled by %q with %d messages while the zombie was frozen; want %s, 1", id, r.settledBy, r.messages, other.id)
		}
	}
	waitReceipts(t, db, hooked, vigil.ReceiptDelivered)
	before := map[string]int{}
	for _, m := range byWatch {
		before[m] = recv.count(m)
	}

	zombie.signal(t, syscall.SIGCONT)
	frozen = false
	// Once resumed it gets its share back (it learnt it lost everything).
	waitShared(t, reps...)
	// Its retries (overdue in its memory) were fenced: the receiver
	// heard nothing more of those webhooks.
	for _, m := range byWatch {
		if n := recv.count(m); n != before[m] {
			t.Errorf("webhook %s received %d times after the zombie resumed, %d before: it sent for a shard it lost", m, n, before[m])
		}
	}
	after := rows(t, db, append(slices.Clone(timers), hooked...))
	for id, r := range after {
		if r.messages != 1 {
			t.Errorf("%s has %d messages, want 1", id, r.messages)
		}
		if slices.Contains(timers, id) && r.settledBy != other.id {
			t.Errorf("%s settled by %q, want %s", id, r.settledBy, other.id)
		}
	}
	waitReceipts(t, db, hooked, vigil.ReceiptDelivered)
}

// waitReceipts waits until the webhook receipt of each of ids has status.
func waitReceipts(t *testing.T, db *pgx.Conn, ids []string, status string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		var n int
		if err := db.QueryRow(t.Context(), `SELECT count(*) FROM receipts WHERE watch_id = ANY($1) AND channel = 'webhook' AND status = $2`,
			ids, status).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n == len(ids) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d webhook receipts say %s", n, len(ids), status)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
