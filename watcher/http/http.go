// Package httpwatch is the watcher for kind http: a watch on an HTTP
// endpoint's status and JSON body.
//
// The predicate (every field but url is optional):
//
//	{
//	  "url":       "https://api.example.com/deploys/42",
//	  "method":    "GET",                       GET HEAD POST PUT PATCH DELETE OPTIONS
//	  "headers":   {"Authorization": "Bearer …"},
//	  "body":      "…",                         a string; not with GET or HEAD
//	  "timeout":   "10s",                       at most 60s
//	  "status":    ["2xx", 304],                codes (100–599) and classes ("2xx")
//	  "done":      {"path": "state", "equals": "live"},   a matcher or a list
//	  "fail":      [{"path": "state", "equals": "failed"}],
//	  "max_bytes": 1048576,                     at most 16 MiB
//	  "follow_redirects": false                 default true
//	}
//
// The canonical form has one spelling for each question: the URL with its
// scheme and host lowercased, the default port dropped, an empty path
// written "/" and the fragment dropped; the method uppercased; header names
// in canonical case; method, timeout and status always present (defaults
// GET, 10s, ["2xx"]); status sorted, codes covered by a listed class
// dropped, codes as numbers and classes as strings; matcher lists sorted
// (see package matcher); body, headers, done and fail omitted when empty;
// max_bytes present only with done or fail, since the body is read only
// to match it; follow_redirects present only when false.
//
// A probe sends one request (following at most MaxRedirects redirects,
// unless follow_redirects is false: then the first answer is judged, a
// 3xx like any other status) and answers, in order:
//
//   - a transport error or a timeout: unavailable;
//   - a status not accepted: unavailable for a 5xx ("HTTP 503"), a 429
//     or a 408 (the server limited or timed out the request: it could not
//     tell; Retry-After kept in the facts), pending otherwise;
//   - a body larger than max_bytes (read only with done or fail):
//     unavailable, saying so; a body in a Content-Encoding vigil cannot
//     read (one the predicate's Accept-Encoding asked for): unavailable,
//     saying so;
//   - fail given and matching: failed (fail is checked only on an accepted
//     status, so an error page never ends a watch);
//   - done matching, or no done: satisfied;
//   - otherwise pending.
//
// While redirects are followed, a 301, 302, 303, 307 or 308 is never the
// answer judged, so registration refuses those codes and the "3xx" class
// in status unless follow_redirects is false (300, 304 and 305 are not
// followed and may be listed).
//
// The body is matched as the server says it sent it: gzip or deflate is
// decoded (the transport does it unless the predicate set Accept-Encoding
// itself), and one UTF-8 byte order mark before the JSON is dropped.
//
// A redirect to another host name gets none of the headers the predicate
// set, nor a Referer (the URL's query may hold a secret), and a 307 or 308
// to another host name, which would send the predicate's body again, is
// not followed (the probe is unavailable): a key meant for one host is
// never sent to another. The scheme and port may change.
//
// Connections never reach link-local or cloud metadata addresses; with
// Config.DenyPrivate, nor loopback or private ones. The check runs on the
// resolved address at connect time (see watcher.Guard), for redirects too.
// Proxy environment variables are ignored, so that check sees the real
// destination. Admit refuses at registration a URL whose host is a
// literal address that would be refused.
package httpwatch

import (
	"bufio"
	"compress/flate"
	"compress/gzip"
	"compress/zlib"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/vigil-run/vigil"
	"github.com/vigil-run/vigil/watcher"
	"github.com/vigil-run/vigil/watcher/matcher"
)

// Defaults and bounds of an http predicate.
const (
	DefaultTimeout  = 10 * time.Second
	MaxTimeout      = 60 * time.Second
	DefaultMaxBytes = 1 << 20
	MaxMaxBytes     = 16 << 20
	MaxRedirects    = 5
	MaxURL          = 4096
	MaxBody         = 64 << 10
	MaxHeaders      = 32
	MaxHeaderName   = 256
	MaxHeaderValue  = 8 << 10
	MaxStatus       = 32
	// maxResponseHeaders bounds the response headers read.
	maxResponseHeaders = 64 << 10
	userAgent          = "vigil (watch probe)"
)

