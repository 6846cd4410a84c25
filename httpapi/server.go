// Package httpapi serves vigil.Service over HTTP: the JSON API under /v1,
// the Server-Sent Events stream at /v1/events, /healthz, /readyz and the
// OpenAPI document at /openapi.json.
//
// Handlers return errors; one function writes them, with one JSON shape
// ({"error":{"code","message","field"}}) and one code-to-status table
// (StatusOf). Every route but /healthz, /readyz and /openapi.json needs a
// bearer token. Long-polls and event streams end when their request ends
// or when Close is called, so a server that calls Close from
// http.Server.RegisterOnShutdown shuts down promptly.
package httpapi

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"runtime/debug"
	"strings"
	"time"

	"github.com/vigil-run/vigil"
	"github.com/vigil-run/vigil/internal/longcall"
	"github.com/vigil-run/vigil/internal/wire"
)

// Defaults of Options; each lives here only.
const (
	// DefaultMaxBodyBytes bounds a request body.
	DefaultMaxBodyBytes = wire.DefaultMaxBodyBytes
	// DefaultHeartbeat is how often an idle event stream sends a comment.
	DefaultHeartbeat = wire.DefaultHeartbeat
)

// Header names of the API.
const (
	HeaderIdempotencyKey   = wire.HeaderIdempotencyKey
	HeaderReplayed         = wire.HeaderReplayed
	HeaderChainDepth       = wire.HeaderChainDepth
	HeaderWaitClamped      = wire.HeaderWaitClamped
	HeaderRequestID        = wire.HeaderRequestID
	contentTypeJSON        = "application/json"
	contentTypeEventStream = "text/event-stream"
)

// Options configure a Server. Zero fields take defaults.
type Options struct {
	// Service is what the API serves. Required.
	Service vigil.Service
	// AdminToken is the admin's bearer token, compared in constant time.
	// A request bearing it acts with no scope (the admin).
	AdminToken string
	// AuthenticateFunc checks any other bearer token: ok reports whether the
	// token is valid, and the request then acts within scope. An error
	// (a store that cannot be read) is answered as such, never as 401.
	// Nil means only AdminToken is accepted; with neither set every
	// authenticated route answers 401.
	AuthenticateFunc func(ctx context.Context, token string) (scope vigil.Scope, ok bool, err error)
	// Logger receives internal errors (once, with the request id) and, at
	// debug level, one line per request. Nil discards.
	Logger *slog.Logger
	// MaxBodyBytes bounds request bodies (default DefaultMaxBodyBytes).
	MaxBodyBytes int64
	// MaxWait bounds long-polls: a longer timeout or wait is clamped and
	// the response says so in the Vigil-Wait-Clamped header (default
	// vigil.DefaultLimits().MaxWait).
	MaxWait time.Duration
	// ReadyFunc answers /readyz; nil means always ready.
	ReadyFunc func(ctx context.Context) error
	// Heartbeat is how often an event stream sends a comment line to keep
	// proxies from closing it (default DefaultHeartbeat). A client that
	// takes nothing of what the stream sends for two heartbeats (its
	// connection's buffers full) is dropped.
	Heartbeat time.Duration
	// LastSeqFunc returns the seq of the newest message of every mailbox
	// (vigil.Store.MessagesLastSeq). When set, an event stream opened
	// without Last-Event-ID starts after the seq it returns and sends it
	// as the id of its opening, so that a client that loses the stream
	// before any message reconnects from there and misses none. Nil
	// starts such a stream at the service's newest message, with no id.
	LastSeqFunc func(ctx context.Context) (int64, error)
	// Tokens serves /v1/tokens to the admin; nil answers not_found.
	Tokens vigil.TokenService
	// RegisterRate and RegisterBurst bound each scoped token's
	// registrations (a token bucket; defaults DefaultRegisterRate and
	// DefaultRegisterBurst); a negative RegisterRate disables the limit.
	// Past it, POST /v1/watches answers 429 rate_limited with Retry-After.
	RegisterRate  float64
	RegisterBurst int
	// RateTakeFunc, when set, holds the buckets of that limit: it takes
	// n registrations from bucket key (refilling at rate a second up to
	// burst) at now, or none and says how long until n are there. The
	// daemon on PostgreSQL keeps them in the database, so that the limit
	// holds across replicas; nil keeps them in this process's memory.
	RateTakeFunc func(ctx context.Context, key string, rate float64, burst, n int, now time.Time) (ok bool, retry time.Duration, err error)
	// Recheck is how often a running request (an event stream, a
	// long-poll, an MCP session) re-checks its scoped token through
	// AuthenticateFunc, and ends once it no longer authenticates (default
	// DefaultRecheck).
	Recheck time.Duration
	// MaxLongCalls bounds the long-lived requests each scoped token may
	// have open at once: event streams (the panel's too), long-polls
	// (GET /v1/watches/{id}/wait, messages with wait) and what is mounted
	// Bounded (MCP requests). Past it, 429 rate_limited with Retry-After.
	// The admin is not bounded. Default DefaultMaxLongCalls; negative
	// means no bound.
	MaxLongCalls int
	// ListenAddr is the address the server listens on (host:port). A
	// request's Host header may name its host, besides localhost,
	// 127.0.0.1 and [::1]; when it is every interface ("0.0.0.0:7474",
	// ":7474"), a Host may name any IP address.
	ListenAddr string
	// AllowedHosts are more host names a request's Host header may name
	// (the operator's allowed_hosts: the daemon's DNS name, a reverse
	// proxy's); an Origin on one of them is trusted too. Any other Host
	// is refused, 403 forbidden, on every route, against DNS rebinding.
	AllowedHosts []string
	// ObserveFunc, when set, hears of each request once it is answered:
	// its route pattern ("POST /v1/watches"; "" for no route), status and
	// duration. For metrics; it must be cheap.
	ObserveFunc func(pattern string, status int, took time.Duration)
	// UnsubscribeFunc serves the one-click unsubscribe links of delivery
	// mails (GET and POST /v1/unsubscribe/{id}/{sig}, no bearer token): it
	// checks that sig is the daemon's signature of watch id (a not_found
	// error when it is not) and, when apply is set, turns email off for
	// that watch. Nil answers not_found.
	UnsubscribeFunc func(ctx context.Context, id, sig string, apply bool) error
}

