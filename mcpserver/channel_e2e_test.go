package mcpserver_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"github.com/vigil-run/vigil"
	"github.com/vigil-run/vigil/client"
	"github.com/vigil-run/vigil/daemon"
	"github.com/vigil-run/vigil/mcpserver"
)

// rawMsg is one JSON-RPC message as a client reads it off the wire.
type rawMsg struct {
	ID     json.RawMessage `json:"id,omitempty"`
	Method string          `json:"method,omitempty"`
	Params json.RawMessage `json:"params,omitempty"`
	Result json.RawMessage `json:"result,omitempty"`
	Error  json.RawMessage `json:"error,omitempty"`
}

// channelEvent is the params of a notifications/claude/channel.
type channelEvent struct {
	Content string            `json:"content"`
	Meta    map[string]string `json:"meta"`
}

// rawClient speaks raw JSON-RPC (newline-delimited) to an MCP server, as
// Claude Code does over stdio: the SDK's client has no handler for the
// channel's notifications.
type rawClient struct {
	t      *testing.T
	w      io.WriteCloser
	msgs   chan rawMsg
	held   []rawMsg // read while waiting for a response
	nextID int
}

func newRawClient(t *testing.T, w io.WriteCloser, r io.Reader) *rawClient {
	c := &rawClient{t: t, w: w, msgs: make(chan rawMsg, 1000)}
	go func() {
		defer close(c.msgs)
		sc := bufio.NewScanner(r)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			var m rawMsg
			if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
				t.Errorf("server wrote a line that is not JSON: %q", sc.Text())
				continue
			}
			c.msgs <- m
		}
	}()
	return c
}

func (c *rawClient) send(v any) {
	c.t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		c.t.Fatal(err)
	}
	if _, err := c.w.Write(append(b, '\n')); err != nil {
		c.t.Fatalf("writing to the server: %v", err)
	}
}

// call sends a request and returns its response, keeping what came
// before it for next.
func (c *rawClient) call(method string, params any) rawMsg {
	c.t.Helper()
	c.nextID++
	return c.request(c.nextID, method, params)
}

// request sends a request with the id given (a number or a string) and
// returns its response, keeping what came before it for next.
func (c *rawClient) request(id any, method string, params any) rawMsg {
	c.t.Helper()
	want, err := json.Marshal(id)
	if err != nil {
		c.t.Fatal(err)
	}
	c.send(map[string]any{"jsonrpc": "2.0", "id": id, "method": method, "params": params})
	for m := range c.msgs {
		if string(m.ID) == string(want) {
			return m
		}
		c.held = append(c.held, m)
	}
	c.t.Fatalf("the server went away before answering %s", method)
	return rawMsg{}
}

// events returns the channel notifications the client has read so far
// without waiting, and keeps the other messages.
func (c *rawClient) events() []rawMsg {
	var evs, rest []rawMsg
	take := func(m rawMsg) {
		if m.Method == mcpserver.ChannelMethod {
			evs = append(evs, m)
		} else {
			rest = append(rest, m)
		}
	}
	for _, m := range c.held {
		take(m)
	}
	for {
		select {
		case m, ok := <-c.msgs:
			if !ok {
				c.held = rest
				return evs
			}
			take(m)
			continue
		default:
		}
		break
	}
	c.held = rest
	return evs
}

// initialize runs the handshake and returns the initialize result.
func (c *rawClient) initialize() map[string]any {
	c.t.Helper()
	res := c.call("initialize", map[string]any{"protocolVersion": "2025-06-18", "capabilities": map[string]any{},
		"clientInfo": map[string]any{"name": "raw", "version": "0"}})
	var out map[string]any
	if err := json.Unmarshal(res.Result, &out); err != nil || res.Error != nil {
		c.t.Fatalf("initialize = %s %s", res.Result, res.Error)
	}
	c.send(map[string]any{"jsonrpc": "2.0", "method": "notifications/initialized"})
	return out
}