// Config configures the http watcher.
type Config struct {
	// DenyPrivate refuses loopback, private and CGNAT addresses too.
	DenyPrivate bool
	// Resolver resolves host names; nil means the system's. Whatever it
	// answers, the guard checks the address actually connected to.
	Resolver *net.Resolver
}

// Watcher answers http watches. It holds its own HTTP client, whose
// connections are kept alive and reused between probes, and each watch's
// parsed predicate (see specCache).
type Watcher struct {
	client *http.Client
	guard  watcher.Guard
	specs  *specCache
}

// Bounds on the connections kept alive between probes.
const (
	// MaxIdleConns is how many idle connections are kept in all.
	MaxIdleConns = 256
	// MaxIdleConnsPerHost is how many are kept per (scheme, host, port).
	MaxIdleConnsPerHost = 8
	// IdleConnTimeout is how long an idle connection is kept.
	IdleConnTimeout = 90 * time.Second
)

var (
	_ watcher.Watcher = (*Watcher)(nil)
	_ watcher.Stopper = (*Watcher)(nil)
)

// New returns an http watcher with its own client: no proxy, every
// connection checked by watcher.Guard when it is dialled. Connections are
// pooled by the transport per (scheme, host, port) — one TLS
// configuration for all — and kept alive between probes, within
// MaxIdleConns, MaxIdleConnsPerHost and IdleConnTimeout: a watch probed
// every few seconds reuses its connection instead of a new TCP (and TLS)
// handshake each time. A redirect to another host dials, and is checked,
// anew. Close releases the idle ones.
func New(cfg Config) *Watcher {
	guard := watcher.Guard{DenyPrivate: cfg.DenyPrivate}
	dialer := &net.Dialer{Timeout: MaxTimeout, Control: guard.Control, Resolver: cfg.Resolver}
	tr := &http.Transport{
		Proxy:                  nil,
		DialContext:            dialer.DialContext,
		ForceAttemptHTTP2:      true,
		TLSHandshakeTimeout:    MaxTimeout,
		MaxIdleConns:           MaxIdleConns,
		MaxIdleConnsPerHost:    MaxIdleConnsPerHost,
		IdleConnTimeout:        IdleConnTimeout,
		MaxResponseHeaderBytes: maxResponseHeaders,
	}
	client := &http.Client{Transport: tr, CheckRedirect: checkRedirect}
	return &Watcher{client: client, guard: guard, specs: newSpecCache(specCacheSize)}
}

// Close closes the connections kept alive between probes. Probing after
// it works, and dials again.
func (w *Watcher) Close() error {
	w.client.CloseIdleConnections()
	return nil
}

// Stop implements watcher.Stopper: a cancelled watch's parsed predicate
// is dropped.
func (w *Watcher) Stop(_ context.Context, id string) error {
	w.specs.forget(id)
	return nil
}

var errTooManyRedirects = fmt.Errorf("more than %d redirects", MaxRedirects)

// errBodyAway refuses a redirect (307, 308) that would send the
// predicate's body to another host name.
var errBodyAway = errors.New("a redirect to another host would send the request's body there")

// redirectPolicy is what one probe's predicate says about redirects; it
// travels in the request's context to checkRedirect.
type redirectPolicy struct {
	noFollow bool
	headers  []string // the header names the predicate set
}

type policyKey struct{}

// checkRedirect stops after MaxRedirects, follows nothing when the
// predicate says so, and strips the predicate's headers (and the
// Referer) from a request to another host name than the first one: the
// client copies the first request's headers to every hop, and drops only
// Authorization and Cookie itself.
func checkRedirect(req *http.Request, via []*http.Request) error {
	pol, _ := req.Context().Value(policyKey{}).(*redirectPolicy)
	if pol != nil && pol.noFollow {
		return http.ErrUseLastResponse
	}
	if len(via) > MaxRedirects {
		return errTooManyRedirects
	}
	first := strings.ToLower(via[0].URL.Hostname())
	away := !strings.EqualFold(req.URL.Hostname(), first)
	for _, r := range via[1:] {
		away = away || !strings.EqualFold(r.URL.Hostname(), first)
	}
	if away && req.Body != nil && req.Body != http.NoBody {
		// A 307 or 308 sends the predicate's body again, as it must be
		// sent: it stays with its host as the headers do.
		return errBodyAway
	}
	if away {
		req.Header.Del("Referer")
		if pol != nil {
			for _, h := range pol.headers {
				req.Header.Del(h)
			}
		}
	}
	return nil
}

