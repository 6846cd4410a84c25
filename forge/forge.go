// Package forge reads the forges that the ci and ticket kinds watch:
// GitHub (and GitHub Enterprise), Gitea (and Forgejo) and GitLab. It holds
// one small adapter per provider over a shared Reader that does what every
// caller would otherwise get wrong on its own:
//
//   - one upstream request per URL per freshness window, however many
//     watches ask, with concurrent misses coalesced (singleflight) and a
//     failed read held for the window too; the shared request runs on no
//     caller's context (a caller giving up stops only its own wait) and
//     ends when answered or at RequestTimeout;
//   - conditional requests: a cached body is revalidated with
//     If-None-Match, and a 304 reuses it (on GitHub a 304 does not count
//     against the rate limit);
//   - rate limits: a 403 or 429 with X-RateLimit-Remaining (or
//     RateLimit-Remaining) 0, or with Retry-After, makes every read of
//     that provider unavailable until the reset, without a request — the
//     limit belongs to the token, and the token is the provider's;
//   - listings read in full: by Link rel="next" on GitHub and GitLab, by
//     page number until X-Total-Count on Gitea (which sends no Link), and
//     never judged in part;
//   - permanent answers (a repository that is not there, a token the forge
//     rejects) as errors marked Permanent, with a sentence that says what
//     to fix; GitHub's "No commit found for SHA" is not one (a commit may
//     still be on its way) and IsNoCommit tells it.
//
// The time of every cache and rate-limit decision is passed in (the
// probe's Now): the package never reads the clock for them.
//
// Tokens go in the Authorization header only and never into an error: the
// package redacts them from every error it returns, and follows a
// pagination link or a redirect only to the configured origin.
package forge

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"
)

// Provider names a forge API.
type Provider string

// The providers this package reads.
const (
	GitHub Provider = "github"
	Gitea  Provider = "gitea"
	GitLab Provider = "gitlab"
)

// Providers lists the providers, in the order they are documented.
func Providers() []Provider { return []Provider{GitHub, Gitea, GitLab} }

// ParseProvider reads a predicate's provider: "" means GitHub, and case
// does not matter.
func ParseProvider(s string) (Provider, error) {
	if s == "" {
		return GitHub, nil
	}
	p := Provider(strings.ToLower(s))
	if !Known(p) {
		return "", errors.New("must be github, gitea or gitlab")
	}
	return p, nil
}

// Known reports whether p is one of Providers.
func Known(p Provider) bool { return p == GitHub || p == Gitea || p == GitLab }

// Default API base URLs (SPEC §10). Gitea has none: it is always
// self-hosted.
const (
	DefaultGitHubURL = "https://api.github.com"
	DefaultGitLabURL = "https://gitlab.com/api/v4"
)

// Endpoint is one provider's daemon configuration: the API base URL, an
// optional token, and optionally the login the token writes as. An empty
// URL leaves the provider unconfigured.
type Endpoint struct {
	URL   string
	Token string
	// Login is the user the token comments as ("my-app[bot]" for a
	// GitHub App). Empty reads it from the forge, once: /user, or on
	// GitHub for an App installation token (whose /user answers 403),
	// GraphQL's viewer.
	Login string
}

// String shows the endpoint with its token redacted, so a configuration
// printed with %v never shows a secret.
func (e Endpoint) String() string {
	tok := "none"
	if e.Token != "" {
		tok = "[redacted]"
	}
	if e.Login != "" {
		return fmt.Sprintf("{url: %s, token: %s, login: %s}", RedactURL(e.URL), tok, e.Login)
	}
	return fmt.Sprintf("{url: %s, token: %s}", RedactURL(e.URL), tok)
}

// GoString is String, for %#v.
func (e Endpoint) GoString() string { return e.String() }

// Settings configures every provider: the forges.PROVIDER.url and
// forges.PROVIDER.token keys of the daemon.
type Settings struct {
	GitHub Endpoint
	Gitea  Endpoint
	GitLab Endpoint
}

