// Package web is vigil's web panel, served by the daemon at /: a person
// signs in with a token (the admin's or a scoped one) and sees what every
// agent is waiting on, why it has not settled, and steers it (check now,
// cancel, delete), live from the event stream.
//
// Everything is embedded in the binary: html/template pages, one
// stylesheet and one plain script, no CDN and no build step. A token is
// exchanged once for a session cookie (HttpOnly, SameSite=Strict, a random
// id naming a session kept in memory); the token never reaches a URL, a
// page, a log line or the browser's storage. A scoped session sees exactly
// what its token's API calls see. Every state-changing request carries the
// session's CSRF token besides passing the daemon's Origin check; every
// page is served with a strict Content-Security-Policy (no inline script,
// no inline style) that also forbids framing.
package web

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"embed"
	"encoding/hex"
	"html/template"
	"io/fs"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/vigil-run/vigil"
	"github.com/vigil-run/vigil/engine"
	"github.com/vigil-run/vigil/httpapi"
	"github.com/vigil-run/vigil/watcher"
)

//go:embed templates/*.html
var templateFS embed.FS

//go:embed static
var staticFS embed.FS

// Defaults of Options.
const (
	// DefaultSessionTTL is how long a session lasts without use.
	DefaultSessionTTL = 12 * time.Hour
	// maxSessions bounds the sessions kept; the least recently used goes.
	maxSessions = 10000
	// maxSessionsPerToken bounds the sessions of one token (the admin's
	// too): past it, that token's least recently used goes, so that one
	// token signing in again and again cannot push out others' sessions.
	maxSessionsPerToken = 16
	// CookieName is the session cookie's name.
	CookieName = "vigil_session"
	// csrfField is the form field, and csrfHeader the header, carrying a
	// session's CSRF token.
	csrfField  = "csrf"
	csrfHeader = "X-Vigil-CSRF"
	// pageSize is how many watches a list page shows.
	pageSize = 50
)

// CSP is the Content-Security-Policy of every panel response: scripts,
// styles and connections from the panel itself only, no inline script or
// style, no plugins, no framing, forms posting only to the panel.
const CSP = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; " +
	"form-action 'self'; base-uri 'none'; frame-ancestors 'none'"

// Status is the daemon's own state, for the admin's status page.
type Status struct {
	Version string
	Started time.Time
	Store   string
	// Probes and ProbesPerSecond: probes made since the start, and the
	// rate over the uptime.
	Probes          int64
	ProbesPerSecond float64
	// Lateness holds percentiles of how late probes started (p50, p90,
	// p99), from the daemon's metrics.
	Lateness []Percentile
}

// Percentile is one lateness figure.
type Percentile struct {
	Name  string
	Value time.Duration
}

// Options configure a Panel. Service is required.
type Options struct {
	Service vigil.Service
	// AdminToken signs the admin in (no scope).
	AdminToken string
	// AuthenticateFunc checks any other token, as httpapi.Options'.
	AuthenticateFunc func(ctx context.Context, token string) (vigil.Scope, bool, error)
	// Watchers are the daemon's watchers: the kinds the filter offers, and
	// which kinds a Check now button suits (not a timer's).
	Watchers *watcher.Registry
	// Tokens serves the admin's token pages; nil hides them.
	Tokens vigil.TokenService
	// Events serves the event stream to a caller whose scope is in the
	// request context (httpapi.Server.EventStream).
	Events http.Handler
	// Probes returns a watch's recent probes within the caller's scope.
	Probes func(ctx context.Context, id string) ([]engine.Probe, error)
	// WatchMessages returns a watch's newest mailbox messages, oldest
	// first, within the caller's scope (engine.Engine.WatchMessages), for
	// its page; nil lists none.
	WatchMessages func(ctx context.Context, id string) ([]*vigil.Message, error)
	// LastSeqFunc returns the seq of the newest message of every mailbox
	// (vigil.Store.MessagesLastSeq): a page's event stream resumes after
	// the one read before the page was built. nil: the stream starts
	// live when the page's script connects.
	LastSeqFunc func(ctx context.Context) (int64, error)
	// Counts returns how many watches the caller may see are in each state.
	Counts func(ctx context.Context) (map[vigil.State]int, error)
	// StatusFunc returns the daemon's status for the admin page.
	StatusFunc func(ctx context.Context) Status
	// Recheck is how often a scoped session re-checks its token: a revoked
	// one ends the session within this long (default httpapi.DefaultRecheck).
	Recheck time.Duration
	// SessionTTL is how long an unused session lasts (DefaultSessionTTL).
	SessionTTL time.Duration
	// NowFunc is the clock; nil means time.Now.
	NowFunc func() time.Time
	Logger  *slog.Logger
}

// Panel serves the web panel. Create it with New.
type Panel struct {
	opts      Options
	adminHash [sha256.Size]byte
	hasAdmin  bool
	now       func() time.Time
	log       *slog.Logger
	tmpl      map[string]*template.Template
	mux       *http.ServeMux

	mu       sync.Mutex
	sessions map[string]*session
	byToken  map[string]map[*session]struct{} // each token's sessions
}