// next returns the next channel event; other notifications are skipped.
func (c *rawClient) next() channelEvent {
	c.t.Helper()
	for {
		var m rawMsg
		if len(c.held) > 0 {
			m, c.held = c.held[0], c.held[1:]
		} else if m = <-c.msgs; m.Method == "" && m.ID == nil {
			break // closed
		}
		if m.Method != mcpserver.ChannelMethod {
			continue
		}
		var ev channelEvent
		if err := json.Unmarshal(m.Params, &ev); err != nil {
			c.t.Fatalf("channel params %s: %v", m.Params, err)
		}
		return ev
	}
	c.t.Fatal("the server went away before the next channel event")
	return channelEvent{}
}

// vigilChannel starts "vigil mcp --channel --for recipient" against d and
// returns a raw client on its stdio, initialized; stop ends the process.
func vigilChannel(t *testing.T, d *daemon.Daemon, recipient string) (c *rawClient, init map[string]any, stop func()) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "mcp", "--channel", "--for", recipient)
	cmd.Env = []string{childEnv + "=1", "HOME=" + t.TempDir(), "USER=tester", "VIGIL_ADDR=" + d.Addr(), "VIGIL_TOKEN=" + d.Token()}
	stderr := &syncBuffer{}
	cmd.Stderr = stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	stopped := false
	stop = func() {
		if stopped {
			return
		}
		stopped = true
		in.Close() // the client goes away: the server exits
		for range c.msgs {
		}
		if err := cmd.Wait(); err != nil {
			t.Errorf("vigil mcp --channel exited with %v\nstderr: %s", err, stderr)
		}
	}
	c = newRawClient(t, in, out)
	t.Cleanup(stop)
	return c, c.initialize(), stop
}

