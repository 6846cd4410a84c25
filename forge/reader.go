package forge

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

	"golang.org/x/sync/singleflight"

	"github.com/vigil-run/vigil/internal/wire"
)

// Bounds of the Reader's cache and rate-limit handling.
const (
	// sweepEvery is how often (in probe time) the cache drops entries
	// nobody asked for in keepUnused.
	sweepEvery = 10 * time.Minute
	keepUnused = 30 * time.Minute
	// minBlock and maxBlock bound how long a rate limit blocks reads,
	// whatever the headers say (a reset in the past, clock skew, a
	// runaway Retry-After).
	minBlock = 30 * time.Second
	maxBlock = time.Hour
	// defaultBlock is the block of a rate limit that names no reset.
	defaultBlock = time.Minute
)

// ErrorKind sorts what went wrong with a forge read.
type ErrorKind int

// The kinds of forge errors. NotFound, Unauthorized and Forbidden are
// permanent: the watch cannot be observed as configured.
const (
	// KindUnavailable: the read could not be made or answered (network,
	// timeout, 5xx, an answer that makes no sense). Transient.
	KindUnavailable ErrorKind = iota
	// KindRateLimited: the token's rate limit is spent until Until.
	KindRateLimited
	// KindNotFound: 404, 410 or 422.
	KindNotFound
	// KindUnauthorized: 401, the token is missing or rejected.
	KindUnauthorized
	// KindForbidden: 403 that is not a rate limit.
	KindForbidden
	// KindNoCommit: GitHub's 422 "No commit found for SHA": the commit
	// is not in the repository, or not yet (it is still being pushed).
	// Transient; IsNotFound holds for it too.
	KindNoCommit
)

// Error is a failed forge read. Its message is a sentence that names the
// provider, what was read and, for permanent errors, what to fix; it
// never holds a token.
type Error struct {
	Provider Provider
	Kind     ErrorKind
	// Status is the HTTP status, 0 when no response came.
	Status int
	// Until is when a rate limit resets.
	Until time.Time
	// Detail is the forge's own message or the transport error.
	Detail string
	msg    string
}

// Error returns the sentence.
func (e *Error) Error() string {
	if e.msg != "" {
		return e.msg
	}
	s := fmt.Sprintf("%s: %s", e.Provider, e.Detail)
	if e.Kind == KindRateLimited {
		s = fmt.Sprintf("%s rate limit reached; reads resume at %s", e.Provider, formatTime(e.Until))
	}
	return s
}

// Permanent reports whether the error will not go away by itself: the
// object is not there, or the token cannot read it.
func (e *Error) Permanent() bool {
	return e.Kind == KindNotFound || e.Kind == KindUnauthorized || e.Kind == KindForbidden
}

// IsPermanent reports whether err is a permanent forge error.
func IsPermanent(err error) bool {
	var fe *Error
	return errors.As(err, &fe) && fe.Permanent()
}

// IsNotFound reports whether err is a forge's "not found", a commit
// GitHub does not know included.
func IsNotFound(err error) bool {
	var fe *Error
	return errors.As(err, &fe) && (fe.Kind == KindNotFound || fe.Kind == KindNoCommit)
}

// IsNoCommit reports whether err is GitHub's "No commit found for SHA":
// the commit is not in the repository, or is not there yet.
func IsNoCommit(err error) bool {
	var fe *Error
	return errors.As(err, &fe) && fe.Kind == KindNoCommit
}

func formatTime(t time.Time) string { return t.UTC().Format("2006-01-02 15:04:05 UTC") }