// Server serves the API. Create it with New.
type Server struct {
	svc       vigil.Service
	adminHash [sha256.Size]byte
	hasAdmin  bool
	auth      func(ctx context.Context, token string) (vigil.Scope, bool, error)
	log       *slog.Logger
	maxBody   int64
	maxWait   time.Duration
	observe   func(pattern string, status int, took time.Duration)
	ready     func(ctx context.Context) error
	heartbeat time.Duration
	lastSeq   func(ctx context.Context) (int64, error)
	tokens    vigil.TokenService
	unsub     func(ctx context.Context, id, sig string, apply bool) error
	limits    *limiter
	hosts     hosts
	// recheckEvery is how often a running scoped request re-checks its
	// token (DefaultRecheck).
	recheckEvery time.Duration
	mux          *http.ServeMux
	routes       []route

	calls longcall.Set // the long calls in flight
	long  longLimit    // each scoped token's long-lived requests in flight
}

// route is one built-in endpoint: its ServeMux pattern, whether it needs a
// token, the query parameters it accepts, and its handler. The OpenAPI test
// checks this table against openapi.json.
type route struct {
	pattern string
	public  bool
	// form: the route reads its own (form) body, not a JSON one.
	form    bool
	query   []string
	handler handlerFunc
}

// handlerFunc is an HTTP handler that returns its error for Server.fail.
type handlerFunc func(w http.ResponseWriter, r *http.Request) error