// DefaultSettings returns the defaults of SPEC §10: the public GitHub and
// GitLab APIs without tokens, and no Gitea.
func DefaultSettings() Settings {
	return Settings{GitHub: Endpoint{URL: DefaultGitHubURL}, GitLab: Endpoint{URL: DefaultGitLabURL}}
}

// Endpoint returns the configuration of provider p.
func (s Settings) Endpoint(p Provider) Endpoint {
	switch p {
	case GitHub:
		return s.GitHub
	case Gitea:
		return s.Gitea
	case GitLab:
		return s.GitLab
	}
	return Endpoint{}
}

// maxLogin bounds a configured login.
const maxLogin = 255

// LoginSetting names the configuration key and environment variable that
// set the login of provider p's token: "forges.github.login
// (VIGIL_GITHUB_LOGIN)".
func LoginSetting(p Provider) string {
	return fmt.Sprintf("forges.%s.login (VIGIL_%s_LOGIN)", p, strings.ToUpper(string(p)))
}

// URLSetting names the configuration key and environment variable that
// set provider p's URL: "forges.gitea.url (VIGIL_GITEA_URL)".
func URLSetting(p Provider) string {
	return fmt.Sprintf("forges.%s.url (VIGIL_%s_URL)", p, strings.ToUpper(string(p)))
}

// TokenSetting names the configuration key and environment variable that
// set provider p's token: "forges.github.token (VIGIL_GITHUB_TOKEN)".
func TokenSetting(p Provider) string {
	return fmt.Sprintf("forges.%s.token (VIGIL_%s_TOKEN)", p, strings.ToUpper(string(p)))
}

// Validate reports the first endpoint whose URL cannot work, naming its
// setting. The message never shows a token or URL credentials.
func (s Settings) Validate() error {
	for _, p := range Providers() {
		e := s.Endpoint(p)
		if e.URL != "" {
			if _, err := apiBase(p, e.URL); err != nil {
				return fmt.Errorf("forges.%s.url %q: %w", p, RedactURL(e.URL), err)
			}
		}
		if strings.ContainsAny(e.Token, " \t\r\n") {
			return fmt.Errorf("forges.%s.token: holds white space; give the token alone", p)
		}
		if l := e.Login; l != "" && (len(l) > maxLogin || strings.ContainsFunc(l, func(r rune) bool { return r <= ' ' || r == 0x7f })) {
			return fmt.Errorf("forges.%s.login: must be a login of at most %d bytes without white space, like my-app[bot]", p, maxLogin)
		}
	}
	return nil
}

// apiBase checks a configured URL and returns the API base every request
// path is appended to. A Gitea URL without /api/v1 and a GitLab URL
// without /api/v4 get it appended, so the site's own address works too; a
// GitHub Enterprise URL must name its API (https://ghe.example.com/api/v3).
func apiBase(p Provider, raw string) (*url.URL, error) {
	u, err := url.Parse(strings.TrimSpace(raw))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.Opaque != "" {
		return nil, errors.New("must be an http or https URL with a host, like " + exampleURL(p))
	}
	if u.RawQuery != "" || u.Fragment != "" {
		return nil, errors.New("must not carry a query or a fragment")
	}
	u.Path = strings.TrimRight(u.Path, "/")
	u.RawPath = ""
	switch p {
	case Gitea:
		if !strings.HasSuffix(u.Path, "/api/v1") {
			u.Path += "/api/v1"
		}
	case GitLab:
		if !strings.HasSuffix(u.Path, "/api/v4") {
			u.Path += "/api/v4"
		}
	}
	return u, nil
}

func exampleURL(p Provider) string {
	switch p {
	case Gitea:
		return "https://gitea.example.com"
	case GitLab:
		return DefaultGitLabURL
	}
	return DefaultGitHubURL
}