// Reader makes one provider's GET requests through a cache. A read of a
// URL younger than the caller's freshness window is answered from the
// cache, a failure included; concurrent misses of one URL share one
// request; a stale entry is revalidated with If-None-Match and a 304
// reuses its body; and a rate-limit answer blocks every read of the
// provider until the reset. It is safe for concurrent use.
type Reader struct {
	provider  Provider
	client    *http.Client
	authorize func(*http.Request)
	redact    func(string) string
	sf        singleflight.Group

	mu       sync.Mutex
	cache    map[string]*entry
	until    time.Time // rate-limited until
	blockErr *Error
	swept    time.Time

	// life is the Set's: it ends the shared reads in flight when the Set
	// is closed (Set.Close), as no caller's context does.
	life context.Context

	// missHook, when set (by tests), is called on a cache miss once the
	// read has joined or started the shared request, before it waits.
	missHook func(key string)
}

type entry struct {
	at    time.Time // when it was fetched or revalidated
	used  time.Time
	body  []byte
	next  string
	total int
	etag  string
	err   *Error // a held failure
	// revalidated is set once a 304 has answered for body: next is then
	// the one of the 200, which a 304 (GitHub's has no Link) does not
	// update.
	revalidated bool
}

// Response is one page a read returned.
type Response struct {
	Body []byte
	// Next is the URL of the next page (Link rel="next"), if any.
	Next string
	// Total is the X-Total-Count header (Gitea's count of a whole
	// listing), -1 without one.
	Total int
	// revalidated says Body was confirmed by a 304, which on GitHub
	// carries no Link header: Next is the one the body came with, and a
	// next page that appeared since is not in it.
	revalidated bool
	// at is when Body was read from the forge (fetched or revalidated),
	// in the time of the caller that read it: a cached answer's is the
	// read's it repeats.
	at time.Time
}

// request is what every read carries: the caller's context, the time the
// caller believes it is, and how old a cached answer may be. read, when
// set, gathers the latest time an answer the caller got was read from
// the forge (see Report.Read).
type request struct {
	ctx    context.Context
	now    time.Time
	maxAge time.Duration
	read   *time.Time
}

// saw records in rq.read that an answer read from the forge at at was
// used.
func (rq request) saw(at time.Time) {
	if rq.read != nil && at.After(*rq.read) {
		*rq.read = at
	}
}

func newReader(life context.Context, p Provider, hc *http.Client, authorize func(*http.Request), redact func(string) string) *Reader {
	return &Reader{life: life, provider: p, client: hc, authorize: authorize, redact: redact, cache: make(map[string]*entry)}
}

func (e *entry) fresh(rq request) bool { return rq.now.Before(e.at.Add(rq.maxAge)) }

// get reads rawURL with the Accept header accept, and records in rq when
// the answer was read from the forge.
func (r *Reader) get(rq request, rawURL, accept string) (*Response, error) {
	resp, err := r.getCached(rq, rawURL, accept)
	if err == nil {
		rq.saw(resp.at)
	}
	return resp, err
}

func (r *Reader) getCached(rq request, rawURL, accept string) (*Response, error) {
	key := accept + " " + rawURL
	r.mu.Lock()
	if rq.now.Before(r.until) {
		err := r.blockErr
		r.mu.Unlock()
		return nil, err
	}
	if e := r.cache[key]; e != nil && e.fresh(rq) {
		e.used = rq.now
		resp, err := e.result()
		r.mu.Unlock()
		return resp, err
	}
	r.sweepLocked(rq.now)
	r.mu.Unlock()

	ch := r.sf.DoChan(key, func() (any, error) {
		// Every caller that misses key while the request is in flight
		// shares it, so it runs on no caller's context: one giving up (its
		// probe's timeout, its watch cancelled) must not fail the others
		// that joined, whose contexts are live. RequestTimeout bounds it
		// whoever waits; each caller stops waiting on its own context.
		ctx, cancel := context.WithTimeout(r.life, RequestTimeout)
		defer cancel()
		shared := rq
		shared.ctx = ctx
		return r.fetch(shared, key, rawURL, accept)
	})
	if r.missHook != nil {
		r.missHook(key)
	}
	select {
	case res := <-ch:
		if res.Err != nil {
			return nil, res.Err
		}
		return res.Val.(*Response), nil
	case <-rq.ctx.Done():
		return nil, rq.ctx.Err()
	}
}

