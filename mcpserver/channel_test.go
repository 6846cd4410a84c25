package mcpserver_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/vigil-run/vigil"
	"github.com/vigil-run/vigil/engine"
	"github.com/vigil-run/vigil/mcpserver"
	"github.com/vigil-run/vigil/store/memstore"
	"github.com/vigil-run/vigil/watcher"
	"github.com/vigil-run/vigil/watcher/timer"
)

// TestChannelBurstWindow checks the burst bound on the fake clock of a
// synctest bubble: 30 messages waiting when the session starts become 9
// events and one summary of 21, all at once; what lands while the window
// is full waits for it to pass, then goes one by one.
func TestChannelBurstWindow(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		e := engine.New(engine.Config{Store: memstore.New(), Watchers: watcher.NewRegistry(timer.New(timer.Config{}))})
		if err := e.Prime(t.Context()); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		engineDone := make(chan error, 1)
		go func() { engineDone <- e.Run(ctx) }()
		note := func(title string) int64 {
			t.Helper()
			m, err := e.Note(ctx, vigil.NoteRequest{Recipient: "r", Title: title})
			if err != nil {
				t.Fatal(err)
			}
			return m.Seq
		}
		var burst []int64
		for i := range 30 {
			burst = append(burst, note(fmt.Sprintf("burst %d", i)))
		}

		srvEnd, cliEnd := net.Pipe()
		runDone := make(chan error, 1)
		go func() {
			runDone <- mcpserver.Run(ctx, e, &mcpserver.Options{DefaultRecipient: "r", Channel: true}, &mcp.IOTransport{Reader: srvEnd, Writer: srvEnd})
		}()
		c := newRawClient(t, cliEnd, cliEnd)
		c.initialize()
		start := time.Now()
		for i := range 9 {
			if ev := c.next(); ev.Meta["seq"] != strconv.FormatInt(burst[i], 10) {
				t.Fatalf("event %d = %+v, want message %d", i, ev, burst[i])
			}
		}
		if ev := c.next(); ev.Meta["event"] != "summary" || ev.Meta["count"] != "21" {
			t.Fatalf("10th event = %+v, want a summary of 21", ev)
		}
		if d := time.Since(start); d != 0 {
			t.Errorf("the burst took %s of the fake clock, want none", d)
		}

		// The window is full: these wait for it to pass.
		more := []int64{note("late 1"), note("late 2"), note("late 3")}
		synctest.Wait()
		if len(c.msgs) != 0 || len(c.held) != 0 {
			t.Fatalf("%d messages written while the window was full", len(c.msgs)+len(c.held))
		}
		for _, want := range more {
			if ev := c.next(); ev.Meta["event"] != "message" || ev.Meta["seq"] != strconv.FormatInt(want, 10) {
				t.Fatalf("event = %+v, want message %d", ev, want)
			}
		}
		if d := time.Since(start); d != mcpserver.DefaultChannelWindow {
			t.Errorf("the late messages went out after %s, want the window, %s", d, mcpserver.DefaultChannelWindow)
		}

		cliEnd.Close()
		if err := <-runDone; err != nil {
			t.Logf("Run = %v", err)
		}
		// Pushed once: read for the channel's reader. This client did not
		// say it takes channel events: the notice hook still shows them.
		if got := unread(t, e, "r", mcpserver.ChannelReader); len(got) != 0 {
			t.Errorf("unread for the channel reader after the pushes: %v", got)
		}
		if got := unread(t, e, "r", mcpserver.DefaultReader); len(got) != len(burst)+len(more) {
			t.Errorf("unread for the notice reader after the pushes: %d, want all %d", len(got), len(burst)+len(more))
		}
		cancel()
		<-engineDone
	})
}

// What Claude Code 2.1.328 sends to a stdio MCP server, copied from the
// wire of "vigil mcp --channel" under "claude mcp list" and an interactive
// "claude --dangerously-load-development-channels server:vigil": a
// server/discover probe of the 2026-07-28 protocol, then, when the answer
// offers no version of that protocol, initialize at 2025-11-25.
const (
	claudeClientInfo = `{"name":"claude-code","title":"Claude Code","version":"2.1.328","description":"Anthropic's agentic coding tool","websiteUrl":"https://claude.com/claude-code"}`
	claudeDiscover   = `{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":` + claudeClientInfo +
		`,"io.modelcontextprotocol/clientCapabilities":{"roots":{"listChanged":true},"elicitation":{"form":{},"url":{}}}}}`
	claudeInitialize = `{"protocolVersion":"2025-11-25","capabilities":{"roots":{"listChanged":true},"elicitation":{"form":{},"url":{}}},"clientInfo":` + claudeClientInfo + `}`
)