// input is the predicate as a caller may spell it.
type input struct {
	URL      string            `json:"url"`
	Method   string            `json:"method,omitempty"`
	Headers  map[string]string `json:"headers,omitempty"`
	Body     string            `json:"body,omitempty"`
	Timeout  string            `json:"timeout,omitempty"`
	Status   json.RawMessage   `json:"status,omitempty"`
	Done     json.RawMessage   `json:"done,omitempty"`
	Fail     json.RawMessage   `json:"fail,omitempty"`
	MaxBytes *int64            `json:"max_bytes,omitempty"`
	Follow   *bool             `json:"follow_redirects,omitempty"`
}

// canonical is the predicate's one spelling.
type canonical struct {
	URL      string            `json:"url"`
	Method   string            `json:"method"`
	Headers  map[string]string `json:"headers,omitempty"`
	Body     string            `json:"body,omitempty"`
	Timeout  string            `json:"timeout"`
	Status   []any             `json:"status"`
	Done     []matcher.Matcher `json:"done,omitempty"`
	Fail     []matcher.Matcher `json:"fail,omitempty"`
	MaxBytes int64             `json:"max_bytes,omitempty"`
	Follow   *bool             `json:"follow_redirects,omitempty"`
}

// spec is a parsed predicate, ready to probe.
type spec struct {
	url      string
	method   string
	headers  map[string]string
	body     string
	timeout  time.Duration
	status   statusSet
	done     []matcher.Matcher
	fail     []matcher.Matcher
	maxBytes int64
	noFollow bool
}

func (s *spec) canonical() canonical {
	c := canonical{URL: s.url, Method: s.method, Headers: s.headers, Body: s.body,
		Timeout: vigil.FormatDuration(s.timeout), Status: s.status.canonical(), Done: s.done, Fail: s.fail}
	if len(s.done)+len(s.fail) > 0 {
		c.MaxBytes = s.maxBytes
	}
	if s.noFollow {
		c.Follow = new(bool)
	}
	return c
}

// Kind returns vigil.KindHTTP.
func (*Watcher) Kind() vigil.Kind { return vigil.KindHTTP }

// Canonicalize validates the predicate and returns its canonical form.
func (*Watcher) Canonicalize(_ context.Context, raw json.RawMessage, _ time.Time) (watcher.Canonical, error) {
	s, err := parse(raw)
	if err != nil {
		return watcher.Canonical{}, err
	}
	if err := s.checkRedirectStatus(); err != nil {
		return watcher.Canonical{}, err
	}
	b, err := watcher.Encode(s.canonical())
	if err != nil {
		return watcher.Canonical{}, err
	}
	return watcher.Canonical{Predicate: b}, nil
}

func allowedMethods() []string {
	return []string{"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"}
}

