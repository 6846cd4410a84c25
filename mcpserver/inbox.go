package mcpserver

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/vigil-run/vigil"
	"github.com/vigil-run/vigil/httpapi"
)

// Bounds of the inbox listeners that wake subscribed clients.
const (
	// resubscribeMin and resubscribeMax bound the backoff before a
	// listener whose event stream ended subscribes again.
	resubscribeMin = time.Second
	resubscribeMax = 30 * time.Second
)

const descInboxResource = `The recipient's unread messages (for the reader "notice", shared with the vigil notice hook), oldest first, as JSON. Reading it marks nothing read; inbox_read does. Subscribe to it to get notifications/resources/updated as soon as a message lands, instead of polling.`

// addInbox registers the inbox resource template.
func (s *server) addInbox() {
	s.srv.AddResourceTemplate(&mcp.ResourceTemplate{
		Name:        "inbox",
		Title:       "vigil inbox",
		URITemplate: InboxURITemplate,
		MIMEType:    "application/json",
		Description: descInboxResource,
	}, s.readInbox)
}

// ownInbox is a receiving middleware that lists the connection's own
// inbox (the recipient its tools act for by default) in resources/list,
// so a client that lists resources, not templates, finds it.
func (s *server) ownInbox(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		res, err := next(ctx, method, req)
		if method != "resources/list" || err != nil {
			return res, err
		}
		list, ok := res.(*mcp.ListResourcesResult)
		if p, _ := req.GetParams().(*mcp.ListResourcesParams); !ok || p != nil && p.Cursor != "" {
			return res, err
		}
		_, c, cerr := s.callContext(ctx, req.GetExtra())
		if cerr != nil {
			return res, err
		}
		r, rerr := s.recipientFor("", c)
		if rerr != nil {
			return res, err
		}
		list.Resources = append([]*mcp.Resource{{URI: InboxURI(r), Name: "inbox", Title: "vigil inbox of " + r,
			MIMEType: "application/json", Description: descInboxResource}}, list.Resources...)
		return res, err
	}
}

// InboxURI returns the URI of recipient's inbox resource. The recipient is
// expanded as InboxURITemplate's {recipient} is (RFC 6570 simple string
// expansion): every byte but the unreserved ones percent-encoded, so that
// a name with ':', '@' or '+' (which recipient names may hold) gives a
// URI the template matches, and that resources/read therefore reaches.
func InboxURI(recipient string) string {
	var b strings.Builder
	b.WriteString(inboxURIPrefix)
	for i := 0; i < len(recipient); i++ {
		c := recipient[i]
		if 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '.' || c == '_' || c == '~' {
			b.WriteByte(c)
			continue
		}
		fmt.Fprintf(&b, "%%%02X", c)
	}
	return b.String()
}

// inboxRecipient returns the recipient of an inbox URI, percent-decoded.
func inboxRecipient(uri string) (string, bool) {
	r, ok := strings.CutPrefix(uri, inboxURIPrefix)
	if !ok || r == "" || strings.ContainsAny(r, "/?#") {
		return "", false
	}
	r, err := url.PathUnescape(r)
	if err != nil || r == "" || strings.ContainsAny(r, "/?#") {
		return "", false
	}
	return r, true
}

// inboxContents is the JSON of the inbox resource.
type inboxContents struct {
	Recipient string    `json:"recipient"`
	Reader    string    `json:"reader"`
	Messages  []Message `json:"messages"`
}

func (s *server) readInbox(ctx context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
	r, ok := inboxRecipient(req.Params.URI)
	if !ok {
		return nil, mcp.ResourceNotFoundError(req.Params.URI)
	}
	ctx, _, err := s.callContext(ctx, req.Extra)
	if err != nil {
		return nil, err
	}
	page, err := s.svc.Messages(ctx, vigil.MessagesRequest{Recipient: r, Reader: DefaultReader, Limit: defaultInboxLimit})
	if err != nil {
		if vigil.ErrorCode(err) == vigil.CodeNotFound || vigil.ErrorCode(err) == vigil.CodeInvalidRequest {
			return nil, mcp.ResourceNotFoundError(req.Params.URI)
		}
		return nil, s.asToolError(ctx, "resources/read", err)
	}
	b, err := json.Marshal(inboxContents{Recipient: r, Reader: DefaultReader, Messages: messagesOut(page.Messages)})
	if err != nil {
		return nil, err
	}
	return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: req.Params.URI, MIMEType: "application/json", Text: string(b)}}}, nil
}

// subscriptions keeps one listener per subscribed inbox: it follows the
// recipient's events on the service and tells the subscribed sessions
// (through Server.ResourceUpdated) when a message lands. A listener's
// authority is its subscribers': every recheck interval it asks whether
// each subscriber's token still authenticates (httpapi.TokenCheck, the
// HTTP API's own path), drops and closes the sessions of those that do
// not, and stops when its last session unsubscribes, ends or loses its
// token. A session hears of an inbox only while it holds a subscription
// here (see onlySubscribed), whatever other sessions follow it.
type subscriptions struct {
	s *server

	mu        sync.Mutex
	listeners map[string]*listener                          // by URI
	sessions  map[*mcp.ServerSession]map[string]*subscriber // the URIs each session subscribes to
	waiting   map[*mcp.ServerSession]struct{}               // sessions with a goroutine waiting for their end
	closed    bool
	wg        sync.WaitGroup

	// ticker returns the ticks of a listener's rechecks and the function
	// that stops them (time.NewTicker; tests inject their own).
	ticker func(every time.Duration) (<-chan time.Time, func())
}