// New returns a Server for opts.
func New(opts Options) *Server {
	s := &Server{
		svc:       opts.Service,
		auth:      opts.AuthenticateFunc,
		log:       opts.Logger,
		maxBody:   opts.MaxBodyBytes,
		maxWait:   opts.MaxWait,
		observe:   opts.ObserveFunc,
		ready:     opts.ReadyFunc,
		heartbeat: opts.Heartbeat,
		lastSeq:   opts.LastSeqFunc,
		tokens:    opts.Tokens,
		unsub:     opts.UnsubscribeFunc,
		hosts:     newHosts(opts.ListenAddr, opts.AllowedHosts),
		mux:       http.NewServeMux(),
	}
	if opts.AdminToken != "" {
		s.adminHash, s.hasAdmin = sha256.Sum256([]byte(opts.AdminToken)), true
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	s.log = s.log.With("component", "httpapi")
	if s.maxBody <= 0 {
		s.maxBody = DefaultMaxBodyBytes
	}
	if s.maxWait <= 0 {
		s.maxWait = vigil.DefaultLimits().MaxWait
	}
	if s.heartbeat <= 0 {
		s.heartbeat = DefaultHeartbeat
	}
	if opts.RegisterRate == 0 {
		opts.RegisterRate = DefaultRegisterRate
	}
	if opts.RegisterBurst <= 0 {
		opts.RegisterBurst = DefaultRegisterBurst
	}
	s.limits = newLimiter(opts.RegisterRate, opts.RegisterBurst)
	s.limits.take = opts.RateTakeFunc
	s.recheckEvery = opts.Recheck
	s.long.max = opts.MaxLongCalls
	if s.long.max == 0 {
		s.long.max = DefaultMaxLongCalls
	}
	if s.recheckEvery <= 0 {
		s.recheckEvery = DefaultRecheck
	}
	s.routes = s.table()
	for _, rt := range s.routes {
		s.mux.Handle(rt.pattern, s.wrap(rt))
	}
	return s
}

// table lists the built-in routes.
func (s *Server) table() []route {
	return []route{
		{pattern: "POST /v1/watches", query: []string{"observe"}, handler: s.register},
		{pattern: "POST /v1/watches/batch", handler: s.registerBatch},
		{pattern: "GET /v1/watches", query: []string{"recipient", "state", "kind", "label", "text", "after", "limit"}, handler: s.list},
		{pattern: "GET /v1/watches/{id}", handler: s.get},
		{pattern: "GET /v1/watches/{id}/why", handler: s.why},
		{pattern: "GET /v1/watches/{id}/wait", query: []string{"timeout"}, handler: s.wait},
		{pattern: "POST /v1/watches/{id}/cancel", handler: s.cancel},
		{pattern: "POST /v1/watches/{id}/check", handler: s.check},
		{pattern: "DELETE /v1/watches/{id}", handler: s.delete},
		{pattern: "GET /v1/recipients/{recipient}/messages", query: []string{"reader", "after", "wait", "ack", "limit"}, handler: s.messages},
		{pattern: "POST /v1/recipients/{recipient}/ack", handler: s.ack},
		{pattern: "POST /v1/recipients/{recipient}/close", handler: s.closeRecipient},
		{pattern: "POST /v1/recipients/{recipient}/notes", handler: s.note},
		{pattern: "GET /v1/events", query: []string{"recipient", "watch"}, handler: s.events},
		{pattern: "POST /v1/tokens", handler: s.createToken},
		{pattern: "GET /v1/tokens", query: []string{"all"}, handler: s.listTokens},
		{pattern: "POST /v1/tokens/{id}/revoke", handler: s.revokeToken},
		{pattern: "POST /v1/complete/{token}", public: true, handler: s.complete},
		{pattern: "GET /v1/unsubscribe/{id}/{sig}", public: true, handler: s.unsubscribe},
		{pattern: "POST /v1/unsubscribe/{id}/{sig}", public: true, form: true, handler: s.unsubscribe},
		{pattern: "GET /healthz", public: true, handler: s.healthz},
		{pattern: "GET /readyz", public: true, handler: s.readyz},
		{pattern: "GET /openapi.json", public: true, handler: s.openapi},
	}
}

// repeatable reports whether a query parameter may be given more than once.
func repeatable(name string) bool { return name == "label" }

// Handler returns the http.Handler serving every route, built-in and
// mounted.
func (s *Server) Handler() http.Handler { return http.HandlerFunc(s.serveHTTP) }

// Mount serves h at pattern (a ServeMux pattern such as "/mcp") behind the
// same bearer authentication as the API, with the caller's scope in the
// request context, refusing a request from another origin whatever its
// method. Call it before serving; like ServeMux.Handle it panics on a
// pattern that conflicts with one already registered.
func (s *Server) Mount(pattern string, h http.Handler) {
	s.mux.Handle(pattern, s.sameOrigin(s.authenticate(h)))
}

// MountPublic serves h at pattern with no authentication: for /metrics.
// Call it before serving.
func (s *Server) MountPublic(pattern string, h http.Handler) {
	s.mux.Handle(pattern, h)
}

// Close ends every open long-poll and event stream, and any started later
// ends at once. Call it when the HTTP server shuts down, for example
// through http.Server.RegisterOnShutdown(s.Close), so that Shutdown need not
// wait for streams that never end by themselves.
func (s *Server) Close() { s.calls.Close(errShuttingDown) }

// LongCalls is how many long-polls and event streams are open.
func (s *Server) LongCalls() int { return s.calls.Len() }

var errShuttingDown = &vigil.Error{Code: vigil.CodeUnavailable, Message: "vigil is shutting down; try again shortly"}

// serveHTTP is the outermost handler: request id, panic recovery, one
// debug line per request, and JSON answers for unknown routes.
func (s *Server) serveHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	id := requestID(r)
	rw := &responseWriter{ResponseWriter: w}
	rw.Header().Set(HeaderRequestID, id)
	r = r.WithContext(context.WithValue(r.Context(), requestIDKey{}, id))
	defer func() {
		if p := recover(); p != nil {
			if p == http.ErrAbortHandler {
				panic(p)
			}
			s.fail(rw, r, fmt.Errorf("panic: %v\n%s", p, debug.Stack()))
		}
		// Only the path: query values are filters, and headers (which
		// carry the token) are never logged.
		took := time.Since(start)
		s.log.DebugContext(r.Context(), "request", "request_id", id, "method", r.Method,
			"path", logPath(r), "pattern", r.Pattern, "status", rw.status, "duration", took)
		if s.observe != nil {
			status := rw.status
			if status == 0 {
				status = http.StatusOK
			}
			s.observe(r.Pattern, status, took)
		}
	}()
	// Against DNS rebinding: a foreign Host on any route, a foreign
	// Origin on any request that changes something.
	if err := s.checkHost(r); err != nil {
		s.fail(rw, r, err)
		return
	}
	if !safeMethod(r.Method) {
		if err := s.checkOrigin(r); err != nil {
			s.fail(rw, r, err)
			return
		}
	}
	h, pattern := s.mux.Handler(r)
	if pattern == "" {
		s.fail(rw, r, s.noRoute(rw, h, r))
		return
	}
	s.mux.ServeHTTP(rw, r)
}

