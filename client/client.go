// Package client implements vigil.Service over HTTP, talking to a vigil
// daemon's API (package httpapi). The CLI and the stdio MCP proxy use it;
// so may any Go program. It shares the routes, header names and error
// statuses with the server through internal/wire, and imports no server
// package.
//
// Errors come back as *vigil.Error with the daemon's code, message and
// field, so errors.Is(err, vigil.ErrNotFound) works across the wire. A
// daemon that cannot be reached is an error with code unavailable whose
// message says where the client looked. An answer that said when to call
// again (Retry-After) carries the wait: see RetryAfter. The bearer token
// never appears in an error.
package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/vigil-run/vigil"
	"github.com/vigil-run/vigil/internal/wire"
)

// Timeouts and bounds of the client; each lives here only.
const (
	// requestTimeout bounds a call that does not long-poll, and the wait
	// for an event stream's first response.
	requestTimeout = 30 * time.Second
	// waitMargin is added to a long-poll's own timeout for its deadline.
	waitMargin = 10 * time.Second
	// dialTimeout bounds connecting to the daemon.
	dialTimeout = 5 * time.Second
	// maxResponseBytes bounds a response body the client reads.
	maxResponseBytes = 32 << 20
	// maxErrorBytes bounds an error body the client reads.
	maxErrorBytes = 64 << 10
	// maxRetryAfter bounds the wait RetryAfter reports, whatever the
	// header says.
	maxRetryAfter = 24 * time.Hour
	// maxCheckWait bounds the daemon's max_wait a Check believes.
	maxCheckWait = 24 * time.Hour
	// checkWaitFor is how long a Check believes the daemon's max_wait
	// without asking again (a daemon restarted with another max_wait is
	// heard of within it, or at once after a check that failed).
	checkWaitFor = time.Minute
)

// Options configure a Client. A nil *Options means the defaults.
type Options struct {
	// HTTPClient makes the requests. Nil means a private client with a
	// bounded dial and TLS handshake that follows no redirects (never
	// http.DefaultClient). Each call sets its own deadline, so the
	// client's Timeout should be zero: event streams last.
	HTTPClient *http.Client
}

// Client is a vigil.Service over HTTP. It is safe for concurrent use.
type Client struct {
	base  string // scheme://host[:port][/prefix], no trailing slash
	addr  string // the daemon's address as error messages show it
	token string
	hc    *http.Client
	// now is the clock checkWait's age is read on (time.Now).
	now func() time.Time

	// mu guards the daemon's max_wait as last asked (checkWait, zero:
	// not known) and when it was asked.
	mu          sync.Mutex
	checkWait   time.Duration
	checkWaitAt time.Time
}

var _ vigil.Service = (*Client)(nil)

// New returns a client of the daemon at addr, which is host:port (":7474"
// means 127.0.0.1:7474) or an http:// or https:// URL, possibly with a
// path prefix. token is the bearer token sent with every call.
func New(addr, token string, opts *Options) (*Client, error) {
	base, display, err := parseAddr(addr)
	if err != nil {
		return nil, err
	}
	if !validHeaderValue(token) || strings.ContainsAny(token, " \t") {
		return nil, errors.New("vigil client: the token holds spaces or control characters")
	}
	c := &Client{base: base, addr: display, token: token, now: time.Now}
	if opts != nil && opts.HTTPClient != nil {
		c.hc = opts.HTTPClient
	} else {
		c.hc = defaultHTTPClient()
	}
	return c, nil
}

