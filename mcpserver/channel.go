package mcpserver

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/vigil-run/vigil"
	"github.com/vigil-run/vigil/wording"
)

// The channel push: Claude Code's channels (a research preview, see
// https://code.claude.com/docs/en/channels-reference) let a stdio MCP
// server that declares the experimental capability "claude/channel" push
// notifications/claude/channel events into the running session, each
// {"content": string, "meta": {identifier: string}}; the model sees
// <channel source="NAME" key="value"…>content</channel>.
//
// The go-sdk declares the capability (ServerCapabilities.Experimental) but
// has no call that sends a notification of a method of one's own, so Run
// wraps the transport, keeps the Connection it makes, and writes the
// JSON-RPC notification on it (Connection allows concurrent Writes).
//
// Claude Code takes the events only on a connection of a protocol version
// before 2026-07-28, so a channel speaks only those (see
// channelProtocolCeiling), and pushes once the handshake is made (see
// channelReady).
const (
	// ChannelCapability is the experimental capability a channel declares.
	ChannelCapability = "claude/channel"
	// ChannelMethod is the method of a channel event.
	ChannelMethod = "notifications/claude/channel"

	// DefaultChannelBurst and DefaultChannelWindow bound the push: at most
	// this many notifications in the window; a burst above it becomes one
	// summary notification.
	DefaultChannelBurst  = 10
	DefaultChannelWindow = 2 * time.Second

	// channelContentBytes bounds a notification's content.
	channelContentBytes = 2000
	// channelDetailLines bounds the lines under the sentence.
	channelDetailLines = 6
	// channelPoll is how long one mailbox read waits for a message.
	channelPoll = 25 * time.Second
	// channelAckTimeout bounds marking pushed messages read.
	channelAckTimeout = 10 * time.Second
	// channelPage is how many messages one read takes.
	channelPage = 100

	// ChannelReader is the mailbox reader of a channel: its own cursor, so
	// that it pushes each message once, apart from DefaultReader's.
	ChannelReader = "channel"
)

const channelInstructions = `
This server is also a channel: when something lands in your inbox (%[1]s) — a watch you registered settled, a standing watch saw a change, another agent left a note — it arrives in this session on its own as a <channel source="…"> event. Its body is the message's sentence, then what it carries (a note's body, a folder report's summary and the first lines of its review, the tail of a failure's output). Its attributes:
- event: "message" (one inbox message) or "summary" (several arrived at once; see count)
- type: fired, failed, expired, errored, cancelled (an outcome), changed (a standing watch's change) or note (left by another agent or a job; no watch)
- seq: the message's place in the inbox; recipient: whose inbox
- watch_id, kind, state: the watch it is about, its kind, and the state it settled in (absent for a note)
- count, first_seq, last_seq: on a summary, how many messages and which
Each message comes here once. The vigil notice hook may show it again at your next prompt, since vigil cannot tell that this session showed it to you: it is the same message (the same seq), so do not act on it twice. Act on it as the note you gave the watch says; call watch_get or watch_why with the watch_id for the details, and inbox_read with {"after": first_seq - 1, "ack": false} to read the messages a summary announces. These events are outcomes only: there is nothing to poll.`

// channelProtocolCeiling is the first MCP protocol version a channel does
// not speak. Claude Code (2.1.328) takes channel events only on a
// connection that negotiated an earlier one: on 2026-07-28 and later it
// skips the channel ("connection negotiated a modern protocol revision
// with no unsolicited notification path"; its debug log and its /mcp view
// say so). It opens a stdio server with a server/discover probe at
// 2026-07-28 and, when the answer offers no version of that protocol,
// falls back to initialize at 2025-11-25.
const channelProtocolCeiling = "2026-07-28"

// channelProtocolVersions are the protocol versions a channel speaks:
// those of the SDK before channelProtocolCeiling. With them as
// ServerOptions.SupportedProtocolVersions, the SDK answers server/discover
// (and any request of the 2026-07-28 protocol) with the error
// unsupported protocol version, whose data lists them (SEP-2575), and
// negotiates the newest of them at initialize.
func channelProtocolVersions() []string {
	var vs []string
	for _, v := range mcp.SupportedProtocolVersions() {
		if v < channelProtocolCeiling {
			vs = append(vs, v)
		}
	}
	return vs
}

// channelReady is a receiving middleware of a channel: it closes s.ready
// once the client has made its handshake, that is once an initialized
// session receives anything but a ping: notifications/initialized, or the
// first request of a client that leaves that notification out. Only then
// may the server send it notifications of its own.
func (s *server) channelReady(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		res, err := next(ctx, method, req)
		if method == "initialize" || method == "ping" {
			return res, err
		}
		if ss, ok := req.GetSession().(*mcp.ServerSession); ok && ss.InitializeParams() != nil {
			s.readyOnce.Do(func() { close(s.ready) })
		}
		return res, err
	}
}