func (e *entry) result() (*Response, error) {
	if e.err != nil {
		return nil, e.err
	}
	return &Response{Body: e.body, Next: e.next, Total: e.total, revalidated: e.revalidated, at: e.at}, nil
}

func (r *Reader) sweepLocked(now time.Time) {
	if now.Sub(r.swept) < sweepEvery {
		return
	}
	r.swept = now
	for k, e := range r.cache {
		if now.Sub(e.used) > keepUnused {
			delete(r.cache, k)
		}
	}
}

// fetch makes the request (once per key at a time) and records what came
// back. rq.ctx is the shared request's own, detached from its callers' and
// bounded by RequestTimeout: when it ends, no response came in time, and
// that failure is held like any other.
func (r *Reader) fetch(rq request, key, rawURL, accept string) (*Response, error) {
	r.mu.Lock()
	if rq.now.Before(r.until) {
		err := r.blockErr
		r.mu.Unlock()
		return nil, err
	}
	old := r.cache[key]
	if old != nil && old.fresh(rq) { // answered while this caller waited
		old.used = rq.now
		resp, err := old.result()
		r.mu.Unlock()
		return resp, err
	}
	var etag string
	var cached *entry
	if old != nil && old.err == nil && old.etag != "" {
		etag, cached = old.etag, old
	}
	r.mu.Unlock()

	req, err := http.NewRequestWithContext(rq.ctx, http.MethodGet, rawURL, nil)
	if err != nil {
		return nil, r.hold(rq, key, &Error{Provider: r.provider, Kind: KindUnavailable, Detail: "cannot build the request"})
	}
	req.Header.Set("Accept", accept)
	req.Header.Set("User-Agent", userAgent)
	r.authorize(req)
	if etag != "" {
		req.Header.Set("If-None-Match", etag)
	}
	resp, err := r.client.Do(req)
	if err != nil {
		return nil, r.hold(rq, key, &Error{Provider: r.provider, Kind: KindUnavailable, Detail: r.redact(r.transportDetail(err))})
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, MaxBody+1))
	if err != nil {
		return nil, r.hold(rq, key, &Error{Provider: r.provider, Kind: KindUnavailable, Status: resp.StatusCode,
			Detail: fmt.Sprintf("HTTP %d, then the body broke off: %s", resp.StatusCode, r.redact(transportDetail(err)))})
	}
	if len(body) > MaxBody {
		return nil, r.hold(rq, key, &Error{Provider: r.provider, Kind: KindUnavailable, Status: resp.StatusCode,
			Detail: fmt.Sprintf("the response is larger than %d MiB", MaxBody>>20)})
	}

	switch code := resp.StatusCode; {
	case code == http.StatusNotModified && cached != nil:
		r.mu.Lock()
		defer r.mu.Unlock()
		cached.at, cached.used, cached.revalidated = rq.now, rq.now, true
		if n := nextLink(resp.Header); n != "" {
			cached.next = n
		}
		if n := totalCount(resp.Header); n >= 0 {
			cached.total = n
		}
		r.cache[key] = cached
		return &Response{Body: cached.body, Next: cached.next, Total: cached.total, revalidated: true, at: cached.at}, nil
	case code >= 200 && code < 300:
		e := &entry{at: rq.now, used: rq.now, body: body, next: nextLink(resp.Header), total: totalCount(resp.Header), etag: resp.Header.Get("ETag")}
		r.mu.Lock()
		r.cache[key] = e
		r.mu.Unlock()
		return &Response{Body: e.body, Next: e.next, Total: e.total, at: e.at}, nil
	}
	if until, limited := rateLimit(resp, body, rq.now); limited {
		fe := &Error{Provider: r.provider, Kind: KindRateLimited, Status: resp.StatusCode, Until: until, Detail: r.redact(apiMessage(body))}
		r.mu.Lock()
		if until.After(r.until) {
			r.until, r.blockErr = until, fe
		}
		r.mu.Unlock()
		return nil, fe
	}
	return nil, r.hold(rq, key, r.statusError(resp.StatusCode, body))
}