func parse(raw json.RawMessage) (*spec, error) {
	var in input
	if err := watcher.Decode(raw, "", &in); err != nil {
		return nil, err
	}
	s := &spec{}
	var err error
	if s.url, err = CanonicalURL(in.URL, "url"); err != nil {
		return nil, err
	}
	s.method = strings.ToUpper(in.Method)
	if s.method == "" {
		s.method = http.MethodGet
	}
	if !slices.Contains(allowedMethods(), s.method) {
		return nil, watcher.InvalidPredicate("method", "must be one of %s", strings.Join(allowedMethods(), ", "))
	}
	if s.headers, err = canonicalHeaders(in.Headers); err != nil {
		return nil, err
	}
	if len(in.Body) > MaxBody {
		return nil, watcher.InvalidPredicate("body", "is longer than %d bytes", MaxBody)
	}
	if in.Body != "" && (s.method == http.MethodGet || s.method == http.MethodHead) {
		return nil, watcher.InvalidPredicate("body", "cannot be sent with %s: use POST, PUT, PATCH or DELETE", s.method)
	}
	s.body = in.Body
	if s.timeout, err = watcher.DurationField("timeout", in.Timeout, DefaultTimeout, MaxTimeout); err != nil {
		return nil, err
	}
	if s.status, err = parseStatus(in.Status, "status"); err != nil {
		return nil, err
	}
	if in.Done != nil {
		if s.done, err = matcher.ParseList(in.Done, "done"); err != nil {
			return nil, err
		}
	}
	if in.Fail != nil {
		if s.fail, err = matcher.ParseList(in.Fail, "fail"); err != nil {
			return nil, err
		}
	}
	s.maxBytes = DefaultMaxBytes
	if in.MaxBytes != nil {
		if *in.MaxBytes < 1 || *in.MaxBytes > MaxMaxBytes {
			return nil, watcher.InvalidPredicate("max_bytes", "must be from 1 to %d", MaxMaxBytes)
		}
		s.maxBytes = *in.MaxBytes
	}
	if (len(s.done) > 0 || len(s.fail) > 0) && s.method == http.MethodHead {
		return nil, watcher.InvalidPredicate("method", "HEAD has no body for done or fail to match: use GET")
	}
	s.noFollow = in.Follow != nil && !*in.Follow
	return s, nil
}

// followedCodes are the statuses the client follows when the answer
// names a Location: while redirects are followed, they are never judged.
func followedCodes() []int {
	return []int{http.StatusMovedPermanently, http.StatusFound, http.StatusSeeOther, http.StatusTemporaryRedirect, http.StatusPermanentRedirect}
}

// checkRedirectStatus refuses, at registration, a status that can never
// be seen while redirects are followed. Stored predicates are not held to
// it: a watch registered before keeps probing as it did.
func (s *spec) checkRedirectStatus() error {
	if s.noFollow {
		return nil
	}
	const field = "status"
	if slices.Contains(s.status.classes, 3) {
		return watcher.InvalidPredicate(field, "\"3xx\" is never seen while redirects are followed: set follow_redirects to false to match a redirect itself")
	}
	for _, c := range s.status.codes {
		if slices.Contains(followedCodes(), c) {
			return watcher.InvalidPredicate(field, "%d is a redirect, which is followed, so it is never seen: set follow_redirects to false to match the redirect itself", c)
		}
	}
	return nil
}

// CanonicalURL validates an http or https URL and returns its one
// spelling: scheme and host lowercased, the scheme's default port dropped,
// an empty path written "/", the fragment dropped. The path and query are
// kept as given, since servers may tell their spellings apart.
func CanonicalURL(raw, field string) (string, error) {
	if raw == "" {
		return "", watcher.InvalidPredicate(field, "is required")
	}
	if len(raw) > MaxURL {
		return "", watcher.InvalidPredicate(field, "is longer than %d bytes", MaxURL)
	}
	u, err := url.Parse(raw)
	if err != nil {
		return "", watcher.InvalidPredicate(field, "is not a valid URL")
	}
	u.Scheme = strings.ToLower(u.Scheme)
	if u.Scheme != "http" && u.Scheme != "https" {
		return "", watcher.InvalidPredicate(field, "must be an http or https URL")
	}
	if u.Opaque != "" || u.Host == "" {
		return "", watcher.InvalidPredicate(field, "must name a host, as in https://example.com/path")
	}
	host, port := u.Hostname(), u.Port()
	if host == "" {
		return "", watcher.InvalidPredicate(field, "must name a host, as in https://example.com/path")
	}
	if strings.Contains(host, "%") {
		return "", watcher.InvalidPredicate(field, "must not carry an IPv6 zone")
	}
	host = strings.ToLower(host)
	if port != "" {
		n, err := strconv.Atoi(port)
		if err != nil || n < 1 || n > 65535 {
			return "", watcher.InvalidPredicate(field, "has an invalid port")
		}
		port = strconv.Itoa(n)
	}
	if (u.Scheme == "http" && port == "80") || (u.Scheme == "https" && port == "443") {
		port = ""
	}
	switch {
	case port != "":
		u.Host = net.JoinHostPort(host, port)
	case strings.Contains(host, ":"):
		u.Host = "[" + host + "]"
	default:
		u.Host = host
	}
	if u.Path == "" {
		u.Path, u.RawPath = "/", ""
	}
	u.Fragment, u.RawFragment = "", ""
	u.ForceQuery = false
	return u.String(), nil
}

