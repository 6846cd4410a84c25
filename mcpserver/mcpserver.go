// Package mcpserver serves vigil over the Model Context Protocol with the
// official Go SDK (github.com/modelcontextprotocol/go-sdk): typed tools over
// a vigil.Service, the inbox as a resource an agent harness can subscribe
// to, and an HTTP handler for the daemon's /mcp endpoint.
//
// The tools are watch_create, watch_create_many, watch_list, watch_get,
// watch_why, watch_cancel, watch_wait, inbox_read and note_write. Their descriptions
// are written for a model: create a watch and END THE TURN instead of
// polling; the outcome arrives in the inbox. watch_wait is bounded (MaxWait, 50 s by
// default, under the 60 s at which MCP clients commonly give up on a call)
// and answers with the state so far and a retry_after.
//
// A refusal by vigil (an unknown kind, an interval below the floor, a watch
// that is not the caller's) is a tool error, not a protocol error: the
// result has isError set and one line of text, "CODE: sentence (argument
// FIELD)", so the model can read it and correct its call.
//
// Every tool acts for one recipient: the tool's recipient argument, else
// the recipient the connection names (?recipient= on the /mcp URL), else
// Options.DefaultRecipient, else the only recipient a scoped token acts
// for. watch_list shows only that recipient's watches.
//
// With Options.Channel, Run is also a Claude Code channel: it pushes each
// new message of its recipient into the session as a
// notifications/claude/channel notification (see channel.go).
//
// New returns a server for any transport, and Run serves one transport
// (the stdio proxy "vigil mcp" runs it over a client.Client to the
// daemon). NewHandler serves it over streamable HTTP behind httpapi's
// bearer authentication, acting within the scope of each request's token.
package mcpserver

import (
	"context"
	"fmt"
	"log/slog"
	"runtime/debug"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/vigil-run/vigil"
	"github.com/vigil-run/vigil/internal/longcall"
	"github.com/vigil-run/vigil/watcher"
	"github.com/vigil-run/vigil/watcher/kinds"
)

// Defaults of Options and of the tools; each lives here only.
const (
	// DefaultMaxWait bounds watch_wait: MCP clients commonly time a call
	// out at 60 s, so a wait answers before that.
	DefaultMaxWait = 50 * time.Second
	// DefaultProgressEvery is how often watch_wait sends a progress
	// notification while it waits, when the caller asked for them.
	DefaultProgressEvery = 10 * time.Second
	// DefaultReader is the mailbox reader of inbox_read and of the inbox
	// resource: the same reader as "vigil notice", so an agent sees each
	// message once whether its harness hook or a tool call shows it.
	DefaultReader = "notice"
	// InboxURITemplate is the URI template of the inbox resource.
	InboxURITemplate = "vigil://inbox/{recipient}"
	// inboxURIPrefix is InboxURITemplate up to the variable.
	inboxURIPrefix = "vigil://inbox/"
	// defaultListLimit and maxListLimit bound watch_list.
	defaultListLimit = 50
	maxListLimit     = 200
	// defaultInboxLimit and maxInboxLimit bound inbox_read and the resource.
	defaultInboxLimit = 50
	maxInboxLimit     = 200
)