// post sends a JSON query to rawURL past the cache (GitHub's GraphQL,
// asked once per token) and returns the answer. A rate limit answered
// blocks the provider as a read's does, and one in force answers
// without a request.
func (r *Reader) post(rq request, rawURL string, query []byte) (*Response, error) {
	r.mu.Lock()
	if rq.now.Before(r.until) {
		err := r.blockErr
		r.mu.Unlock()
		return nil, err
	}
	r.mu.Unlock()
	req, err := http.NewRequestWithContext(rq.ctx, http.MethodPost, rawURL, bytes.NewReader(query))
	if err != nil {
		return nil, &Error{Provider: r.provider, Kind: KindUnavailable, Detail: "cannot build the request"}
	}
	req.Header.Set("Accept", acceptJSON)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", userAgent)
	r.authorize(req)
	resp, err := r.client.Do(req)
	if err != nil {
		if rq.ctx.Err() != nil {
			return nil, rq.ctx.Err()
		}
		return nil, &Error{Provider: r.provider, Kind: KindUnavailable, Detail: r.redact(r.transportDetail(err))}
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, MaxBody+1))
	switch {
	case err != nil && rq.ctx.Err() != nil:
		return nil, rq.ctx.Err()
	case err != nil:
		return nil, &Error{Provider: r.provider, Kind: KindUnavailable, Status: resp.StatusCode,
			Detail: fmt.Sprintf("HTTP %d, then the body broke off: %s", resp.StatusCode, r.redact(transportDetail(err)))}
	case len(body) > MaxBody:
		return nil, &Error{Provider: r.provider, Kind: KindUnavailable, Status: resp.StatusCode,
			Detail: fmt.Sprintf("the response is larger than %d MiB", MaxBody>>20)}
	case resp.StatusCode >= 200 && resp.StatusCode < 300:
		return &Response{Body: body, Total: -1}, nil
	}
	if until, limited := rateLimit(resp, body, rq.now); limited {
		fe := &Error{Provider: r.provider, Kind: KindRateLimited, Status: resp.StatusCode, Until: until, Detail: r.redact(apiMessage(body))}
		r.mu.Lock()
		if until.After(r.until) {
			r.until, r.blockErr = until, fe
		}
		r.mu.Unlock()
		return nil, fe
	}
	return nil, r.statusError(resp.StatusCode, body)
}

// hold records a failed read so that callers within the window get it
// too, and returns it.
func (r *Reader) hold(rq request, key string, fe *Error) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.cache[key] = &entry{at: rq.now, used: rq.now, err: fe}
	return fe
}

func (r *Reader) statusError(code int, body []byte) *Error {
	fe := &Error{Provider: r.provider, Status: code, Detail: r.redact(apiMessage(body))}
	switch {
	case code == http.StatusUnauthorized:
		fe.Kind = KindUnauthorized
	case code == http.StatusForbidden:
		fe.Kind = KindForbidden
	case code == http.StatusUnprocessableEntity && strings.HasPrefix(fe.Detail, "No commit found"):
		fe.Kind = KindNoCommit
	case code == http.StatusNotFound || code == http.StatusGone || code == http.StatusUnprocessableEntity:
		fe.Kind = KindNotFound
	default:
		fe.Kind = KindUnavailable
		if fe.Detail == "" {
			fe.Detail = fmt.Sprintf("HTTP %d", code)
		} else {
			fe.Detail = fmt.Sprintf("HTTP %d: %s", code, fe.Detail)
		}
	}
	return fe
}