// forbiddenHeaders are set by the transport, never by a predicate.
func forbiddenHeaders() []string {
	return []string{"Connection", "Content-Length", "Keep-Alive", "Proxy-Connection", "Te", "Trailer", "Transfer-Encoding", "Upgrade"}
}

func canonicalHeaders(in map[string]string) (map[string]string, error) {
	if len(in) == 0 {
		return nil, nil
	}
	if len(in) > MaxHeaders {
		return nil, watcher.InvalidPredicate("headers", "holds %d headers; at most %d are allowed", len(in), MaxHeaders)
	}
	out := make(map[string]string, len(in))
	for name, value := range in {
		field := "headers." + name
		if name == "" || len(name) > MaxHeaderName || !validHeaderName(name) {
			return nil, watcher.InvalidPredicate(watcher.Clip(field, 64+len("headers.")), "is not a valid header name")
		}
		key := http.CanonicalHeaderKey(name)
		if slices.Contains(forbiddenHeaders(), key) {
			return nil, watcher.InvalidPredicate(field, "is set by vigil and cannot be given")
		}
		if len(value) > MaxHeaderValue {
			return nil, watcher.InvalidPredicate(field, "is longer than %d bytes", MaxHeaderValue)
		}
		if strings.ContainsAny(value, "\r\n\x00") {
			return nil, watcher.InvalidPredicate(field, "must not hold a line break or NUL")
		}
		if _, dup := out[key]; dup {
			return nil, watcher.InvalidPredicate(field, "is given twice (header names are case-insensitive)")
		}
		out[key] = value
	}
	return out, nil
}

func validHeaderName(s string) bool {
	for _, c := range []byte(s) {
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0
		if !ok {
			return false
		}
	}
	return true
}

// statusSet is a set of accepted status codes: single codes and classes.
type statusSet struct {
	classes []int // 1 to 5, for "1xx" to "5xx"
	codes   []int
}

func (s statusSet) accepts(code int) bool {
	return slices.Contains(s.classes, code/100) || slices.Contains(s.codes, code)
}

// canonical lists the set sorted by the lowest code each entry covers.
func (s statusSet) canonical() []any {
	type entry struct {
		low int
		v   any
	}
	var es []entry
	for _, c := range s.classes {
		es = append(es, entry{c * 100, fmt.Sprintf("%dxx", c)})
	}
	for _, c := range s.codes {
		es = append(es, entry{c, c})
	}
	slices.SortFunc(es, func(a, b entry) int {
		if a.low != b.low {
			return a.low - b.low
		}
		_, aIsClass := a.v.(string)
		if aIsClass {
			return -1
		}
		return 1
	})
	out := make([]any, len(es))
	for i, e := range es {
		out[i] = e.v
	}
	return out
}