// parseAddr returns the base URL and the display form of addr.
func parseAddr(addr string) (base, display string, err error) {
	addr = strings.TrimSpace(addr)
	if addr == "" {
		return "", "", errors.New("vigil client: no daemon address given (host:port or an http:// URL)")
	}
	if strings.Contains(addr, "://") {
		u, err := url.Parse(addr)
		if err != nil {
			// url.Error quotes the whole address, credentials and all,
			// and its cause may quote a part of them.
			shown := withoutUserinfo(addr)
			if shown != addr {
				return "", "", fmt.Errorf("vigil client: daemon address %q is not a URL, and must not hold credentials; pass the token on its own", shown)
			}
			var ue *url.Error
			if errors.As(err, &ue) {
				err = ue.Err
			}
			return "", "", fmt.Errorf("vigil client: daemon address %q is not a URL: %v", addr, err)
		}
		if u.Scheme != "http" && u.Scheme != "https" {
			return "", "", fmt.Errorf("vigil client: daemon address %q must use http:// or https://", u.Scheme+"://"+u.Host)
		}
		if u.User != nil {
			return "", "", errors.New("vigil client: the daemon address must not hold credentials; pass the token on its own")
		}
		if u.Host == "" {
			return "", "", fmt.Errorf("vigil client: daemon address %q has no host", addr)
		}
		if u.RawQuery != "" || u.Fragment != "" {
			return "", "", fmt.Errorf("vigil client: daemon address %q must not have a query or fragment", u.Scheme+"://"+u.Host+u.Path)
		}
		base = u.Scheme + "://" + u.Host + strings.TrimRight(u.EscapedPath(), "/")
		return base, base, nil
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", "", fmt.Errorf("vigil client: daemon address %q is neither host:port nor an http:// URL", withoutUserinfo(addr))
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		return "", "", fmt.Errorf("vigil client: daemon address %q has no valid port", addr)
	}
	if host == "" {
		host = "127.0.0.1"
	}
	hp := net.JoinHostPort(host, port)
	return "http://" + hp, hp, nil
}

// withoutUserinfo is addr for an error message: the userinfo of its
// authority (user:password, a token, before an "@") is left out.
func withoutUserinfo(addr string) string {
	scheme, rest := "", addr
	if i := strings.Index(addr, "://"); i >= 0 {
		scheme, rest = addr[:i+3], addr[i+3:]
	}
	authority := rest
	if i := strings.IndexAny(rest, "/?#"); i >= 0 {
		authority = rest[:i]
	}
	i := strings.LastIndexByte(authority, '@')
	if i < 0 {
		return addr
	}
	return scheme + vigil.Redacted + rest[i:]
}