// noRoute turns ServeMux's plain-text 404 into not_found, and its 405
// into method_not_allowed with the Allow header it computed.
func (s *Server) noRoute(w http.ResponseWriter, h http.Handler, r *http.Request) error {
	probe := &statusRecorder{header: make(http.Header)}
	h.ServeHTTP(probe, r)
	if allow := probe.header.Get("Allow"); probe.status == http.StatusMethodNotAllowed && allow != "" {
		w.Header().Set("Allow", allow)
		return vigil.Errorf(vigil.CodeMethodNotAllowed, "%s is not served at %s; it answers %s",
			clip(r.Method), r.URL.Path, allow)
	}
	return vigil.Errorf(vigil.CodeNotFound, "no such route: %s %s", clip(r.Method), r.URL.Path)
}

// wrap turns a route into an http.Handler: authentication, query and body
// checks, then the handler; any error goes to fail.
func (s *Server) wrap(rt route) http.Handler {
	allowed := make(map[string]bool, len(rt.query))
	for _, q := range rt.query {
		allowed[q] = true
	}
	h := http.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		err := checkQuery(r, allowed)
		if err == nil && !rt.form {
			err = s.checkBody(w, r)
		}
		if err == nil {
			err = rt.handler(w, r)
		}
		if err != nil {
			s.fail(w, r, err)
		}
	}))
	if !rt.public {
		h = s.authenticate(h)
	}
	return h
}