// channelEngine starts an engine on a memory store, in a synctest bubble;
// stop ends it.
func channelEngine(t *testing.T) (e *engine.Engine, ctx context.Context, stop func()) {
	t.Helper()
	e = engine.New(engine.Config{Store: memstore.New(), Watchers: watcher.NewRegistry(timer.New(timer.Config{}))})
	if err := e.Prime(t.Context()); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- e.Run(ctx) }()
	return e, ctx, func() { cancel(); <-done }
}

// runChannel serves Run as a channel for recipient r on e over a pipe, and
// returns a raw client on the other end; end closes the client's end, as
// a client that goes away does, and waits for Run to return.
func runChannel(t *testing.T, ctx context.Context, e *engine.Engine, r string) (c *rawClient, end func()) {
	t.Helper()
	srvEnd, cliEnd := net.Pipe()
	runDone := make(chan error, 1)
	go func() {
		runDone <- mcpserver.Run(ctx, e, &mcpserver.Options{DefaultRecipient: r, Channel: true}, &mcp.IOTransport{Reader: srvEnd, Writer: srvEnd})
	}()
	return newRawClient(t, cliEnd, cliEnd), func() {
		cliEnd.Close()
		<-runDone
	}
}

// note leaves a note for r and returns its seq.
func note(t *testing.T, e *engine.Engine, r, title string) int64 {
	t.Helper()
	m, err := e.Note(t.Context(), vigil.NoteRequest{Recipient: r, Title: title})
	if err != nil {
		t.Fatal(err)
	}
	return m.Seq
}

// channelSession starts an engine with one unread note for recipient r and
// Run as a channel for r, and returns a raw client; stop ends both. It
// runs in a synctest bubble.
func channelSession(t *testing.T, r string) (c *rawClient, noteSeq int64, stop func()) {
	t.Helper()
	e, ctx, stopEngine := channelEngine(t)
	noteSeq = note(t, e, r, "CI is green: open the PR")
	c, end := runChannel(t, ctx, e, r)
	return c, noteSeq, func() { end(); stopEngine() }
}

// TestChannelClaudeHandshake speaks Claude Code 2.1.328's handshake, message
// for message, and holds that it ends on a protocol in which Claude Code
// takes channel events, and that the event comes once it is made. Claude
// Code skips a channel on a connection of the 2026-07-28 protocol ("no
// unsolicited notification path"): the channel answers its server/discover
// probe with unsupported protocol version, offering only earlier versions,
// which Claude Code takes for a server of the earlier protocol: it falls
// back to initialize. Nothing is pushed before notifications/initialized.
func TestChannelClaudeHandshake(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		c, seq, stop := channelSession(t, "r")
		defer stop()

		res := c.request("server-discover-probe-1", "server/discover", json.RawMessage(claudeDiscover))
		var rpcErr struct {
			Code int `json:"code"`
			Data struct {
				Supported []string `json:"supported"`
			} `json:"data"`
		}
		if res.Error == nil || json.Unmarshal(res.Error, &rpcErr) != nil || rpcErr.Code != -32022 || !slices.Contains(rpcErr.Data.Supported, "2025-11-25") {
			t.Fatalf("server/discover = %s %s, want error -32022 (unsupported protocol version) offering 2025-11-25", res.Result, res.Error)
		}
		for _, v := range rpcErr.Data.Supported {
			if v >= "2026-07-28" {
				t.Errorf("server/discover offers %s: Claude Code would stay on it and skip the channel", v)
			}
		}
		synctest.Wait()
		if evs := c.events(); len(evs) > 0 {
			t.Fatalf("%d channel events before initialize", len(evs))
		}

		res = c.request(0, "initialize", json.RawMessage(claudeInitialize))
		var init struct {
			ProtocolVersion string `json:"protocolVersion"`
			Capabilities    struct {
				Experimental map[string]any `json:"experimental"`
			} `json:"capabilities"`
		}
		if res.Error != nil || json.Unmarshal(res.Result, &init) != nil || init.ProtocolVersion != "2025-11-25" || init.Capabilities.Experimental[mcpserver.ChannelCapability] == nil {
			t.Fatalf("initialize = %s %s, want protocol 2025-11-25 and the capability %s", res.Result, res.Error, mcpserver.ChannelCapability)
		}
		synctest.Wait()
		if evs := c.events(); len(evs) > 0 {
			t.Fatalf("%d channel events before notifications/initialized", len(evs))
		}

		c.send(map[string]any{"jsonrpc": "2.0", "method": "notifications/initialized"})
		synctest.Wait()
		if evs := c.events(); len(evs) != 1 || !strings.Contains(string(evs[0].Params), `"seq":"`+strconv.FormatInt(seq, 10)+`"`) ||
			!strings.Contains(string(evs[0].Params), `"content":"CI is green: open the PR"`) {
			t.Errorf("channel events after the handshake = %v, want the note %d", evs, seq)
		}
	})
}