// RedactURL drops credentials from a URL before it is shown, even from
// one that does not parse.
func RedactURL(s string) string {
	i := strings.Index(s, "://")
	if i < 0 {
		return s
	}
	rest := s[i+3:]
	end := strings.IndexAny(rest, "/?#")
	if end < 0 {
		end = len(rest)
	}
	if at := strings.LastIndex(rest[:end], "@"); at >= 0 {
		return s[:i+3] + "…@" + rest[at+1:]
	}
	return s
}

// Options tunes a Set. The zero value is the daemon's.
type Options struct {
	// HTTPClient makes the requests; nil makes one with RequestTimeout per
	// request and no proxy from the environment. Either way a redirect to
	// another scheme, host or port than the request's is not followed
	// (see sameOrigin).
	HTTPClient *http.Client
}

// Timeouts and bounds of forge reads.
const (
	// RequestTimeout bounds one request.
	RequestTimeout = 15 * time.Second
	// MaxBody bounds one response body.
	MaxBody = 8 << 20
	// MaxPages bounds how many pages one listing reads (100 items each,
	// 50 on Gitea).
	MaxPages  = 20
	userAgent = "vigil (forge watcher)"
)

// Set holds a Client for each configured provider. The daemon builds one
// and gives it to both the ci and the ticket watcher, so they share the
// caches, the coalescing and the rate-limit state of each token.
type Set struct {
	clients map[Provider]*Client
	http    *http.Client
	// stop ends the shared reads still in flight (Close).
	stop func()
}

// CloseIdleConnections closes the kept-alive connections to the forges.
func (s *Set) CloseIdleConnections() {
	if s != nil && s.http != nil {
		s.http.CloseIdleConnections()
	}
}

// Close ends the reads still in flight, which run on no caller's context
// (see Reader), and closes the kept-alive connections: the daemon calls
// it on its way out. The Set is not used after.
func (s *Set) Close() {
	if s == nil {
		return
	}
	if s.stop != nil {
		s.stop()
	}
	s.CloseIdleConnections()
}

// New returns the clients of the configured providers in s. It fails on a
// URL Settings.Validate refuses.
func New(s Settings, o Options) (*Set, error) {
	if err := s.Validate(); err != nil {
		return nil, err
	}
	hc := o.HTTPClient
	if hc == nil {
		tr := http.DefaultTransport.(*http.Transport).Clone()
		tr.Proxy = nil
		hc = &http.Client{Transport: tr, Timeout: RequestTimeout}
	}
	own := *hc
	own.CheckRedirect = sameOrigin(hc.CheckRedirect)
	hc = &own
	life, stop := context.WithCancel(context.Background())
	set := &Set{clients: make(map[Provider]*Client), http: hc, stop: stop}
	for _, p := range Providers() {
		e := s.Endpoint(p)
		if e.URL == "" {
			continue
		}
		base, _ := apiBase(p, e.URL)
		c := &Client{provider: p, base: base, token: e.Token}
		if e.Login != "" {
			l := e.Login
			c.self = &l
		}
		c.reader = newReader(life, p, hc, c.authorize, c.redact)
		switch p {
		case GitHub:
			c.api = githubAPI{c}
		case Gitea:
			c.api = giteaAPI{c}
		case GitLab:
			c.api = gitlabAPI{c}
		}
		set.clients[p] = c
	}
	return set, nil
}

// Client returns the client of provider p, and false when p is not
// configured.
func (s *Set) Client(p Provider) (*Client, bool) {
	if s == nil {
		return nil, false
	}
	c, ok := s.clients[p]
	return c, ok
}

// Configured lists the configured providers.
func (s *Set) Configured() []Provider {
	var ps []Provider
	for _, p := range Providers() {
		if _, ok := s.Client(p); ok {
			ps = append(ps, p)
		}
	}
	return ps
}

// Unconfigured is the sentence for a watch naming provider p while the
// daemon has no URL for it.
func Unconfigured(kind string, p Provider) string {
	return fmt.Sprintf("%s watches on %s need the forge's API URL, and this daemon has none: set %s in the daemon's configuration", kind, p, URLSetting(p))
}