// Options configure the MCP server. A nil *Options means the defaults.
type Options struct {
	// DefaultRecipient is the recipient a tool acts for when neither its
	// recipient argument nor the connection names one. Empty means none:
	// such a call is refused, unless the caller's token acts for exactly
	// one recipient.
	DefaultRecipient string
	// Logger receives what the server logs (subscriptions that failed,
	// progress that could not be sent). Nil discards.
	Logger *slog.Logger
	// MaxWait bounds watch_wait (default DefaultMaxWait).
	MaxWait time.Duration
	// ProgressEvery is how often watch_wait sends a progress notification
	// while it waits (default DefaultProgressEvery).
	ProgressEvery time.Duration
	// Version is the server version announced to clients (default: the
	// module version of the binary).
	Version string
	// ChainDepth is how deep in a chain of vigil-started commands the
	// server runs (VIGIL_CHAIN_DEPTH); registrations carry it.
	ChainDepth int
	// Kinds are the kinds the daemon runs (its watcher registry's
	// descriptors): watch_create names them, declares their predicates'
	// schemas and checks a predicate against its kind's. The zero value
	// means every kind built into vigil (watcher/kinds).
	Kinds watcher.Kinds
	// Channel makes Run a Claude Code channel: it declares the
	// experimental capability claude/channel, speaks the MCP protocol
	// versions before 2026-07-28 only (on 2026-07-28 Claude Code skips a
	// channel), and pushes each new message of its recipient
	// (DefaultRecipient), once the client has made its handshake, as one
	// notifications/claude/channel notification. It marks what it pushed
	// read for its own reader, ChannelReader, and for DefaultReader (the
	// notice hook's) only when the client declared it takes channel
	// events; what DefaultReader has read is not pushed (see channel.go).
	// New and NewHandler ignore it.
	Channel bool
	// ChannelBurst and ChannelWindow bound the push: a burst above
	// ChannelBurst messages in ChannelWindow becomes one summary
	// notification (defaults DefaultChannelBurst, DefaultChannelWindow).
	ChannelBurst  int
	ChannelWindow time.Duration
	// WakeDir is the directory a session that watch_create's wake names
	// is resumed in: for `vigil mcp` over stdio, the directory it runs in,
	// which a harness makes its project's. Empty: the daemon's own.
	WakeDir string
}

// server holds what the tools share.
type server struct {
	svc  vigil.Service
	opts Options
	log  *slog.Logger
	srv  *mcp.Server
	now  func() time.Time
	// http makes every call act within the scope of the HTTP request's
	// token, and refuses a call that carries none.
	http bool
	subs *subscriptions
	// ready is closed once the client of a channel has made its handshake
	// (Options.Channel; see channelReady).
	ready     chan struct{}
	readyOnce sync.Once

	// Waits in flight, which closeWaits ends.
	calls longcall.Set // the long calls in flight
}

// New returns an MCP server whose tools and inbox resource act on svc.
// Calls act within the scope found in the context the transport gives the
// handlers (none, the admin, for stdio and in-memory transports); for
// HTTP, use NewHandler.
func New(svc vigil.Service, opts *Options) *mcp.Server {
	return newServer(svc, opts, false).srv
}

// Run serves the tools and the inbox resource over svc on one transport
// (stdio, say) until the client goes away or ctx ends. When ctx ends,
// waits in flight end at once, so Run returns promptly.
func Run(ctx context.Context, svc vigil.Service, opts *Options, t mcp.Transport) error {
	s := newServer(svc, opts, false)
	var ch *channel
	if s.opts.Channel {
		if s.opts.DefaultRecipient == "" {
			return vigil.FieldErrorf(vigil.CodeInvalidRequest, "recipient", "a channel pushes one recipient's messages: name it")
		}
		ct := &channelTransport{Transport: t}
		ch = &channel{s: s, recipient: s.opts.DefaultRecipient, t: ct, burst: s.opts.ChannelBurst, window: s.opts.ChannelWindow}
		t = ct
	}
	ss, err := s.srv.Connect(ctx, t, nil)
	if err != nil {
		return err
	}
	stop := context.AfterFunc(ctx, func() {
		s.closeWaits()
		_ = ss.Close()
	})
	defer stop()
	if ch != nil {
		// The push starts once the client has made its handshake, and
		// stops when the session ends.
		pctx, cancel := context.WithCancel(ctx)
		var wg sync.WaitGroup
		wg.Go(func() {
			select {
			case <-s.ready:
				ch.notice = takesChannel(ss.InitializeParams())
				ch.run(pctx)
			case <-pctx.Done():
			}
		})
		defer func() {
			cancel()
			wg.Wait()
		}()
	}
	err = ss.Wait()
	s.subs.closeAll()
	s.subs.wait()
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return err
}