// TestChannelStartsOnFirstRequest: a client that leaves
// notifications/initialized out still gets the push once it makes a
// request after initialize, and not before.
func TestChannelStartsOnFirstRequest(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		c, seq, stop := channelSession(t, "r")
		defer stop()
		if res := c.request(0, "initialize", json.RawMessage(claudeInitialize)); res.Error != nil {
			t.Fatalf("initialize = %s", res.Error)
		}
		synctest.Wait()
		if evs := c.events(); len(evs) > 0 {
			t.Fatalf("%d channel events before the handshake was made", len(evs))
		}
		if res := c.call("tools/list", nil); res.Error != nil {
			t.Fatalf("tools/list = %s", res.Error)
		}
		synctest.Wait()
		if evs := c.events(); len(evs) != 1 || !strings.Contains(string(evs[0].Params), `"seq":"`+strconv.FormatInt(seq, 10)+`"`) {
			t.Errorf("channel events after the first request = %v, want the note %d", evs, seq)
		}
	})
}

// unread returns the seqs of r's messages that reader has not read.
func unread(t *testing.T, e *engine.Engine, r, reader string) []int64 {
	t.Helper()
	page, err := e.Messages(t.Context(), vigil.MessagesRequest{Recipient: r, Reader: reader})
	if err != nil {
		t.Fatal(err)
	}
	var seqs []int64
	for _, m := range page.Messages {
		seqs = append(seqs, m.Seq)
	}
	return seqs
}

// handshake makes the legacy handshake with initialize params p.
func (c *rawClient) handshake(p string) {
	c.t.Helper()
	if res := c.request(0, "initialize", json.RawMessage(p)); res.Error != nil {
		c.t.Fatalf("initialize = %s", res.Error)
	}
	c.send(map[string]any{"jsonrpc": "2.0", "method": "notifications/initialized"})
}

// pushed waits for the bubble to settle and returns the seqs of the
// channel events the client got since it last looked.
func (c *rawClient) pushed() []int64 {
	c.t.Helper()
	synctest.Wait()
	var seqs []int64
	for _, m := range c.events() {
		var ev channelEvent
		if err := json.Unmarshal(m.Params, &ev); err != nil {
			c.t.Fatalf("channel params %s: %v", m.Params, err)
		}
		n, err := strconv.ParseInt(ev.Meta["seq"], 10, 64)
		if err != nil {
			c.t.Fatalf("channel event %s: no seq", m.Params)
		}
		seqs = append(seqs, n)
	}
	return seqs
}