func parseStatus(raw json.RawMessage, field string) (statusSet, error) {
	if len(raw) == 0 {
		return statusSet{classes: []int{2}}, nil
	}
	var items []json.RawMessage
	if t := strings.TrimSpace(string(raw)); strings.HasPrefix(t, "[") {
		if err := json.Unmarshal(raw, &items); err != nil {
			return statusSet{}, watcher.InvalidPredicate(field, "must be a list of status codes and classes like \"2xx\"")
		}
	} else {
		items = []json.RawMessage{raw}
	}
	if len(items) == 0 {
		return statusSet{}, watcher.InvalidPredicate(field, "must list at least one status code or class")
	}
	if len(items) > MaxStatus {
		return statusSet{}, watcher.InvalidPredicate(field, "lists %d entries; at most %d are allowed", len(items), MaxStatus)
	}
	var s statusSet
	for i, item := range items {
		f := field
		if len(items) > 1 || strings.HasPrefix(strings.TrimSpace(string(raw)), "[") {
			f = fmt.Sprintf("%s[%d]", field, i)
		}
		var code int
		var class string
		switch {
		case json.Unmarshal(item, &code) == nil && string(item) != "null":
			if code < 100 || code > 599 {
				return statusSet{}, watcher.InvalidPredicate(f, "must be a status code from 100 to 599")
			}
			s.codes = append(s.codes, code)
		case json.Unmarshal(item, &class) == nil && string(item) != "null":
			c := strings.ToLower(class)
			if len(c) != 3 || c[0] < '1' || c[0] > '5' || c[1:] != "xx" {
				if n, err := strconv.Atoi(c); err == nil && n >= 100 && n <= 599 {
					s.codes = append(s.codes, n)
					continue
				}
				return statusSet{}, watcher.InvalidPredicate(f, "must be a status code or a class from \"1xx\" to \"5xx\"")
			}
			s.classes = append(s.classes, int(c[0]-'0'))
		default:
			return statusSet{}, watcher.InvalidPredicate(f, "must be a status code or a class like \"2xx\"")
		}
	}
	slices.Sort(s.classes)
	s.classes = slices.Compact(s.classes)
	s.codes = slices.DeleteFunc(s.codes, func(c int) bool { return slices.Contains(s.classes, c/100) })
	slices.Sort(s.codes)
	s.codes = slices.Compact(s.codes)
	return s, nil
}

// Admit refuses a URL whose host is a literal IP address the daemon never
// connects to. Host names are checked at connect time, on every probe.
func (w *Watcher) Admit(_ context.Context, predicate json.RawMessage) error {
	s, err := parse(predicate)
	if err != nil {
		return err
	}
	u, err := url.Parse(s.url)
	if err != nil {
		return watcher.InvalidPredicate("url", "is not a valid URL")
	}
	return w.guard.Admit(u.Hostname())
}

// Probe sends one request and judges the response.
func (w *Watcher) Probe(ctx context.Context, p watcher.Probe) (vigil.Observation, error) {
	if err := watcher.CheckKind(p, vigil.KindHTTP); err != nil {
		return vigil.Observation{}, err
	}
	s, err := w.specs.get(p.WatchID, p.Predicate)
	if err != nil {
		return vigil.Observation{}, watcher.Permanent(fmt.Errorf("stored http predicate is invalid: %w", err))
	}
	obs, err := w.probe(ctx, s)
	if p.Final || err != nil || obs.Permanent || obs.Verdict == vigil.VerdictSatisfied || obs.Verdict == vigil.VerdictFailed {
		// The watch is about to settle (a stable watch that probes on
		// parses again).
		w.specs.forget(p.WatchID)
	}
	return obs, err
}

// drainMax is how much of an unread body is read away so that its
// connection can serve the next probe; past it, the connection is closed.
const drainMax = 16 << 10

// drainClose reads what is left of a body, up to drainMax, and closes it:
// a connection is kept alive only once its response is read to the end.
func drainClose(body io.ReadCloser) {
	_, _ = io.Copy(io.Discard, io.LimitReader(body, drainMax))
	body.Close()
}