// Client reads one provider. Its methods are safe for concurrent use.
type Client struct {
	provider Provider
	base     *url.URL
	token    string
	reader   *Reader
	api      api

	mu   sync.Mutex
	self *string // the token's own login, once known
}

// Provider returns the provider c reads.
func (c *Client) Provider() Provider { return c.provider }

// api is what each provider's adapter implements.
type api interface {
	authorize(req *http.Request)
	resolve(rq request, repo, ref string) (string, error)
	checks(rq request, repo, sha string) (Report, error)
	ticket(rq request, q TicketQuery, k counter) (*Ticket, error)
	self(rq request) (string, error)
}

func (c *Client) authorize(req *http.Request) { c.api.authorize(req) }

// redact removes the token from a message.
func (c *Client) redact(s string) string {
	if c.token == "" || len(c.token) < 4 {
		return s
	}
	return strings.ReplaceAll(s, c.token, "[redacted]")
}

// endpoint returns the absolute URL of an API path given as segments,
// each escaped on its own (a segment "acme/api" becomes "acme%2Fapi", as a
// GitLab project id must be), and a query.
func (c *Client) endpoint(query url.Values, segs ...string) string {
	u := *c.base
	esc := make([]string, len(segs))
	for i, s := range segs {
		esc[i] = url.PathEscape(s)
	}
	u.Path = c.base.Path + "/" + strings.Join(segs, "/")
	u.RawPath = c.base.EscapedPath() + "/" + strings.Join(esc, "/")
	if len(query) > 0 {
		u.RawQuery = query.Encode()
	}
	return u.String()
}

// redirectError is the error of a redirect sameOrigin refused.
type redirectError struct{ from, to string }

func (e *redirectError) Error() string {
	return fmt.Sprintf("the forge redirected the request from %s to %s, and the token is not sent there", e.from, e.to)
}

// sameOrigin wraps a client's redirect policy (nil: net/http's) so that a
// redirect to another scheme, host or port is refused: net/http keeps
// the Authorization header on a redirect to the same host name whatever
// its scheme or port, and to its subdomains, which would send the token
// in plain text, or to another service. A redirect within the origin (a
// renamed repository) is followed, with the user:pass@ of the configured
// URL.
func sameOrigin(next func(*http.Request, []*http.Request) error) func(*http.Request, []*http.Request) error {
	return func(req *http.Request, via []*http.Request) error {
		first := via[0].URL
		if req.URL.Scheme != first.Scheme || !strings.EqualFold(req.URL.Host, first.Host) {
			return &redirectError{from: first.Scheme + "://" + first.Host, to: req.URL.Scheme + "://" + req.URL.Host}
		}
		if req.URL.User == nil {
			// An absolute Location on the same origin names no
			// credentials: carry the configured URL's, as a relative
			// one (which net/http resolves against the request's URL)
			// does.
			req.URL.User = first.User
		}
		if next != nil {
			return next(req, via)
		}
		if len(via) >= 10 {
			return errors.New("stopped after 10 redirects")
		}
		return nil
	}
}

// sameHost reports whether next may be requested with the token: a link
// to another scheme or host is not followed.
func (c *Client) sameHost(next string) bool {
	u, err := url.Parse(next)
	return err == nil && u.Scheme == c.base.Scheme && strings.EqualFold(u.Host, c.base.Host)
}

// withCredentials returns next, a URL on the configured origin (sameHost
// holds), with the user:pass@ of the configured URL when it names none:
// a forge (or the proxy in front of it) builds its Link headers from the
// host it was asked for, without the credentials, and the next page read
// without them is answered 401, or as to an anonymous reader. A URL
// that names its own credentials, and every URL of another origin, is
// left as it is.
func (c *Client) withCredentials(next string) string {
	if c.base.User == nil {
		return next
	}
	u, err := url.Parse(next)
	if err != nil || u.User != nil || !c.sameHost(next) {
		return next
	}
	u.User = c.base.User
	return u.String()
}
