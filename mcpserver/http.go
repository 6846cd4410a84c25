package mcpserver

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"log/slog"
	"mime"
	"net/http"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/vigil-run/vigil"
	"github.com/vigil-run/vigil/httpapi"
)

// callerKey is where the caller is kept in the SDK's TokenInfo.Extra.
const callerKey = "vigil.caller"

// sessionIdle is how long an HTTP session may go without a request before
// it is closed, so that clients that vanish without ending their session
// do not hold memory for ever. A client that comes back after that starts
// a new session, as the protocol has it do on 404.
const sessionIdle = 24 * time.Hour

// Handler serves the MCP server over streamable HTTP. Mount it behind
// bearer authentication that puts the caller's vigil.Scope in the request
// context, as httpapi.Server.Mount does: each call then acts within the
// scope of its own request's token, and a session stays bound to the
// token that opened it. A token keeps at most MaxSessionsPerToken
// sessions, and those of a token revoked, expired or deleted are closed
// within the recheck interval, idle or not (see sessions).
//
// The SDK runs tool handlers on the session's context, not the HTTP
// request's, so the scope crosses over as the SDK's auth.TokenInfo, and
// with it the request's context: a call ends when the request that
// carried it does (its token revoked, its client gone).
type Handler struct {
	s    *server
	h    http.Handler
	sess *sessions
}

// NewHandler returns a streamable HTTP handler serving the tools and the
// inbox resource over svc. A request may name the connection's default
// recipient with ?recipient=NAME on the URL.
func NewHandler(svc vigil.Service, opts *Options) *Handler {
	s := newServer(svc, opts, true)
	sess := newSessions()
	s.srv.AddReceivingMiddleware(sess.track)
	sh := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s.srv }, &mcp.StreamableHTTPOptions{
		Logger:         slog.New(quietHandler{s.log.Handler()}),
		SessionTimeout: sessionIdle,
		// httpapi.Server.Mount guards the Host and Origin of every
		// request against DNS rebinding, with the operator's
		// allowed_hosts (a TLS proxy in front of a loopback listener
		// forwards its own Host); the SDK's own check knows no such list.
		DisableLocalhostProtection: true,
	})
	verify := func(ctx context.Context, token string, r *http.Request) (*auth.TokenInfo, error) {
		c := caller{recipient: r.URL.Query().Get("recipient"), baseURL: "http://" + r.Host, request: ctx}
		if r.TLS != nil {
			c.baseURL = "https://" + r.Host
		}
		c.scope, c.scoped = vigil.ScopeFrom(ctx)
		c.valid, c.every, _ = httpapi.TokenCheck(ctx)
		// The SDK refuses a session's requests from another user: the
		// user is the token (hashed; it is never kept).
		sum := sha256.Sum256([]byte(token))
		return &auth.TokenInfo{UserID: hex.EncodeToString(sum[:16]), Extra: map[string]any{callerKey: c}}, nil
	}
	h := auth.RequireBearerToken(verify, &auth.RequireBearerTokenOptions{AllowMissingExpiration: true})(sh)
	return &Handler{s: s, h: h, sess: sess}
}

// ServeHTTP implements http.Handler.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if id := r.Header.Get(sessionHeader); id != "" {
		h.sess.begin(id)
		defer h.sess.end(id)
	}
	h.h.ServeHTTP(&retryWriter{ResponseWriter: w}, r)
	// A request cut because its token was revoked (httpapi's recheck; a
	// request that ends otherwise is not cancelled yet) ends its session:
	// every later request of the token is refused before it reaches the
	// session, which would otherwise keep its inbox listeners, following
	// a recipient for a token that may no longer read it, until it has
	// idled sessionIdle.
	if id := r.Header.Get(sessionHeader); id != "" && vigil.ErrorCode(context.Cause(r.Context())) == vigil.CodeUnauthorized {
		for ss := range h.s.srv.Sessions() {
			if ss.ID() == id {
				_ = ss.Close()
			}
		}
	}
}

// sessionHeader carries the session of a streamable HTTP request.
const sessionHeader = "Mcp-Session-Id"

// streamRetry is how long a client that loses an event stream should wait
// before coming back, sent as the stream's "retry:" field.
const streamRetry = 2 * time.Second

// retryWriter opens every event stream the SDK answers with a "retry:"
// field, which the SDK does not send: a client that loses the stream then
// knows how soon to come back. The field dispatches no event, so what the
// SDK writes after it reads as before.
type retryWriter struct {
	http.ResponseWriter
	started bool
}

func (w *retryWriter) WriteHeader(code int) {
	if w.started {
		w.ResponseWriter.WriteHeader(code)
		return
	}
	w.started = true
	w.ResponseWriter.WriteHeader(code)
	if mt, _, _ := mime.ParseMediaType(w.Header().Get("Content-Type")); code == http.StatusOK && mt == "text/event-stream" {
		_, _ = fmt.Fprintf(w.ResponseWriter, "retry: %d\n\n", streamRetry.Milliseconds())
	}
}

func (w *retryWriter) Write(b []byte) (int, error) {
	if !w.started {
		w.WriteHeader(http.StatusOK)
	}
	return w.ResponseWriter.Write(b)
}

// Flush implements http.Flusher, which the SDK's streams use.
func (w *retryWriter) Flush() {
	if !w.started {
		w.WriteHeader(http.StatusOK)
	}
	_ = http.NewResponseController(w.ResponseWriter).Flush()
}

// Unwrap lets http.ResponseController reach the writer underneath.
func (w *retryWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// Server returns the MCP server the handler serves.
func (h *Handler) Server() *mcp.Server { return h.s.srv }

// Close ends the waits in flight, stops the inbox listeners and closes
// every session, so that an http.Server shutting down is not held up by
// an MCP stream; it returns when their goroutines have. Call it from
// http.Server.RegisterOnShutdown.
func (h *Handler) Close() {
	h.s.closeWaits()
	h.s.subs.closeAll()
	h.sess.closeAll()
	var wg sync.WaitGroup
	for ss := range h.s.srv.Sessions() {
		wg.Go(func() { _ = ss.Close() })
	}
	wg.Wait()
	h.s.subs.wait()
	h.sess.wait()
}