// TestChannelNoticeStillShows: a channel's push marks nothing read for the
// notice reader unless the client declared it takes channel events. A
// written notification is not a shown one: Claude Code drops channel
// events silently unless launched with the channel enabled, and its
// initialize says nothing either way; so does every other MCP client (and
// "claude mcp list"). The notice hook (and inbox_read) must still show
// what was pushed. The channel keeps its own cursor, so it pushes each
// message once, across sessions too, and it does not push what the notice
// reader has read already.
func TestChannelNoticeStillShows(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		e, ctx, stop := channelEngine(t)
		defer stop()
		const r = "r"
		shown := note(t, e, r, "shown by the hook already")
		if err := e.Ack(ctx, vigil.AckRequest{Recipient: r, Reader: mcpserver.DefaultReader, Seq: shown}); err != nil {
			t.Fatal(err)
		}
		first := note(t, e, r, "CI is green: open the PR")

		// Claude Code, as its initialize is on the wire.
		c, end := runChannel(t, ctx, e, r)
		c.handshake(claudeInitialize)
		if got := c.pushed(); !slices.Equal(got, []int64{first}) {
			t.Errorf("pushed %v, want [%d] (not %d, which the notice reader read)", got, first, shown)
		}
		end()
		if got := unread(t, e, r, mcpserver.DefaultReader); !slices.Equal(got, []int64{first}) {
			t.Errorf("unread for the notice reader after the push = %v, want [%d]: the hook must still show it", got, first)
		}

		// The next session pushes what came since, not that again.
		second := note(t, e, r, "the deploy finished")
		c, end = runChannel(t, ctx, e, r)
		c.handshake(claudeInitialize)
		if got := c.pushed(); !slices.Equal(got, []int64{second}) {
			t.Errorf("the second session was pushed %v, want [%d] only", got, second)
		}
		end()

		// A client that declares it takes channel events is pushed what
		// the notice reader has not read, which is then read for it: the
		// two pushed to Claude Code, which may have dropped them, too.
		third := note(t, e, r, "the nightly run failed")
		c, end = runChannel(t, ctx, e, r)
		c.handshake(strings.Replace(claudeInitialize, `"capabilities":{`, `"capabilities":{"experimental":{"`+mcpserver.ChannelCapability+`":{}},`, 1))
		if got := c.pushed(); !slices.Equal(got, []int64{first, second, third}) {
			t.Errorf("the third session was pushed %v, want [%d %d %d]", got, first, second, third)
		}
		end()
		if got := unread(t, e, r, mcpserver.DefaultReader); len(got) != 0 {
			t.Errorf("unread for the notice reader = %v after a client that takes channel events was pushed them, want none", got)
		}
		if got := unread(t, e, r, mcpserver.ChannelReader); len(got) != 0 {
			t.Errorf("unread for the channel reader = %v, want none", got)
		}
	})
}

// TestChannelSummaryLeavesNoticeUnread: a client that declares it takes
// channel events has what is pushed to it marked read for the notice
// reader too; but a summary pushes a count, not the messages. Those it
// announces must stay unread for the notice reader, so the hook (or
// inbox_read) still shows them: a model that does not follow the
// summary's advice must not lose them.
func TestChannelSummaryLeavesNoticeUnread(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		e, ctx, stop := channelEngine(t)
		defer stop()
		const r = "r"
		var burst []int64
		for i := range 30 {
			burst = append(burst, note(t, e, r, fmt.Sprintf("burst %d", i)))
		}
		c, end := runChannel(t, ctx, e, r)
		c.handshake(strings.Replace(claudeInitialize, `"capabilities":{`, `"capabilities":{"experimental":{"`+mcpserver.ChannelCapability+`":{}},`, 1))
		for i := range 9 {
			if ev := c.next(); ev.Meta["seq"] != strconv.FormatInt(burst[i], 10) {
				t.Fatalf("event %d = %+v, want message %d", i, ev, burst[i])
			}
		}
		if ev := c.next(); ev.Meta["event"] != "summary" || ev.Meta["count"] != "21" {
			t.Fatalf("10th event = %+v, want a summary of 21", ev)
		}
		// One more, pushed on its own once the window has passed.
		late := note(t, e, r, "late")
		if ev := c.next(); ev.Meta["seq"] != strconv.FormatInt(late, 10) {
			t.Fatalf("event after the window = %+v, want message %d", ev, late)
		}
		end()
		if got := unread(t, e, r, mcpserver.DefaultReader); len(got) == 0 || got[0] != burst[9] || !slices.Contains(got, burst[29]) {
			t.Errorf("unread for the notice reader = %v, want the 21 the summary announced (from %d to %d) still unread", got, burst[9], burst[29])
		}
		if got := unread(t, e, r, mcpserver.ChannelReader); len(got) != 0 {
			t.Errorf("unread for the channel reader = %v, want none: each was pushed once", got)
		}
	})
}