// session is one signed-in browser. The token is kept to re-check it; it
// is never sent back.
type session struct {
	id      string
	token   string
	admin   bool
	scope   vigil.Scope
	csrf    string
	checked time.Time // when the token was last found valid
	used    time.Time
	// reader is the reader name the inbox marks read as.
	reader string
	// follow are the recipients whose unread messages the admin's badge
	// counts: those whose inbox the admin opened.
	follow []string
	// after is, on the copy a page request works on, the newest message
	// seq read before the page was built ("" unknown): where its event
	// stream starts.
	after string
	// ended is done once the session ends (signed out, expired,
	// evicted, its token revoked): its event streams end with it.
	ended context.Context
	end   context.CancelFunc
}

// New returns a panel for opts.
func New(opts Options) *Panel {
	p := &Panel{opts: opts, now: opts.NowFunc, log: opts.Logger, mux: http.NewServeMux(), sessions: map[string]*session{}, byToken: map[string]map[*session]struct{}{}}
	if p.now == nil {
		p.now = time.Now
	}
	if p.log == nil {
		p.log = slog.New(slog.DiscardHandler)
	}
	p.log = p.log.With("component", "web")
	if p.opts.Recheck <= 0 {
		p.opts.Recheck = httpapi.DefaultRecheck
	}
	if p.opts.SessionTTL <= 0 {
		p.opts.SessionTTL = DefaultSessionTTL
	}
	if opts.AdminToken != "" {
		p.adminHash, p.hasAdmin = sha256.Sum256([]byte(opts.AdminToken)), true
	}
	p.tmpl = parseTemplates()
	static, _ := fs.Sub(staticFS, "static")
	p.mux.Handle("GET /ui/static/", http.StripPrefix("/ui/static/", http.FileServerFS(static)))
	p.mux.HandleFunc("GET /{$}", p.page(p.list))
	p.mux.HandleFunc("POST /ui/signin", p.signIn)
	p.mux.HandleFunc("POST /ui/signout", p.action(p.signOut))
	p.mux.HandleFunc("GET /ui/watches/{id}", p.page(p.detail))
	p.mux.HandleFunc("POST /ui/watches/{id}/{verb}", p.action(p.watchAction))
	p.mux.HandleFunc("GET /ui/inbox", p.page(p.inbox))
	p.mux.HandleFunc("POST /ui/inbox/read", p.action(p.markRead))
	p.mux.HandleFunc("GET /ui/unread", p.page(p.unread))
	p.mux.HandleFunc("GET /ui/events", p.page(p.events))
	p.mux.HandleFunc("GET /ui/admin", p.page(p.admin))
	p.mux.HandleFunc("POST /ui/admin/tokens", p.action(p.createToken))
	p.mux.HandleFunc("POST /ui/admin/tokens/{id}/revoke", p.action(p.revokeToken))
	return p
}

// Patterns are the ServeMux patterns the panel answers; the daemon mounts
// Handler at each.
func Patterns() []string { return []string{"GET /{$}", "/ui/"} }

// Handler serves the panel.
func (p *Panel) Handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", CSP)
		h.Set("X-Frame-Options", "DENY")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "same-origin") // no-referrer would send "Origin: null" on form posts
		h.Set("Cross-Origin-Opener-Policy", "same-origin")
		if h.Get("Cache-Control") == "" {
			h.Set("Cache-Control", "no-store")
		}
		p.mux.ServeHTTP(w, r)
	})
}

// randomID returns 32 random bytes in hex.
func randomID() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b) // never fails (crypto/rand)
	return hex.EncodeToString(b)
}

// authenticate checks a token: admin, a valid scoped token, or neither.
func (p *Panel) authenticate(ctx context.Context, token string) (admin bool, scope vigil.Scope, ok bool, err error) {
	if p.hasAdmin {
		sum := sha256.Sum256([]byte(token))
		if subtle.ConstantTimeCompare(sum[:], p.adminHash[:]) == 1 {
			return true, vigil.Scope{}, true, nil
		}
	}
	if p.opts.AuthenticateFunc == nil {
		return false, vigil.Scope{}, false, nil
	}
	scope, ok, err = p.opts.AuthenticateFunc(ctx, token)
	if err != nil && vigil.ErrorCode(err) == vigil.CodeUnauthorized {
		return false, vigil.Scope{}, false, nil
	}
	return false, scope, ok && err == nil, err
}

