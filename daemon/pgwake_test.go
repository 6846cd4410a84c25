package daemon_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/vigil-run/vigil"
	"github.com/vigil-run/vigil/engine"
	"github.com/vigil-run/vigil/mcpserver"
	"github.com/vigil-run/vigil/store/postgres"
)

// replicaB opens a second store on d's database with Notify on: what the
// store of a second daemon, replica B, writes.
func replicaB(t testing.TB, url string) *postgres.Store {
	t.Helper()
	st, err := postgres.Open(t.Context(), url, &postgres.Options{MaxConns: 4, Notify: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// longCalls waits until d has at least n long-polls and streams open.
func longCalls(t testing.TB, d *running, n int) {
	t.Helper()
	for backoff := time.Millisecond; ; backoff = min(2*backoff, 100*time.Millisecond) {
		resp, err := http.Get(d.URL() + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		for line := range strings.SplitSeq(string(body), "\n") {
			if v, ok := strings.CutPrefix(line, "vigil_long_calls "); ok {
				if got, _ := strconv.ParseFloat(v, 64); int(got) >= n {
					return
				}
			}
		}
		select {
		case <-t.Context().Done():
			t.Fatalf("never %d long calls open", n)
		case <-time.After(backoff):
		}
	}
}

// nextEvent returns the next event of ch, failing after a minute.
func nextEvent(t *testing.T, ch <-chan vigil.Event) vigil.Event {
	t.Helper()
	select {
	case ev, ok := <-ch:
		if !ok {
			t.Fatal("the event stream ended")
		}
		return ev
	case <-time.After(time.Minute):
		t.Fatal("no event within a minute")
	}
	return vigil.Event{}
}

// channelSession runs an MCP channel session (what "vigil mcp --channel"
// runs) for recipient r over c, and returns the seqs of the messages it
// pushes, in order, once it is initialized.
func channelSession(t *testing.T, c vigil.Service) <-chan string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	srvEnd, cliEnd := net.Pipe()
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = mcpserver.Run(ctx, c, &mcpserver.Options{DefaultRecipient: "r", Channel: true}, &mcp.IOTransport{Reader: srvEnd, Writer: srvEnd})
	}()
	t.Cleanup(func() { cancel(); cliEnd.Close(); <-done })
	type msg struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
		Params struct {
			Meta map[string]string `json:"meta"`
		} `json:"params"`
	}
	answered, seqs := make(chan struct{}), make(chan string, 100)
	go func() {
		sc := bufio.NewScanner(cliEnd)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			var m msg
			if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
				continue
			}
			switch {
			case string(m.ID) == "1":
				close(answered)
			case m.Method == mcpserver.ChannelMethod:
				seqs <- m.Params.Meta["seq"]
			}
		}
	}()
	send := func(s string) {
		if _, err := cliEnd.Write([]byte(s + "\n")); err != nil {
			t.Fatal(err)
		}
	}
	send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"wake","version":"0"}}}`)
	<-answered
	send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	return seqs
}

// TestPostgresReplicaWake: on one PostgreSQL database, what replica B
// commits (a settlement, a note) wakes replica A's mailbox long-poll, a
// wait on the watch, an event stream, an MCP inbox subscription and an
// MCP channel session (over A's API, as "vigil mcp --channel"), with
// each event once, also A's own cancel (published by A and heard back
// from the database); and a message B writes while A's listening
// connection is down (terminated) still reaches them all once A
// reconnects. B is the store a second daemon writes through (the daemon
// of today's build stands by while another one serves).
func TestPostgresReplicaWake(t *testing.T) {
	t.Parallel()
	url := pgStore(t)
	cfg := testConfig(t.TempDir(), t.TempDir())
	cfg.Store = url
	a := start(t, cfg)
	c := newClient(t, a)
	b := replicaB(t, url)
	ctx := t.Context()

	var ws [2]*vigil.Watch
	for i := range ws {
		w, err := c.Register(ctx, vigil.RegisterRequest{Kind: vigil.KindTimer, Predicate: json.RawMessage(fmt.Sprintf(`{"in": "%dh"}`, i+1)), Recipient: "r"})
		if err != nil {
			t.Fatal(err)
		}
		ws[i] = w
	}
	events, err := c.Subscribe(ctx, vigil.EventFilter{Recipient: "r"})
	if err != nil {
		t.Fatal(err)
	}
	// Registered before the stream: not on it.
	updates := make(chan string, 16)
	transport := &mcp.StreamableClientTransport{Endpoint: a.URL() + "/mcp?recipient=r",
		HTTPClient: &http.Client{Transport: bearerTransport{a.Token(), http.DefaultTransport}}, MaxRetries: -1}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "wake", Version: "v0"}, &mcp.ClientOptions{
		ResourceUpdatedHandler: func(_ context.Context, req *mcp.ResourceUpdatedNotificationRequest) { updates <- req.Params.URI }}).
		Connect(ctx, transport, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	if err := cs.Subscribe(ctx, &mcp.SubscribeParams{URI: mcpserver.InboxURI("r")}); err != nil {
		t.Fatal(err)
	}
	pushed := channelSession(t, c)
	mcpWoken := func(what string) {
		t.Helper()
		select {
		case u := <-updates:
			if u != mcpserver.InboxURI("r") {
				t.Errorf("MCP update for %s, want the inbox of r", u)
			}
		case <-time.After(time.Minute):
			t.Fatalf("the MCP inbox subscription was not told of %s", what)
		}
	}
	longPoll := func(reader string) <-chan []*vigil.Message {
		out := make(chan []*vigil.Message, 1)
		go func() {
			p, err := c.Messages(ctx, vigil.MessagesRequest{Recipient: "r", Reader: reader, Ack: true, Wait: time.Minute})
			if err != nil {
				t.Error(err)
			}
			out <- p.Messages
		}()
		return out
	}
	seen := map[string]int{}
	expect := func(want ...string) {
		t.Helper()
		got := map[string]bool{}
		for len(got) < len(want) {
			ev := nextEvent(t, events)
			k := ev.Type + " " + ev.WatchID
			if ev.Type == vigil.EventMessage {
				k = ev.Type + " " + strconv.FormatInt(ev.Seq, 10)
			}
			seen[k]++
			got[k] = true
		}
		for _, k := range want {
			if !got[k] {
				t.Errorf("the stream lacks %s", k)
			}
		}
	}

	// 1. B settles watch 0 (as B's scheduler does) while A waits.
	polled := longPoll("lp")
	waited := make(chan *vigil.Watch, 1)
	go func() {
		w, err := c.Wait(ctx, ws[0].ID, time.Minute)
		if err != nil {
			t.Error(err)
		}
		waited <- w
	}()
	longCalls(t, a, 4) // the stream, the channel's long-poll, lp and the wait
	now := time.Now().UTC().Truncate(time.Millisecond)
	out := &vigil.Outcome{State: vigil.StateFired, Reason: "due", Sentence: "The timer fired."}
	m1 := engine.OutcomeMessage("m1-"+ws[0].ID, ws[0], out, now)
	won, err := b.WatchSettle(ctx, []vigil.WatchSettleParams{{ID: ws[0].ID, State: vigil.StateFired, Outcome: out, SettledAt: now, Message: m1}})
	if err != nil || !won[0] {
		t.Fatalf("B's WatchSettle = %v, %v", won, err)
	}
	if got := <-polled; len(got) != 1 || got[0].Seq != m1.Seq {
		t.Errorf("A's long-poll returned %v, want B's message %d", got, m1.Seq)
	}
	if got := <-waited; got == nil || got.State != vigil.StateFired {
		t.Errorf("A's wait returned %+v, want fired", got)
	}
	expect(vigil.EventWatchSettled+" "+ws[0].ID, vigil.EventMessage+" "+strconv.FormatInt(m1.Seq, 10))
	mcpWoken("B's settlement")

	// 2. A cancels watch 1 itself: published by A, and heard back.
	if _, err := c.Cancel(ctx, ws[1].ID); err != nil {
		t.Fatal(err)
	}
	page, err := c.Messages(ctx, vigil.MessagesRequest{Recipient: "r", Reader: "lp", Ack: true})
	if err != nil || len(page.Messages) != 1 {
		t.Fatalf("A's mailbox after the cancel = %+v, %v", page, err)
	}
	m2 := page.Messages[0]
	expect(vigil.EventWatchSettled+" "+ws[1].ID, vigil.EventMessage+" "+strconv.FormatInt(m2.Seq, 10))
	mcpWoken("A's cancel")

	// 2b. A registration on B reaches A's stream as watch.created from
	// its event alone, unread: the first event here names a watch that
	// has no row (a read would find nothing and announce nothing), sent
	// before a real registration of B's.
	ghost, err := json.Marshal(postgres.Event{Kind: postgres.EventWatch, WatchID: "ghost", Recipient: "r", Shard: postgres.ShardOf("ghost"),
		Origin: "elsewhere", Sched: &postgres.Sched{Kind: string(vigil.KindTimer), CreatedAt: now.UnixMilli()}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Pool().Exec(ctx, `SELECT pg_notify($1, $2)`, b.Channel(), string(ghost)); err != nil {
		t.Fatal(err)
	}
	real := &vigil.Watch{ID: "real-" + ws[0].ID, Recipient: "r", Kind: vigil.KindTimer, Mode: vigil.ModeUntil,
		Predicate: json.RawMessage(`{"at":"` + now.Add(3*time.Hour).Format(time.RFC3339) + `"}`), CreatedAt: now, Deadline: now.Add(3 * time.Hour)}
	real.Identity = vigil.Identity(real.Recipient, real.Kind, real.Mode, real.Predicate)
	if _, err := b.WatchCreate(ctx, vigil.WatchCreateParams{Watch: real}); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"ghost", real.ID} {
		if ev := nextEvent(t, events); ev.Type != vigil.EventWatchCreated || ev.WatchID != id {
			t.Errorf("A's stream: %s %s, want %s %s", ev.Type, ev.WatchID, vigil.EventWatchCreated, id)
		}
	}

	// 3. A's listening connection dies; B writes before A listens again.
	polled = longPoll("lp")
	longCalls(t, a, 3)
	var pid int
	if err := b.Pool().QueryRow(ctx, `SELECT pid FROM pg_stat_activity WHERE query = 'listen "' || $1 || '"'`, b.Channel()).Scan(&pid); err != nil {
		t.Fatalf("finding A's listening connection: %v", err)
	}
	var gone bool
	if err := b.Pool().QueryRow(ctx, `SELECT pg_terminate_backend($1, 10000)`, pid).Scan(&gone); err != nil || !gone {
		t.Fatalf("pg_terminate_backend = %v, %v", gone, err)
	}
	m3, err := b.MessageCreate(ctx, &vigil.Message{ID: "m3", Recipient: "r", Type: vigil.MessageNote, Text: "written while A was not listening", CreatedAt: now})
	if err != nil {
		t.Fatal(err)
	}
	var written time.Time
	if err := b.Pool().QueryRow(ctx, `SELECT clock_timestamp()`).Scan(&written); err != nil {
		t.Fatal(err)
	}
	if got := <-polled; len(got) != 1 || got[0].Seq != m3.Seq {
		t.Errorf("after A listened again its long-poll returned %v, want message %d", got, m3.Seq)
	}
	expect(vigil.EventMessage + " " + strconv.FormatInt(m3.Seq, 10))
	mcpWoken("the message written while A was not listening")
	var since time.Time
	if err := b.Pool().QueryRow(ctx, `SELECT backend_start FROM pg_stat_activity WHERE query = 'listen "' || $1 || '"'`, b.Channel()).Scan(&since); err != nil {
		t.Fatal(err)
	}
	if !since.After(written) {
		t.Errorf("A's listening connection started at %s, before the message was written (%s): the message did not test the repair", since, written)
	}

	// 4. A last note from B: whatever came twice would be on the stream
	// before it.
	m4, err := b.MessageCreate(ctx, &vigil.Message{ID: "m4", Recipient: "r", Type: vigil.MessageNote, Text: "last", CreatedAt: now})
	if err != nil {
		t.Fatal(err)
	}
	expect(vigil.EventMessage + " " + strconv.FormatInt(m4.Seq, 10))
	mcpWoken("B's last note")
	for k, n := range seen {
		if n != 1 {
			t.Errorf("the stream carried %s %d times, want once", k, n)
		}
	}
	if len(seen) != 6 {
		t.Errorf("the stream carried %v, want 2 settlements and 4 messages", seen)
	}
	// The channel pushed each message once, in order, the last one last.
	var got []string
	for len(got) == 0 || got[len(got)-1] != strconv.FormatInt(m4.Seq, 10) {
		select {
		case seq := <-pushed:
			got = append(got, seq)
		case <-time.After(time.Minute):
			t.Fatalf("the channel pushed %v and not message %d", got, m4.Seq)
		}
	}
	if want := []string{strconv.FormatInt(m1.Seq, 10), strconv.FormatInt(m2.Seq, 10), strconv.FormatInt(m3.Seq, 10), strconv.FormatInt(m4.Seq, 10)}; strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("the channel pushed messages %v, want %v", got, want)
	}
}

// BenchmarkPostgresReplicaWake measures how long a message replica B
// commits takes to end a mailbox long-poll parked on replica A, from
// before B's write to the long-poll's answer (wake-ms, mean and max of
// the run). It needs VIGIL_TEST_POSTGRES.
func BenchmarkPostgresReplicaWake(bm *testing.B) {
	url := pgStore(bm)
	cfg := testConfig(bm.TempDir(), bm.TempDir())
	cfg.Store = url
	a := start(bm, cfg)
	c := newClient(bm, a)
	b := replicaB(bm, url)
	ctx := bm.Context()
	var sum, most time.Duration
	for i := range bm.N {
		polled := make(chan error, 1)
		go func() {
			p, err := c.Messages(ctx, vigil.MessagesRequest{Recipient: "r", Reader: "bench", Ack: true, Wait: time.Minute})
			if err == nil && len(p.Messages) != 1 {
				err = fmt.Errorf("the long-poll returned %d messages, want 1", len(p.Messages))
			}
			polled <- err
		}()
		longCalls(bm, a, 1)
		began := time.Now()
		if _, err := b.MessageCreate(ctx, &vigil.Message{ID: fmt.Sprintf("m%d", i), Recipient: "r", Type: vigil.MessageNote,
			Text: "wake", CreatedAt: began.UTC()}); err != nil {
			bm.Fatal(err)
		}
		if err := <-polled; err != nil {
			bm.Fatal(err)
		}
		took := time.Since(began)
		sum += took
		most = max(most, took)
	}
	bm.ReportMetric(float64(sum.Microseconds())/1000/float64(bm.N), "wake-ms")
	bm.ReportMetric(float64(most.Microseconds())/1000, "max-wake-ms")
}

// gauge waits until d's /metrics shows name at want, and fails the test if
// it has not within a minute (as nextEvent).
func gauge(t *testing.T, d *running, name string, want int) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for backoff := time.Millisecond; ; backoff = min(2*backoff, 100*time.Millisecond) {
		resp, err := http.Get(d.URL() + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		got := -1
		for line := range strings.SplitSeq(string(body), "\n") {
			if v, ok := strings.CutPrefix(line, name+" "); ok {
				f, _ := strconv.ParseFloat(v, 64)
				got = int(f)
			}
		}
		if got == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s = %d, want %d", name, got, want)
		}
		time.Sleep(backoff)
	}
}

// TestPostgresHolderArmsFromEvent: the holder of a watch's shard arms a
// watch registered on another replica from its registration's event, and
// forgets a cancelled one from the cancel's, without reading the row: the
// watch here has no row, so a read would find nothing to arm or forget.
func TestPostgresHolderArmsFromEvent(t *testing.T) {
	t.Parallel()
	url := pgStore(t)
	cfg := testConfig(t.TempDir(), t.TempDir())
	cfg.Store = url
	a := start(t, cfg)
	if got := shardsOf(t, 64, newClient(t, a)); len(got[0]) != 64 {
		t.Fatalf("one replica holds %d shards, want 64", len(got[0]))
	}
	b := replicaB(t, url)
	gauge(t, a, "vigil_watches_pending", 0)
	now := time.Now()
	send := func(ev postgres.Event) {
		t.Helper()
		p, err := json.Marshal(ev)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := b.Pool().Exec(t.Context(), `SELECT pg_notify($1, $2)`, b.Channel(), string(p)); err != nil {
			t.Fatal(err)
		}
	}
	ev := postgres.Event{Kind: postgres.EventWatch, WatchID: "ghost", Recipient: "r", Shard: postgres.ShardOf("ghost"), Origin: "elsewhere",
		Sched: &postgres.Sched{Kind: string(vigil.KindHTTP), Every: time.Hour.Milliseconds(), StartAt: now.Add(time.Hour).UnixMilli(), CreatedAt: now.UnixMilli()}}
	send(ev)
	gauge(t, a, "vigil_watches_pending", 1)
	ev.Sched, ev.Gone = nil, true
	send(ev)
	gauge(t, a, "vigil_watches_pending", 0)
}