// probe sends s's request and judges the answer.
func (w *Watcher) probe(ctx context.Context, s *spec) (vigil.Observation, error) {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	pol := &redirectPolicy{noFollow: s.noFollow}
	for k := range s.headers {
		pol.headers = append(pol.headers, k)
	}
	ctx = context.WithValue(ctx, policyKey{}, pol)

	var body io.Reader
	if s.body != "" {
		body = strings.NewReader(s.body)
	}
	req, err := http.NewRequestWithContext(ctx, s.method, s.url, body)
	if err != nil {
		return vigil.Observation{}, watcher.Permanent(fmt.Errorf("cannot build the request: %w", err))
	}
	req.Header.Set("User-Agent", userAgent)
	for k, v := range s.headers {
		if k == "Host" {
			req.Host = v
			continue
		}
		req.Header.Set(k, v)
	}
	resp, err := w.client.Do(req)
	if err != nil {
		return vigil.Observation{}, w.transportError(err, s)
	}
	defer drainClose(resp.Body)

	code := resp.StatusCode
	facts := map[string]any{"status": code}
	head := fmt.Sprintf("HTTP %d", code)
	if !s.status.accepts(code) {
		if code >= 500 {
			return vigil.Observation{Verdict: vigil.VerdictUnavailable, Summary: head, Reason: head, Facts: facts}, nil
		}
		if why, ok := couldNotTell[code]; ok {
			// The server answered about itself, not about the condition
			// watched (SPEC §1.1: a rate limit or a timeout could not
			// tell), so the answer is no evidence either way.
			reason := head + ", " + why
			if ra := resp.Header.Get("Retry-After"); ra != "" {
				ra = watcher.Clip(ra, maxRetryAfter)
				facts["retry_after"] = ra
				reason += " (Retry-After: " + ra + ")"
			}
			return vigil.Observation{Verdict: vigil.VerdictUnavailable, Summary: reason, Reason: reason, Facts: facts}, nil
		}
		return vigil.Observation{Verdict: vigil.VerdictPending, Summary: head + ", not an accepted status", Facts: facts}, nil
	}
	if len(s.done) == 0 && len(s.fail) == 0 {
		return vigil.Observation{Verdict: vigil.VerdictSatisfied, Summary: head, Facts: facts}, nil
	}

	decoded, err := decodeBody(resp)
	if err != nil {
		reason := fmt.Sprintf("%s: %s", head, err)
		return vigil.Observation{Verdict: vigil.VerdictUnavailable, Summary: reason, Reason: reason, Facts: facts}, nil
	}
	doc, err := io.ReadAll(io.LimitReader(decoded, s.maxBytes+1))
	if err != nil {
		return vigil.Observation{}, fmt.Errorf("%s: reading the body: %w", head, err)
	}
	if int64(len(doc)) > s.maxBytes {
		reason := fmt.Sprintf("%s: the body is larger than max_bytes (%d bytes)", head, s.maxBytes)
		return vigil.Observation{Verdict: vigil.VerdictUnavailable, Summary: reason, Reason: reason, Facts: facts}, nil
	}

	failEv := matcher.Evaluate(s.fail, doc)
	doneEv := matcher.Evaluate(s.done, doc)
	if len(s.fail) > 0 {
		facts["fail"] = failEv.Facts()
	}
	if len(s.done) > 0 {
		facts["done"] = doneEv.Facts()
	}
	var verdict vigil.Verdict
	var parts []string
	switch {
	case failEv.Matched:
		verdict = vigil.VerdictFailed
		parts = append(parts, failEv.Summary())
	case len(s.done) == 0:
		verdict = vigil.VerdictSatisfied
	case doneEv.Matched:
		verdict = vigil.VerdictSatisfied
		parts = append(parts, doneEv.Summary())
	default:
		verdict = vigil.VerdictPending
		parts = append(parts, doneEv.Summary())
	}
	if !doneEv.JSON { // the body is the same for both lists
		facts["json"] = false
		parts = []string{"the body is not JSON"}
	}
	summary := head
	if len(parts) > 0 {
		summary += "; " + strings.Join(parts, "; ")
	}
	return vigil.Observation{Verdict: verdict, Summary: watcher.Clip(summary, maxSummary), Facts: facts}, nil
}

const maxSummary = 512

// couldNotTell holds the 4xx statuses that are no answer about the
// watched condition, when the watch does not accept them: the server
// limited or timed out the request itself. Like a 5xx they are
// unavailable (retried with backoff, never evidence); any other status
// not accepted is a verified pending.
var couldNotTell = map[int]string{
	http.StatusRequestTimeout:  "the server timed out waiting for the request",
	http.StatusTooManyRequests: "rate limited",
}

// maxRetryAfter bounds the Retry-After header kept in the facts: seconds
// or an HTTP date need far less.
const maxRetryAfter = 64