func newServer(svc vigil.Service, opts *Options, overHTTP bool) *server {
	s := &server{svc: svc, now: time.Now, http: overHTTP}
	if opts != nil {
		s.opts = *opts
	}
	if s.opts.MaxWait <= 0 {
		s.opts.MaxWait = DefaultMaxWait
	}
	if s.opts.Kinds.Len() == 0 {
		s.opts.Kinds = kinds.Builtin()
	}
	if s.opts.ProgressEvery <= 0 {
		s.opts.ProgressEvery = DefaultProgressEvery
	}
	if s.opts.Version == "" {
		s.opts.Version = "devel"
		if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
			s.opts.Version = bi.Main.Version
		}
	}
	s.log = s.opts.Logger
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	s.log = s.log.With("component", "mcp")
	if s.opts.ChannelBurst <= 0 {
		s.opts.ChannelBurst = DefaultChannelBurst
	}
	if s.opts.ChannelWindow <= 0 {
		s.opts.ChannelWindow = DefaultChannelWindow
	}
	s.subs = newSubscriptions(s)
	s.ready = make(chan struct{})
	so := &mcp.ServerOptions{
		Instructions:       instructions,
		Logger:             slog.New(quietHandler{s.log.Handler()}),
		SubscribeHandler:   s.subs.subscribe,
		UnsubscribeHandler: s.subs.unsubscribe,
		// No logging capability: the server has nothing to log to a client.
		Capabilities: &mcp.ServerCapabilities{},
	}
	channel := s.opts.Channel && !overHTTP
	if channel {
		so.Capabilities.Experimental = map[string]any{ChannelCapability: map[string]any{}}
		so.Instructions += "\n" + fmt.Sprintf(channelInstructions, s.opts.DefaultRecipient)
		so.SupportedProtocolVersions = channelProtocolVersions()
	}
	s.srv = mcp.NewServer(&mcp.Implementation{Name: "vigil", Title: "vigil watch service", Version: s.opts.Version}, so)
	s.srv.AddReceivingMiddleware(argumentErrors, protocolErrors, s.ownInbox)
	s.srv.AddSendingMiddleware(s.subs.onlySubscribed)
	if channel {
		s.srv.AddReceivingMiddleware(s.channelReady)
	}
	s.addTools()
	s.addNote()
	s.addInbox()
	return s
}

// instructions are sent to the client at initialization; many clients
// put them in the model's context.
const instructions = `vigil watches slow things for you — CI on a commit, a deploy, an endpoint, a port, a file, a command, a timer — and tells you the outcome once.
When you would otherwise wait, poll, sleep or re-check: call watch_create, tell the user what you are waiting for, and END YOUR TURN. Do not poll with watch_get or watch_wait.
The outcome lands in your inbox and is shown to you at the start of a later turn (or read it with inbox_read). watch_list shows what you are still waiting for. note_write leaves a note in another recipient's inbox, for another agent session or your own next one.`

// caller is who is calling a tool: the scope of the token and the
// recipient the connection names.
type caller struct {
	scope  vigil.Scope
	scoped bool
	// recipient is the connection's own default (?recipient= on /mcp).
	recipient string
	// baseURL is the daemon's address as the HTTP caller reached it, for
	// a token watch's completion URL.
	baseURL string
	// request is the context of the HTTP request that carried the call
	// (nil but over HTTP): httpapi cancels it when its token is revoked,
	// and the server when the client goes away.
	request context.Context
	// valid, over HTTP with a scoped token, asks httpapi whether the
	// token still authenticates (httpapi.TokenCheck), and every is how
	// often to ask: an inbox subscription, which outlives its request,
	// ends once its token is revoked or expires. Nil for the admin token
	// and over stdio.
	valid func(context.Context) (bool, error)
	every time.Duration
}

// errNoCaller answers an HTTP call that reached the server without the
// token's scope: the handler was served without authentication.
var errNoCaller = &vigil.Error{Code: vigil.CodeUnauthorized, Message: "this MCP endpoint needs a bearer token"}

// callContext returns the context a call acts in and who the caller is.
// Over HTTP the scope comes from the request's token (see NewHandler);
// otherwise it is whatever ctx carries.
func (s *server) callContext(ctx context.Context, extra *mcp.RequestExtra) (context.Context, caller, error) {
	if !s.http {
		sc, ok := vigil.ScopeFrom(ctx)
		return ctx, caller{scope: sc, scoped: ok}, nil
	}
	if extra == nil || extra.TokenInfo == nil {
		return nil, caller{}, errNoCaller
	}
	c, ok := extra.TokenInfo.Extra[callerKey].(caller)
	if !ok {
		return nil, caller{}, errNoCaller
	}
	if c.scoped {
		ctx = vigil.WithScope(ctx, c.scope)
	}
	if c.request != nil {
		ctx = withRequest(ctx, c.request)
	}
	return ctx, c, nil
}