// channelTransport wraps the transport Run serves, keeping the
// connection it makes so the channel can write on it.
type channelTransport struct {
	mcp.Transport
	mu   sync.Mutex
	conn mcp.Connection
}

func (t *channelTransport) Connect(ctx context.Context) (mcp.Connection, error) {
	c, err := t.Transport.Connect(ctx)
	if err == nil {
		t.mu.Lock()
		t.conn = c
		t.mu.Unlock()
	}
	return c, err
}

func (t *channelTransport) connection() mcp.Connection {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.conn
}

// channel pushes one recipient's new messages on one connection.
type channel struct {
	s         *server
	recipient string
	t         *channelTransport
	burst     int
	window    time.Duration
	sent      []time.Time // when the notifications of the current window went out
	through   int64       // the highest seq pushed, or passed over
	// notice says the client declared it takes channel events (the
	// experimental capability claude/channel in its initialize): what is
	// pushed is then marked read for DefaultReader too.
	notice bool
}

// takesChannel reports whether a client declared, in its initialize, that
// it takes channel events. Claude Code 2.1.328 does not: it drops them
// unless launched with the channel enabled, and says neither.
func takesChannel(p *mcp.InitializeParams) bool {
	if p == nil || p.Capabilities == nil {
		return false
	}
	_, ok := p.Capabilities.Experimental[ChannelCapability]
	return ok
}

// channelParams are the params of a channel notification.
type channelParams struct {
	Content string            `json:"content"`
	Meta    map[string]string `json:"meta"`
}

// run pushes until ctx ends or a write fails (the client went away). It
// reads the recipient's unread messages as ChannelReader, oldest first,
// passes over those DefaultReader has read (the notice hook or inbox_read
// showed them), and acks each for ChannelReader once it was written.
//
// A written notification is not a shown one: Claude Code drops channel
// events silently unless launched with the channel enabled, and the server
// is configured for every launch. So what is pushed stays unread for
// DefaultReader, and the notice hook shows it at the next prompt. A
// client that declared it takes channel events (notice) is pushed what
// DefaultReader has not read, which is then read for both: a reader's
// cursor marks everything up to it read, so acking DefaultReader past a
// message pushed only to another session, which may have dropped it,
// would lose that message.
func (c *channel) run(ctx context.Context) {
	backoff := resubscribeMin
	sleep := func() bool {
		t := time.NewTimer(backoff)
		defer t.Stop()
		backoff = min(2*backoff, resubscribeMax)
		select {
		case <-ctx.Done():
			return false
		case <-t.C:
			return true
		}
	}
	for ctx.Err() == nil {
		reader := ChannelReader
		if c.notice {
			reader = DefaultReader
		}
		page, err := c.s.svc.Messages(ctx, vigil.MessagesRequest{Recipient: c.recipient, Reader: reader, Wait: channelPoll, Limit: channelPage})
		var shown vigil.MessagesPage
		if err == nil && !c.notice && len(page.Messages) > 0 {
			// Where the notice reader is: what it read was shown.
			shown, err = c.s.svc.Messages(ctx, vigil.MessagesRequest{Recipient: c.recipient, Reader: DefaultReader, Limit: 1})
		}
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			c.s.log.WarnContext(ctx, "channel: reading the inbox failed; trying again", "recipient", c.recipient, "retry_in", backoff, "err", err)
			if !sleep() {
				return
			}
			continue
		}
		var ms []*vigil.Message
		for _, m := range page.Messages {
			if m.Seq > c.through && m.Seq > shown.Cursor {
				ms = append(ms, m)
			}
		}
		if len(ms) == 0 && len(page.Messages) > 0 {
			// Pushed, but the ack was lost, or shown already: ack, not
			// push.
			c.through = max(c.through, page.Messages[len(page.Messages)-1].Seq)
			if err := c.ack(ctx); err != nil && !sleep() {
				return
			}
			continue
		}
		backoff = resubscribeMin
		if err := c.push(ctx, ms); err != nil {
			if ctx.Err() == nil {
				c.s.log.DebugContext(ctx, "channel: the client went away", "err", err)
			}
			return
		}
	}
}