// newSession keeps a session for a token just found valid.
func (p *Panel) newSession(token string, admin bool, scope vigil.Scope) *session {
	now := p.now()
	s := &session{id: randomID(), token: token, admin: admin, scope: scope, csrf: randomID(), checked: now, used: now, reader: "panel"}
	s.ended, s.end = context.WithCancel(context.Background())
	p.mu.Lock()
	defer p.mu.Unlock()
	if mine := p.byToken[token]; len(mine) >= maxSessionsPerToken {
		var oldest *session
		for o := range mine {
			if oldest == nil || o.used.Before(oldest.used) {
				oldest = o
			}
		}
		p.dropLocked(oldest)
	}
	if len(p.sessions) >= maxSessions {
		var oldest *session
		for _, o := range p.sessions {
			if oldest == nil || o.used.Before(oldest.used) {
				oldest = o
			}
		}
		p.dropLocked(oldest)
	}
	p.sessions[s.id] = s
	if p.byToken[token] == nil {
		p.byToken[token] = map[*session]struct{}{}
	}
	p.byToken[token][s] = struct{}{}
	return s
}

// Sessions is how many sessions are open.
func (p *Panel) Sessions() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.sessions)
}

// endSession ends session id, and its event streams with it.
func (p *Panel) endSession(id string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if s, ok := p.sessions[id]; ok {
		p.dropLocked(s)
	}
}

// dropLocked forgets s and ends its event streams; p.mu is held.
func (p *Panel) dropLocked(s *session) {
	delete(p.sessions, s.id)
	if mine := p.byToken[s.token]; mine != nil {
		if delete(mine, s); len(mine) == 0 {
			delete(p.byToken, s.token)
		}
	}
	s.end()
}

// liveLocked returns session id if it is open and has been used within
// SessionTTL of now, ending it if it has not; p.mu is held.
func (p *Panel) liveLocked(id string, now time.Time) (*session, bool) {
	s, ok := p.sessions[id]
	if ok && now.Sub(s.used) > p.opts.SessionTTL {
		p.dropLocked(s)
		return nil, false
	}
	return s, ok
}

// open reports whether session id is still open (not signed out,
// expired or evicted), for its event streams' re-checks.
func (p *Panel) open(id string) bool {
	now := p.now()
	p.mu.Lock()
	defer p.mu.Unlock()
	_, ok := p.liveLocked(id, now)
	return ok
}

// session returns the request's live session, re-checking a scoped token
// once Recheck has passed since it was last found valid; nil when there is
// none (no cookie, unknown, expired or revoked: the session then ends).
func (p *Panel) session(r *http.Request) (*session, error) {
	c, err := r.Cookie(CookieName)
	if err != nil || len(c.Value) != 64 {
		return nil, nil
	}
	now := p.now()
	p.mu.Lock()
	s, ok := p.liveLocked(c.Value, now)
	var recheck bool
	if ok {
		s.used = now
		recheck = !s.admin && now.Sub(s.checked) >= p.opts.Recheck
		// The request works on a copy: the stored session changes
		// under p.mu only.
		cp := *s
		cp.follow = slices.Clone(s.follow)
		s = &cp
	}
	p.mu.Unlock()
	if !ok {
		return nil, nil
	}
	if recheck {
		valid, err := p.valid(r.Context(), s)
		if err != nil {
			return nil, err
		}
		if !valid {
			return nil, nil
		}
	}
	return s, nil
}

// valid re-checks a session's token, ending the session when it no longer
// authenticates.
func (p *Panel) valid(ctx context.Context, s *session) (bool, error) {
	if s.admin {
		return true, nil
	}
	_, scope, ok, err := p.authenticate(ctx, s.token)
	if err != nil {
		return false, err
	}
	if !ok {
		p.endSession(s.id)
		return false, nil
	}
	p.mu.Lock()
	if st, ok := p.sessions[s.id]; ok {
		st.checked, st.scope = p.now(), scope
	}
	p.mu.Unlock()
	return true, nil
}

// ctx returns the request context acting within the session's scope.
func (s *session) ctx(ctx context.Context) context.Context {
	if s.admin {
		return ctx
	}
	return vigil.WithScope(ctx, s.scope)
}

// setCookie sets (or, with an empty id, clears) the session cookie.
func setCookie(w http.ResponseWriter, r *http.Request, id string) {
	c := &http.Cookie{Name: CookieName, Value: id, Path: "/", HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: overTLS(r)}
	if id == "" {
		c.MaxAge = -1
	}
	http.SetCookie(w, c)
}

// overTLS reports whether the browser reached the panel over TLS. The
// daemon listens on plain HTTP, so behind a TLS proxy r.TLS is nil; the
// browser's Origin (sent on every POST, and already checked by the
// daemon) then names https.
func overTLS(r *http.Request) bool {
	return r.TLS != nil || strings.HasPrefix(strings.ToLower(r.Header.Get("Origin")), "https://")
}

// checkCSRF compares the request's CSRF token (header or form field) with
// the session's, in constant time.
func checkCSRF(r *http.Request, s *session) bool {
	got := r.Header.Get(csrfHeader)
	if got == "" {
		got = r.PostFormValue(csrfField)
	}
	return got != "" && subtle.ConstantTimeCompare([]byte(got), []byte(s.csrf)) == 1
}