// withRequest returns ctx, which the SDK derives from the session, also
// ended, with its cause, when the HTTP request that carried the call ends.
// The answer goes out on that request's stream only (the handler keeps no
// events to resume a stream from), so once it is gone — the client went
// away, or httpapi cut it because its token was revoked — nobody can read
// the answer, and a wait would go on for nobody, on a revoked token, for
// up to MaxWait. The request ends when the answer is written, which ends
// the returned context too.
func withRequest(ctx, request context.Context) context.Context {
	ctx, cancel := context.WithCancelCause(ctx)
	context.AfterFunc(request, func() { cancel(context.Cause(request)) })
	return ctx
}

// recipientFor resolves the recipient a call acts for: the argument, the
// connection's, the configured default (when the token may act for it),
// or the only recipient of a scoped token.
func (s *server) recipientFor(arg string, c caller) (string, error) {
	switch {
	case arg != "":
		return arg, nil
	case c.recipient != "":
		return c.recipient, nil
	case s.opts.DefaultRecipient != "" && (!c.scoped || c.scope.Allows(s.opts.DefaultRecipient)):
		return s.opts.DefaultRecipient, nil
	case c.scoped && len(c.scope.Recipients) == 1:
		return c.scope.Recipients[0], nil
	}
	return "", vigil.FieldErrorf(vigil.CodeInvalidRequest, "recipient",
		"no recipient: pass recipient (a name for this agent session, like the one its harness hook reads)")
}

// toolError is a refusal as a tool reports it: "code: sentence (argument
// field)". It is returned from a tool handler, so the SDK makes it a
// result with isError set, never a protocol error.
type toolError struct {
	code  vigil.Code
	msg   string
	field string
}

func (e *toolError) Error() string {
	s := string(e.code) + ": " + e.msg
	if e.field != "" {
		s += " (argument " + e.field + ")"
	}
	return s
}

// asToolError maps an error from the service to a tool error. A call cut
// short because its caller went away passes through unchanged.
func (s *server) asToolError(ctx context.Context, tool string, err error) error {
	if err == nil {
		return nil
	}
	if ctx.Err() != nil {
		// The server is closing, or the caller went away: nobody is
		// left to read the answer but the former.
		if cause := context.Cause(ctx); cause != error(errShuttingDown) {
			return err
		}
		err = errShuttingDown
	}
	code := vigil.ErrorCode(err)
	if code == vigil.CodeInternal {
		s.log.ErrorContext(ctx, "tool failed", "tool", tool, "err", err)
	}
	return &toolError{code: code, msg: strings.TrimSuffix(vigil.ErrorMessage(err), "."), field: vigil.ErrorField(err)}
}

// errShuttingDown ends the waits in flight when the server closes.
var errShuttingDown = &vigil.Error{Code: vigil.CodeUnavailable, Message: "vigil is shutting down; call again shortly"}

// closeWaits ends every wait in flight, and any started later at once.
func (s *server) closeWaits() { s.calls.Close(errShuttingDown) }

// argError is a refusal of one argument before the service is called.
func argError(field, format string, args ...any) error {
	return &toolError{code: vigil.CodeInvalidRequest, msg: fmt.Sprintf(format, args...), field: field}
}

// quietHandler passes the SDK's log records on with Info demoted to Debug:
// it logs every session connecting and every notification at Info, which
// is too chatty for a daemon's log.
type quietHandler struct{ slog.Handler }

func demote(l slog.Level) slog.Level {
	if l == slog.LevelInfo {
		return slog.LevelDebug
	}
	return l
}

func (h quietHandler) Enabled(ctx context.Context, l slog.Level) bool {
	return h.Handler.Enabled(ctx, demote(l))
}

func (h quietHandler) Handle(ctx context.Context, r slog.Record) error {
	r.Level = demote(r.Level)
	return h.Handler.Handle(ctx, r)
}

func (h quietHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return quietHandler{h.Handler.WithAttrs(as)}
}

func (h quietHandler) WithGroup(name string) slog.Handler {
	return quietHandler{h.Handler.WithGroup(name)}
}