// subscriber is one session's subscription to one inbox, with the
// authority of the token that made it.
type subscriber struct {
	scope  vigil.Scope
	scoped bool
	// valid asks whether the token still authenticates; nil never
	// expires (the admin token, stdio).
	valid func(context.Context) (bool, error)
}

type listener struct {
	cancel   context.CancelFunc
	done     chan struct{} // closed when listen returns
	sessions map[*mcp.ServerSession]*subscriber
}

func newSubscriptions(s *server) *subscriptions {
	return &subscriptions{s: s, listeners: make(map[string]*listener), sessions: make(map[*mcp.ServerSession]map[string]*subscriber),
		waiting: make(map[*mcp.ServerSession]struct{}), ticker: func(every time.Duration) (<-chan time.Time, func()) {
			t := time.NewTicker(every)
			return t.C, t.Stop
		}}
}

// subscribe is the server's SubscribeHandler: it checks the caller may
// read the inbox, then makes sure a listener follows it.
func (m *subscriptions) subscribe(ctx context.Context, req *mcp.SubscribeRequest) error {
	uri := req.Params.URI
	r, ok := inboxRecipient(uri)
	if !ok {
		return mcp.ResourceNotFoundError(uri)
	}
	ctx, c, err := m.s.callContext(ctx, req.Extra)
	if err != nil {
		return err
	}
	// One read checks the name and that the caller may read this inbox;
	// the service answers another recipient's inbox as not found.
	if _, err := m.s.svc.Messages(ctx, vigil.MessagesRequest{Recipient: r, Limit: 1}); err != nil {
		if vigil.ErrorCode(err) == vigil.CodeNotFound || vigil.ErrorCode(err) == vigil.CodeInvalidRequest {
			return mcp.ResourceNotFoundError(uri)
		}
		return m.s.asToolError(ctx, "resources/subscribe", err)
	}
	if req.Session == nil {
		return nil
	}
	sub := &subscriber{scope: c.scope, scoped: c.scoped, valid: c.valid}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return errShuttingDown
	}
	l := m.listeners[uri]
	if l == nil {
		// The listener outlives this request; it acts within the
		// caller's scope, which was just checked, and later within that
		// of a subscriber whose token still authenticates.
		lctx, cancel := context.WithCancel(context.Background())
		// Subscribe before answering, so a message that lands right
		// after the client hears back is not missed.
		events, err := m.s.svc.Subscribe(sub.context(lctx), vigil.EventFilter{Recipient: r})
		if err != nil {
			cancel()
			return m.s.asToolError(ctx, "resources/subscribe", err)
		}
		every := c.every
		if every <= 0 {
			every = httpapi.DefaultRecheck
		}
		l = &listener{cancel: cancel, done: make(chan struct{}), sessions: make(map[*mcp.ServerSession]*subscriber)}
		m.listeners[uri] = l
		ticks, stop := m.ticker(every)
		m.wg.Go(func() {
			defer close(l.done)
			defer stop()
			m.listen(lctx, l, uri, r, events, ticks)
		})
	}
	l.sessions[req.Session] = sub
	if m.sessions[req.Session] == nil {
		m.sessions[req.Session] = make(map[string]*subscriber)
	}
	m.sessions[req.Session][uri] = sub
	if _, ok := m.waiting[req.Session]; !ok {
		m.waiting[req.Session] = struct{}{}
		ss := req.Session
		m.wg.Go(func() {
			_ = ss.Wait()
			m.forget(ss)
		})
	}
	return nil
}

// context returns ctx within the subscriber's scope.
func (sub *subscriber) context(ctx context.Context) context.Context {
	if sub.scoped {
		return vigil.WithScope(ctx, sub.scope)
	}
	return ctx
}

// unsubscribe is the server's UnsubscribeHandler.
func (m *subscriptions) unsubscribe(_ context.Context, req *mcp.UnsubscribeRequest) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.dropLocked(req.Session, req.Params.URI)
	return nil
}

// onlySubscribed is a sending middleware: it lets a resource update reach
// a session only while the session holds a subscription to the resource
// here. The SDK sends one to every session that ever subscribed; one whose
// token was revoked (or whose subscription was dropped for that) has none.
func (m *subscriptions) onlySubscribed(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		if method == "notifications/resources/updated" {
			ss, _ := req.GetSession().(*mcp.ServerSession)
			p, _ := req.GetParams().(*mcp.ResourceUpdatedNotificationParams)
			if ss != nil && p != nil && !m.subscribed(ss, p.URI) {
				return nil, nil
			}
		}
		return next(ctx, method, req)
	}
}