// TestChannelStdio drives "vigil mcp --channel", a real subprocess, with
// raw JSON-RPC against a real daemon: the capability and instructions, one
// event per outcome with its meta, what settled while no session was
// connected pushed once to the next, and a burst bounded to one summary.
func TestChannelStdio(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	cl, err := client.New(d.Addr(), d.Token(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.CloseIdleConnections()
	ctx := t.Context()
	const r = "agent-ch"
	note := func(title string) int64 {
		t.Helper()
		m, err := cl.Note(ctx, vigil.NoteRequest{Recipient: r, Title: title, Body: "body of " + title})
		if err != nil {
			t.Fatal(err)
		}
		return m.Seq
	}

	c, init, stop := vigilChannel(t, d, r)
	caps, _ := init["capabilities"].(map[string]any)
	exp, _ := caps["experimental"].(map[string]any)
	if v, ok := exp[mcpserver.ChannelCapability].(map[string]any); !ok || len(v) != 0 {
		t.Errorf("capabilities = %v, want experimental %q: {}", caps, mcpserver.ChannelCapability)
	}
	instr, _ := init["instructions"].(string)
	for _, want := range []string{"<channel", "watch_id", "first_seq", "inbox_read", "END YOUR TURN"} {
		if !strings.Contains(instr, want) {
			t.Errorf("instructions do not mention %q:\n%s", want, instr)
		}
	}

	// A timer that fires: exactly one event, with its meta.
	w, err := cl.Register(ctx, vigil.RegisterRequest{Kind: vigil.KindTimer, Predicate: json.RawMessage(`{"in":"1s"}`), Recipient: r, Note: "check the deploy"})
	if err != nil {
		t.Fatal(err)
	}
	ev := c.next()
	wantMeta := map[string]string{"event": "message", "type": "fired", "state": "fired", "kind": "timer", "watch_id": w.ID, "recipient": r}
	for k, v := range wantMeta {
		if ev.Meta[k] != v {
			t.Errorf("meta[%s] = %q, want %q (meta %v)", k, ev.Meta[k], v, ev.Meta)
		}
	}
	if _, err := strconv.ParseInt(ev.Meta["seq"], 10, 64); err != nil || !strings.Contains(ev.Content, "check the deploy") {
		t.Errorf("event = %+v, want a seq and the outcome sentence", ev)
	}
	for k := range ev.Meta {
		if strings.Trim(k, "abcdefghijklmnopqrstuvwxyz_") != "" {
			t.Errorf("meta key %q is not a plain identifier", k)
		}
	}
	// The next event is the next message: the timer's was not pushed twice.
	seq := note("after the timer")
	if ev := c.next(); ev.Meta["seq"] != strconv.FormatInt(seq, 10) || ev.Meta["type"] != "note" || !strings.Contains(ev.Content, "body of after the timer") {
		t.Errorf("event after the timer's = %+v, want the note %d", ev, seq)
	}
	stop()

	// Settled while no session was connected: pushed to the next, oldest
	// first, once.
	a, b := note("while away 1"), note("while away 2")
	c, _, stop = vigilChannel(t, d, r)
	for _, want := range []int64{a, b} {
		if ev := c.next(); ev.Meta["seq"] != strconv.FormatInt(want, 10) {
			t.Errorf("event = %+v, want message %d", ev, want)
		}
	}
	if s := note("sentinel 1"); c.next().Meta["seq"] != strconv.FormatInt(s, 10) {
		t.Errorf("a message was pushed twice to the second session")
	}
	stop()

	// A burst of 30: the window's bound, the last place a summary.
	var burst []int64
	for i := range 30 {
		burst = append(burst, note(fmt.Sprintf("burst %d", i)))
	}
	c, _, stop = vigilChannel(t, d, r)
	for i := range mcpserver.DefaultChannelBurst - 1 {
		if ev := c.next(); ev.Meta["event"] != "message" || ev.Meta["seq"] != strconv.FormatInt(burst[i], 10) {
			t.Fatalf("burst event %d = %+v, want message %d", i, ev, burst[i])
		}
	}
	sum := c.next()
	first, last := burst[mcpserver.DefaultChannelBurst-1], burst[29]
	if sum.Meta["event"] != "summary" || sum.Meta["count"] != "21" || sum.Meta["first_seq"] != strconv.FormatInt(first, 10) ||
		sum.Meta["last_seq"] != strconv.FormatInt(last, 10) || !strings.Contains(sum.Content, fmt.Sprintf(`inbox_read {"after": %d, "ack": false, "limit": 21}`, first-1)) {
		t.Errorf("summary = %+v, want 21 messages %d to %d and how to read them", sum, first, last)
	}
	if s := note("sentinel 2"); c.next().Meta["seq"] != strconv.FormatInt(s, 10) {
		t.Errorf("more than one summary for the burst")
	}
	// The summary's advice reads exactly the 21.
	after := first - 1
	page, err := cl.Messages(ctx, vigil.MessagesRequest{Recipient: r, Reader: mcpserver.DefaultReader, After: &after, Limit: 21})
	if err != nil || len(page.Messages) != 21 || page.Messages[20].Seq != last {
		t.Errorf("reading as the summary says = %d messages, %v", len(page.Messages), err)
	}
	stop()
	// Everything pushed was marked read for the channel's reader; this
	// client did not say it takes channel events, so the notice hook
	// still shows it all.
	page, err = cl.Messages(ctx, vigil.MessagesRequest{Recipient: r, Reader: mcpserver.ChannelReader})
	if err != nil || len(page.Messages) != 0 {
		t.Errorf("unread for the channel reader after the pushes: %+v, %v", page.Messages, err)
	}
	page, err = cl.Messages(ctx, vigil.MessagesRequest{Recipient: r, Reader: mcpserver.DefaultReader, Limit: 1000})
	if err != nil || len(page.Messages) != 36 {
		t.Errorf("unread for the notice reader after the pushes: %d, %v; want all 36", len(page.Messages), err)
	}
}