// maxEncodings bounds the content codings one body may be wrapped in.
const maxEncodings = 4

// decodeBody returns the body as the server says it encoded it, decoded:
// the transport decodes gzip itself only when it asked for it, so a body
// the predicate's own Accept-Encoding asked for arrives as sent. The
// codings are undone last first; max_bytes bounds what is read of the
// result, so a small bomb cannot grow past it.
func decodeBody(resp *http.Response) (io.Reader, error) {
	var codings []string
	for _, v := range resp.Header.Values("Content-Encoding") {
		for _, c := range strings.Split(v, ",") {
			if c = strings.ToLower(strings.TrimSpace(c)); c != "" && c != "identity" {
				codings = append(codings, c)
			}
		}
	}
	if len(codings) > maxEncodings {
		return nil, fmt.Errorf("the body is encoded %d times over (Content-Encoding: %s); at most %d are read",
			len(codings), watcher.Clip(strings.Join(codings, ", "), 64), maxEncodings)
	}
	var r io.Reader = resp.Body
	for i := len(codings) - 1; i >= 0; i-- {
		var err error
		switch codings[i] {
		case "gzip", "x-gzip":
			r, err = gzip.NewReader(r)
		case "deflate":
			r, err = newDeflateReader(r)
		default:
			return nil, fmt.Errorf("the body is encoded as %s, which vigil cannot read: leave %s out of the Accept-Encoding header",
				watcher.Clip(codings[i], 32), watcher.Clip(codings[i], 32))
		}
		if errors.Is(err, io.EOF) {
			return strings.NewReader(""), nil // an empty body, whatever it is labelled
		}
		if err != nil {
			return nil, fmt.Errorf("the body is not valid %s: %w", codings[i], err)
		}
	}
	return r, nil
}

// newDeflateReader reads HTTP's "deflate": zlib-wrapped, as the standard
// says, or raw deflate, as some servers send it.
func newDeflateReader(r io.Reader) (io.Reader, error) {
	br := bufio.NewReader(r)
	head, err := br.Peek(2)
	if err != nil {
		return nil, err
	}
	// A zlib header: compression method 8, and the two bytes a multiple of 31.
	if head[0]&0x0f == 8 && (uint16(head[0])<<8|uint16(head[1]))%31 == 0 {
		return zlib.NewReader(br)
	}
	return flate.NewReader(br), nil
}

// transportError turns a failed request into an error for an unavailable
// observation: permanent for a refused address, and never quoting the URL,
// whose query may hold a secret.
func (w *Watcher) transportError(err error, s *spec) error {
	host := s.url
	if u, perr := url.Parse(s.url); perr == nil {
		host = u.Host
	}
	var refused *watcher.AddrRefusedError
	if errors.As(err, &refused) {
		return watcher.Permanent(fmt.Errorf("%s %s: %w", s.method, host, refused))
	}
	if errors.Is(err, errTooManyRedirects) {
		return fmt.Errorf("%s %s: stopped after %d redirects", s.method, host, MaxRedirects)
	}
	if errors.Is(err, errBodyAway) {
		return fmt.Errorf("%s %s: a 307 or 308 redirect to another host name was not followed: it would send that host the predicate's body, which stays with its own (point url at where it is answered)", s.method, host)
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	var dnsErr *net.DNSError
	switch {
	case errors.Is(err, context.DeadlineExceeded) || isTimeout(err):
		return fmt.Errorf("%s %s: no response within %s", s.method, host, vigil.FormatDuration(s.timeout))
	case errors.As(err, &dnsErr):
		if dnsErr.IsNotFound {
			return fmt.Errorf("%s %s: could not resolve %s: no such host", s.method, host, dnsErr.Name)
		}
		return fmt.Errorf("%s %s: could not resolve %s: %s", s.method, host, dnsErr.Name, dnsErr.Err)
	}
	var op *net.OpError
	if errors.As(err, &op) && op.Err != nil {
		err = op.Err
	}
	return fmt.Errorf("%s %s: %w", s.method, host, err)
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}