// subscribed reports whether ss holds a subscription to uri.
func (m *subscriptions) subscribed(ss *mcp.ServerSession, uri string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.sessions[ss][uri] != nil
}

// forget drops every subscription of a session that ended.
func (m *subscriptions) forget(ss *mcp.ServerSession) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for uri := range m.sessions[ss] {
		m.dropLocked(ss, uri)
	}
	delete(m.sessions, ss)
	delete(m.waiting, ss)
}

func (m *subscriptions) dropLocked(ss *mcp.ServerSession, uri string) {
	if s := m.sessions[ss]; s != nil {
		delete(s, uri)
	}
	l := m.listeners[uri]
	if l == nil {
		return
	}
	delete(l.sessions, ss)
	if len(l.sessions) == 0 {
		l.cancel()
		delete(m.listeners, uri)
	}
}

// recheck asks whether the token of each subscriber of l still
// authenticates, outside the lock, and drops the subscriptions of those
// that do not, closing their sessions: every later request of theirs
// would be refused before it reached the session. A token the store
// cannot answer for keeps its subscription until the next check. It
// reports whether any subscriber is left.
func (m *subscriptions) recheck(ctx context.Context, l *listener, uri string) bool {
	m.mu.Lock()
	subs := make(map[*mcp.ServerSession]*subscriber, len(l.sessions))
	for ss, sub := range l.sessions {
		subs[ss] = sub
	}
	m.mu.Unlock()
	var gone []*mcp.ServerSession
	for ss, sub := range subs {
		if sub.valid == nil {
			continue
		}
		if ok, err := sub.valid(ctx); err == nil && !ok {
			gone = append(gone, ss)
		} else if err != nil {
			m.s.log.WarnContext(ctx, "token of an inbox subscription not re-checked", "uri", uri, "err", err)
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, ss := range gone {
		// Only the subscription that was checked: the session may have
		// subscribed again since, with the same token or another.
		if l.sessions[ss] == subs[ss] {
			m.dropLocked(ss, uri)
			if !m.closed {
				m.wg.Go(func() { _ = ss.Close() })
			}
		}
	}
	return len(l.sessions) > 0 && m.listeners[uri] == l
}

// subscriberContext returns ctx within the scope of one of l's
// subscribers, for subscribing to the service again.
func (m *subscriptions) subscriberContext(ctx context.Context, l *listener) (context.Context, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, sub := range l.sessions {
		return sub.context(ctx), true
	}
	return ctx, false
}

// closeAll stops every listener. Its goroutines, and those waiting for
// sessions to end, are waited for by wait.
func (m *subscriptions) closeAll() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.closed = true
	for uri, l := range m.listeners {
		l.cancel()
		delete(m.listeners, uri)
	}
}

// wait waits for the listeners and the session waiters to return: call it
// after closeAll, once the sessions have ended.
func (m *subscriptions) wait() { m.wg.Wait() }

// listen follows a recipient's events until ctx ends, telling subscribers
// of uri when a message lands, and re-checks its subscribers' tokens at
// each tick, ending once none is left. An event stream that ends (the
// daemon restarted) is subscribed again with backoff, within the scope of
// a subscriber still there; subscribers are then told once, since a
// message may have landed in between.
func (m *subscriptions) listen(ctx context.Context, l *listener, uri, recipient string, events <-chan vigil.Event, ticks <-chan time.Time) {
	defer l.cancel()
	wait := resubscribeMin
	for {
	follow:
		for {
			select {
			case <-ctx.Done():
				return
			case <-ticks:
				if !m.recheck(ctx, l, uri) {
					return
				}
			case ev, ok := <-events:
				if !ok {
					break follow
				}
				if ev.Type == vigil.EventMessage {
					m.updated(ctx, uri)
				}
			}
		}
		for {
			if !m.backoff(ctx, l, uri, wait, ticks) {
				return
			}
			sctx, ok := m.subscriberContext(ctx, l)
			if !ok {
				return
			}
			var err error
			if events, err = m.s.svc.Subscribe(sctx, vigil.EventFilter{Recipient: recipient}); err == nil {
				wait = resubscribeMin
				m.updated(ctx, uri)
				break
			}
			m.s.log.WarnContext(ctx, "inbox events unavailable; subscribing again", "recipient", recipient, "retry_in", wait, "err", err)
			wait = min(2*wait, resubscribeMax)
		}
	}
}

// backoff waits wait before subscribing again, re-checking the
// subscribers at each tick meanwhile; it reports false once ctx ends or no
// subscriber is left.
func (m *subscriptions) backoff(ctx context.Context, l *listener, uri string, wait time.Duration, ticks <-chan time.Time) bool {
	t := time.NewTimer(wait)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return false
		case <-ticks:
			if !m.recheck(ctx, l, uri) {
				return false
			}
		case <-t.C:
			return true
		}
	}
}

func (m *subscriptions) updated(ctx context.Context, uri string) {
	if err := m.s.srv.ResourceUpdated(ctx, &mcp.ResourceUpdatedNotificationParams{URI: uri}); err != nil && ctx.Err() == nil {
		m.s.log.DebugContext(ctx, "resource update not sent", "uri", uri, "err", err)
	}
}