// rateLimit reports whether a response says the token's rate limit is
// spent, and until when. GitHub answers 403 or 429 with
// X-RateLimit-Remaining: 0 and X-RateLimit-Reset (epoch seconds), or
// Retry-After for its secondary limits; GitLab answers 429 with
// RateLimit-Remaining, RateLimit-Reset and Retry-After.
func rateLimit(resp *http.Response, body []byte, now time.Time) (time.Time, bool) {
	h := resp.Header
	remaining := h.Get("X-RateLimit-Remaining")
	reset := h.Get("X-RateLimit-Reset")
	if remaining == "" {
		remaining, reset = h.Get("RateLimit-Remaining"), h.Get("RateLimit-Reset")
	}
	retryAfter := h.Get("Retry-After")
	switch resp.StatusCode {
	case http.StatusTooManyRequests:
	case http.StatusForbidden:
		if remaining != "0" && retryAfter == "" && !bytes.Contains(bytes.ToLower(body), []byte("rate limit")) {
			return time.Time{}, false
		}
	default:
		return time.Time{}, false
	}
	until := now.Add(defaultBlock)
	if d, ok := wire.ParseRetryAfter(retryAfter, now); ok {
		until = now.Add(d)
	} else if n, err := strconv.ParseInt(strings.TrimSpace(reset), 10, 64); err == nil && remaining == "0" {
		until = time.Unix(n, 0).UTC()
	}
	if lo := now.Add(minBlock); until.Before(lo) {
		until = lo
	}
	if hi := now.Add(maxBlock); until.After(hi) {
		until = hi
	}
	return until, true
}

// nextLink returns the rel="next" URL of a Link header.
func nextLink(h http.Header) string {
	for _, v := range h.Values("Link") {
		for _, part := range strings.Split(v, ",") {
			target, params, ok := strings.Cut(strings.TrimSpace(part), ";")
			if !ok || !strings.HasPrefix(target, "<") || !strings.HasSuffix(target, ">") {
				continue
			}
			for _, p := range strings.Split(params, ";") {
				k, v, _ := strings.Cut(strings.TrimSpace(p), "=")
				if strings.EqualFold(k, "rel") && strings.Contains(" "+strings.Trim(v, `"`)+" ", " next ") {
					return target[1 : len(target)-1]
				}
			}
		}
	}
	return ""
}

// totalCount reads X-Total-Count, -1 when absent or not a count.
func totalCount(h http.Header) int {
	v := strings.TrimSpace(h.Get("X-Total-Count"))
	if v == "" {
		return -1
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		return -1
	}
	return n
}

// apiMessage returns the forge's own explanation from an error body:
// GitHub's and Gitea's "message", GitLab's "message" or "error".
func apiMessage(body []byte) string {
	var m struct {
		Message json.RawMessage `json:"message"`
		Error   string          `json:"error"`
	}
	if json.Unmarshal(body, &m) != nil {
		return ""
	}
	var s string
	if json.Unmarshal(m.Message, &s) != nil {
		s = string(m.Message) // GitLab sometimes sends an object
	}
	if s == "" {
		s = m.Error
	}
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > 200 {
		s = s[:200] + "…"
	}
	return strings.ToValidUTF8(s, "\uFFFD")
}

// transportDetail describes a failed request without its URL; a
// redirect refused (see sameOrigin) names the setting to change.
func (r *Reader) transportDetail(err error) string {
	var re *redirectError
	if errors.As(err, &re) {
		return re.Error() + ": set " + URLSetting(r.provider) + " to the URL the forge redirects to"
	}
	return transportDetail(err)
}

// transportDetail describes a failed request without its URL.
func transportDetail(err error) string {
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	var ne net.Error
	var dnsErr *net.DNSError
	switch {
	case errors.Is(err, context.DeadlineExceeded) || errors.As(err, &ne) && ne.Timeout():
		return fmt.Sprintf("no response within %s", RequestTimeout)
	case errors.As(err, &dnsErr):
		return fmt.Sprintf("could not resolve %s", dnsErr.Name)
	}
	var op *net.OpError
	if errors.As(err, &op) && op.Err != nil {
		return op.Op + ": " + op.Err.Error()
	}
	return err.Error()
}