// defaultHTTPClient is the private client used when Options gives none.
func defaultHTTPClient() *http.Client {
	return &http.Client{
		Transport: &http.Transport{
			Proxy:                 http.ProxyFromEnvironment,
			DialContext:           (&net.Dialer{Timeout: dialTimeout, KeepAlive: 30 * time.Second}).DialContext,
			ForceAttemptHTTP2:     true,
			MaxIdleConns:          16,
			MaxIdleConnsPerHost:   8,
			IdleConnTimeout:       90 * time.Second,
			TLSHandshakeTimeout:   10 * time.Second,
			ExpectContinueTimeout: time.Second,
		},
		// A daemon never redirects; following one would carry the token
		// somewhere else.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

// CloseIdleConnections closes the idle connections of the client's
// transport.
func (c *Client) CloseIdleConnections() { c.hc.CloseIdleConnections() }

// call is one request to the daemon.
type call struct {
	method string
	path   string // escaped, from the API root: "/v1/watches/ID"
	query  url.Values
	header http.Header
	body   any
	// timeout bounds the whole call; zero means requestTimeout.
	timeout time.Duration
	// out receives a JSON response; nil ignores the body.
	out any
}

// do runs c and returns the response header.
func (c *Client) do(ctx context.Context, cl call) (http.Header, error) {
	timeout := cl.timeout
	if timeout <= 0 {
		timeout = requestTimeout
	}
	rctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := c.newRequest(rctx, cl)
	if err != nil {
		return nil, err
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return nil, c.transportError(ctx, cl, timeout, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 300 {
		return nil, c.responseError(resp)
	}
	if cl.out != nil && resp.StatusCode != http.StatusNoContent {
		b, err := io.ReadAll(io.LimitReader(resp.Body, maxResponseBytes+1))
		if err != nil {
			return nil, c.transportError(ctx, cl, timeout, err)
		}
		if len(b) > maxResponseBytes {
			return nil, vigil.Errorf(vigil.CodeInternal, "vigil daemon at %s sent a response larger than %d bytes", c.addr, maxResponseBytes)
		}
		if err := decode(b, cl.out); err != nil {
			return nil, &vigil.Error{Code: vigil.CodeInternal, Err: err,
				Message: fmt.Sprintf("vigil daemon at %s sent a response that does not parse: %v", c.addr, err)}
		}
	}
	return resp.Header, nil
}

// decode decodes the JSON response b into out. An out with a decoder of
// its own (a watch, a batch's answer) gets b directly: encoding/json would
// first check the whole of b and then find the end of its value again
// before calling it, which took more CPU than the decoding itself. Those
// decoders read only what encoding/json reads the same, and hand anything
// else (invalid JSON included) to encoding/json, so the answer and the
// errors are the same.
func decode(b []byte, out any) error {
	if u, ok := out.(json.Unmarshaler); ok {
		return u.UnmarshalJSON(b)
	}
	return json.Unmarshal(b, out)
}

// newRequest builds the HTTP request of cl.
func (c *Client) newRequest(ctx context.Context, cl call) (*http.Request, error) {
	u := c.base + cl.path
	if len(cl.query) > 0 {
		u += "?" + cl.query.Encode()
	}
	var body io.Reader
	if cl.body != nil {
		b, err := json.Marshal(cl.body)
		if err != nil {
			return nil, &vigil.Error{Code: vigil.CodeInvalidRequest, Message: fmt.Sprintf("the request does not encode as JSON: %v", err), Err: err}
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, cl.method, u, body)
	if err != nil {
		return nil, &vigil.Error{Code: vigil.CodeInvalidRequest, Message: fmt.Sprintf("cannot build the request to %s", c.addr), Err: err}
	}
	for k, vs := range cl.header {
		req.Header[k] = vs
	}
	if cl.body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/json")
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	return req, nil
}

// transportError explains a request that got no HTTP answer. A caller's
// own cancellation is returned as such; everything else is unavailable.
func (c *Client) transportError(ctx context.Context, cl call, timeout time.Duration, err error) error {
	if ctx.Err() != nil {
		path := cl.path
		if strings.HasPrefix(path, wire.CompletePrefix) {
			// The completion token is the secret of its watch.
			path = wire.CompletePrefix + vigil.Redacted
		}
		return fmt.Errorf("vigil: %s %s: %w", cl.method, path, context.Cause(ctx))
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return &vigil.Error{Code: vigil.CodeUnavailable, Err: err,
			Message: fmt.Sprintf("vigil daemon at %s did not answer within %s", c.addr, timeout)}
	}
	cause := err
	var ue *url.Error
	if errors.As(err, &ue) {
		cause = ue.Err
	}
	return &vigil.Error{Code: vigil.CodeUnavailable, Err: err,
		Message: c.redact(fmt.Sprintf("vigil daemon not reachable at %s: %v", c.addr, cause))}
}

// responseError maps an error response back to the *vigil.Error the
// daemon meant; a body that is not vigil's error shape (a proxy's page) is
// mapped by its status.
func (c *Client) responseError(resp *http.Response) error {
	b, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBytes))
	var body struct {
		Error *struct {
			Code    vigil.Code `json:"code"`
			Message string     `json:"message"`
			Field   string     `json:"field"`
		} `json:"error"`
	}
	var e *vigil.Error
	if json.Unmarshal(b, &body) == nil && body.Error != nil && body.Error.Code != "" {
		e = &vigil.Error{Code: body.Error.Code, Message: c.redact(body.Error.Message), Field: body.Error.Field}
	} else {
		e = &vigil.Error{Code: codeForStatus(resp.StatusCode),
			Message: fmt.Sprintf("vigil daemon at %s answered %s", c.addr, resp.Status)}
	}
	if d, ok := wire.ParseRetryAfter(resp.Header.Get("Retry-After"), time.Now()); ok {
		// A proxy's date or a wild number: bounded.
		e.Err = retryAfterError(min(d, maxRetryAfter))
	}
	return e
}

// retryAfterError is the cause of an error answered with Retry-After: how
// long the daemon asked the caller to wait before calling again.
type retryAfterError time.Duration

func (d retryAfterError) Error() string {
	return fmt.Sprintf("the daemon asked to be called again in %s", time.Duration(d))
}

// RetryAfter returns how long the daemon asked to wait before calling
// again, from the Retry-After header of the answer err came from (a 429
// rate_limited, a 503 unavailable while it starts), and whether it said.
func RetryAfter(err error) (time.Duration, bool) {
	var d retryAfterError
	if errors.As(err, &d) {
		return time.Duration(d), true
	}
	return 0, false
}

// generic lists, for each status, the code to assume when a response
// carries no vigil error body; wire.StatusOf is the table.
var generic = []vigil.Code{
	vigil.CodeInvalidRequest, vigil.CodeUnauthorized, vigil.CodeForbidden, vigil.CodeNotFound,
	vigil.CodeMethodNotAllowed, vigil.CodeConflict,
	vigil.CodePayloadTooLarge, vigil.CodeUnsupportedMedia, vigil.CodeRateLimited,
	vigil.CodeUnavailable, vigil.CodeStorageFull, vigil.CodeInternal,
}

// codeForStatus returns the code for an HTTP status that came without a
// vigil error body.
func codeForStatus(status int) vigil.Code {
	switch status {
	case http.StatusBadGateway, http.StatusGatewayTimeout:
		return vigil.CodeUnavailable
	}
	for _, code := range generic {
		if wire.StatusOf(code) == status {
			return code
		}
	}
	if status >= 400 && status < 500 {
		return vigil.CodeInvalidRequest
	}
	return vigil.CodeInternal
}

// redact removes the token from s.
func (c *Client) redact(s string) string {
	if c.token == "" {
		return s
	}
	return strings.ReplaceAll(s, c.token, "[redacted]")
}

// validHeaderValue reports whether s may be sent as a header value.
func validHeaderValue(s string) bool {
	for i := 0; i < len(s); i++ {
		if b := s[i]; b < 0x20 && b != '\t' || b == 0x7f {
			return false
		}
	}
	return true
}

// seconds formats d as the API's duration parameters expect ("60s", "1.5s").
func seconds(d time.Duration) string {
	return strconv.FormatFloat(max(d, 0).Seconds(), 'f', -1, 64) + "s"
}

// DaemonInfo is what GET /v1/daemon says about the daemon.
type DaemonInfo struct {
	// Store is the kind of store: "sqlite" or "postgres".
	Store string `json:"store"`
	// Replica is the daemon's id among those on one database: host:pid.
	Replica string `json:"replica"`
	// Role is "active" (it serves), "starting", or "stopping" once a
	// shutdown has begun.
	Role string `json:"role"`
	// Shards are the shards this replica holds, on PostgreSQL (it
	// schedules and delivers their watches), of ShardCount.
	Shards     []int `json:"shards,omitempty"`
	ShardCount int   `json:"shard_count,omitempty"`
	// MaxWait is how long the daemon holds a long-poll or a check for
	// its probe, as a duration ("60s"); empty from a daemon that does
	// not say. Check bounds its wait by it.
	MaxWait string `json:"max_wait,omitempty"`
	// Keys are the fingerprints of the daemon's signing keys, given to
	// the admin token only: every replica on one database shows the same.
	Keys *KeyFingerprints `json:"keys,omitempty"`
}

// KeyFingerprints name a daemon's signing keys without showing them: a
// short digest of each line of its webhook.secret, one of its link.key,
// and those of the signing settings of its configuration.
type KeyFingerprints = wire.KeyFingerprints

// SettingsFingerprints name a daemon's signing settings without showing
// them: a digest of its webhook_secrets, of its webhooks and of its
// public_url.
type SettingsFingerprints = wire.SettingsFingerprints

// Daemon returns what the daemon says about itself (GET /v1/daemon).
func (c *Client) Daemon(ctx context.Context) (DaemonInfo, error) {
	var out DaemonInfo
	_, err := c.do(ctx, call{method: http.MethodGet, path: "/v1/daemon", out: &out})
	return out, err
}