// errUnauthorized is the one answer to a missing or wrong token: it says
// nothing about which it was.
var errUnauthorized = &vigil.Error{Code: vigil.CodeUnauthorized, Message: "a valid bearer token is required"}

// authenticate checks the bearer token and puts the caller's scope in the
// request context (no scope for the admin).
func (s *Server) authenticate(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		token, ok := bearer(r.Header.Get("Authorization"))
		if !ok {
			w.Header().Set("WWW-Authenticate", `Bearer realm="vigil"`)
			s.fail(w, r, errUnauthorized)
			return
		}
		if s.hasAdmin {
			sum := sha256.Sum256([]byte(token))
			if subtle.ConstantTimeCompare(sum[:], s.adminHash[:]) == 1 {
				next.ServeHTTP(w, r)
				return
			}
		}
		if s.auth != nil {
			scope, ok, err := s.auth(r.Context(), token)
			if err != nil && vigil.ErrorCode(err) != vigil.CodeUnauthorized {
				s.fail(w, r, err)
				return
			}
			if err == nil && ok {
				// A token revoked while the request runs (a stream, a
				// long-poll) ends it within recheckEvery.
				ctx, stop := s.recheck(s.withTokenCheck(vigil.WithScope(r.Context(), scope), token), token)
				defer stop()
				next.ServeHTTP(w, r.WithContext(ctx))
				return
			}
		}
		w.Header().Set("WWW-Authenticate", `Bearer realm="vigil", error="invalid_token"`)
		s.fail(w, r, errUnauthorized)
	})
}

// bearer returns the token of an "Authorization: Bearer <token>" header.
func bearer(h string) (string, bool) {
	scheme, token, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	token = strings.TrimSpace(token)
	return token, token != ""
}

type requestIDKey struct{}

// requestID returns the caller's X-Request-Id when it is short and plain,
// else a new random one.
func requestID(r *http.Request) string {
	if id := r.Header.Get(HeaderRequestID); id != "" && len(id) <= 64 && plain(id) {
		return id
	}
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

func plain(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.') {
			return false
		}
	}
	return true
}

// requestIDFrom returns the request id serveHTTP put in ctx.
func requestIDFrom(ctx context.Context) string {
	id, _ := ctx.Value(requestIDKey{}).(string)
	return id
}

// responseWriter records the status and whether the header went out.
type responseWriter struct {
	http.ResponseWriter
	status int
}

func (w *responseWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *responseWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach Flush and SetWriteDeadline.
func (w *responseWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// Flush implements http.Flusher for mounted handlers that stream and
// assert the interface rather than use http.ResponseController.
func (w *responseWriter) Flush() {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	_ = http.NewResponseController(w.ResponseWriter).Flush()
}

// started reports whether w's header has been written.
func started(w http.ResponseWriter) bool {
	for {
		switch x := w.(type) {
		case *responseWriter:
			return x.status != 0
		case interface{ Unwrap() http.ResponseWriter }:
			w = x.Unwrap()
		default:
			return false
		}
	}
}

// statusRecorder captures what ServeMux's fallback handlers would answer.
type statusRecorder struct {
	header http.Header
	status int
}

func (r *statusRecorder) Header() http.Header         { return r.header }
func (r *statusRecorder) Write(b []byte) (int, error) { return len(b), nil }
func (r *statusRecorder) WriteHeader(code int)        { r.status = code }

// interrupted maps the error of a call that Close cut short to
// errShuttingDown, so the caller hears 503 unavailable rather than an
// internal error, and one that its token's revocation cut short to
// errRevoked (401).
func interrupted(ctx context.Context, err error) error {
	if err == nil || ctx.Err() == nil {
		return err
	}
	// Close, or the token's revocation (see recheck), cut the call short.
	if c := context.Cause(ctx); c == error(errShuttingDown) || c == error(errRevoked) {
		var e *vigil.Error
		if !errors.As(err, &e) {
			return c
		}
	}
	return err
}