// push writes ms, oldest first, within the burst bound: while more are
// waiting than the window still allows, they go one by one until one
// place is left, which takes a summary of the rest.
func (c *channel) push(ctx context.Context, ms []*vigil.Message) error {
	for i := 0; i < len(ms); {
		now := time.Now()
		left := c.left(now)
		if left == 0 {
			t := time.NewTimer(c.sent[0].Add(c.window).Sub(now))
			select {
			case <-ctx.Done():
				t.Stop()
				return ctx.Err()
			case <-t.C:
			}
			continue
		}
		n := 1
		p := c.message(ms[i])
		if rest := len(ms) - i; rest > left && left == 1 {
			n = rest
			p = c.summary(ms[i:])
		}
		if err := c.write(ctx, p); err != nil {
			return err
		}
		if n > 1 && c.notice {
			// A summary shows a count, not the messages: they stay
			// unread for DefaultReader, whose cursor marks everything up
			// to it read, so from now on this session acks its own
			// reader only, as for a client that did not declare it
			// takes channel events, and the hook shows them.
			c.notice = false
		}
		c.sent = append(c.sent, now)
		i += n
		c.through = ms[i-1].Seq
		if err := c.ack(ctx); err != nil {
			// Next read shows them again; through keeps them from a
			// second push, and the ack is tried again.
			c.s.log.WarnContext(ctx, "channel: marking pushed messages read failed", "recipient", c.recipient, "seq", c.through, "err", err)
		}
	}
	return nil
}

// left returns how many notifications the window still allows at now.
func (c *channel) left(now time.Time) int {
	i := 0
	for i < len(c.sent) && !now.Before(c.sent[i].Add(c.window)) {
		i++
	}
	c.sent = c.sent[i:]
	return max(c.burst-len(c.sent), 0)
}

// ack marks what was pushed (or passed over) read for ChannelReader, and
// for DefaultReader when the client takes channel events. It outlives the
// session: a client that goes away right after a notification was written
// must not get it again from the next session.
func (c *channel) ack(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), channelAckTimeout)
	defer cancel()
	if err := c.s.svc.Ack(ctx, vigil.AckRequest{Recipient: c.recipient, Reader: ChannelReader, Seq: c.through}); err != nil {
		return err
	}
	if !c.notice {
		return nil
	}
	return c.s.svc.Ack(ctx, vigil.AckRequest{Recipient: c.recipient, Reader: DefaultReader, Seq: c.through})
}

// write sends one channel notification on the connection.
func (c *channel) write(ctx context.Context, p channelParams) error {
	conn := c.t.connection()
	if conn == nil {
		return mcp.ErrConnectionClosed
	}
	raw, err := json.Marshal(p)
	if err != nil {
		return err
	}
	return conn.Write(ctx, &jsonrpc.Request{Method: ChannelMethod, Params: raw})
}

// message is the notification of one message.
func (c *channel) message(m *vigil.Message) channelParams {
	meta := map[string]string{"event": "message", "type": string(m.Type), "seq": strconv.FormatInt(m.Seq, 10), "recipient": m.Recipient}
	var d struct {
		Kind  vigil.Kind  `json:"kind"`
		State vigil.State `json:"state"`
	}
	_ = json.Unmarshal(m.Data, &d)
	for k, v := range map[string]string{"watch_id": m.WatchID, "kind": string(d.Kind), "state": string(d.State)} {
		if v != "" && m.WatchID != "" {
			meta[k] = v
		}
	}
	b := strings.Builder{}
	b.WriteString(m.Text)
	for _, l := range wording.Detail(m, channelDetailLines) {
		b.WriteString("\n")
		b.WriteString(l)
	}
	return channelParams{Content: clipBytes(b.String(), channelContentBytes), Meta: meta}
}

// summary is the one notification of a burst.
func (c *channel) summary(ms []*vigil.Message) channelParams {
	first, last := ms[0].Seq, ms[len(ms)-1].Seq
	content := fmt.Sprintf("%d vigil messages for %s arrived at once (seq %d to %d), too many to push one by one. Read them all with inbox_read {\"after\": %d, \"ack\": false, \"limit\": %d}.",
		len(ms), c.recipient, first, last, first-1, min(len(ms), maxInboxLimit))
	return channelParams{Content: content, Meta: map[string]string{"event": "summary", "recipient": c.recipient,
		"count": strconv.Itoa(len(ms)), "first_seq": strconv.FormatInt(first, 10), "last_seq": strconv.FormatInt(last, 10)}}
}

// clipBytes cuts s to at most n bytes on a rune boundary, marking the cut.
func clipBytes(s string, n int) string {
	if len(s) <= n {
		return s
	}
	n -= len("…")
	for n > 0 && s[n]&0xC0 == 0x80 {
		n--
	}
	return s[:n] + "…"
}
