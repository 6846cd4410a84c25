// Package webhook is the webhook push channel: it POSTs a settled watch's
// outcome as JSON, signed the Standard Webhooks way, and ships the helper
// a receiver written in Go uses to check the signature (Verify).
//
// Each request carries three headers:
//
//	webhook-id:        the outcome message's id, the same on every retry
//	webhook-timestamp: unix seconds when this attempt was made
//	webhook-signature: v1,<base64 HMAC-SHA256 of "id.timestamp.body">
//
// The key is the bytes a "whsec_<base64>" secret spells. While secrets are
// rotated the header holds one signature per secret, separated by spaces;
// a receiver accepts the request if any one of them verifies.
//
// One attempt is bounded by a timeout (10 s by default). A 2xx answer is
// delivered; 5xx, 408, 429 and a failure before the request was written
// (connection refused, DNS, a connection reset as it was written) are
// retried; any other answer is rejected; a
// failure after the request was written (a timeout waiting for the answer)
// is unknown, since the receiver may have acted on it. Errors name the
// failure, never the URL or the secret.
package webhook

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/vigil-run/vigil"
	"github.com/vigil-run/vigil/deliver"
	"github.com/vigil-run/vigil/internal/netguard"
)

// Header names of the Standard Webhooks convention.
const (
	HeaderID        = "webhook-id"
	HeaderTimestamp = "webhook-timestamp"
	HeaderSignature = "webhook-signature"
)

// Defaults.
const (
	DefaultTimeout = 10 * time.Second
	// DefaultTolerance is how far a timestamp may be from now for Verify.
	DefaultTolerance = 5 * time.Minute
	// maxResponse bounds how much of an answer is read.
	maxResponse = 64 << 10
)

// Config configures a Channel. Zero fields take defaults.
type Config struct {
	// Secrets are the daemon's own signing secrets ("whsec_…"), used for
	// watches that give none; several while rotating. Each signs.
	Secrets []string
	// Client sends the requests; nil means a client of its own (never
	// http.DefaultClient), which does not follow redirects.
	Client *http.Client
	// Timeout bounds one attempt (default DefaultTimeout).
	Timeout time.Duration
	// UserAgent is sent with each request.
	UserAgent string
	// DenyPrivate also keeps the channel's own client off loopback and
	// private addresses (deny_private); link-local and cloud metadata
	// addresses are always refused, as for http probes.
	DenyPrivate bool
}

// Channel is the webhook deliver.Channel.
type Channel struct {
	cfg  Config
	keys [][]byte
}

var _ deliver.Channel = (*Channel)(nil)

// New returns a webhook channel; an invalid daemon secret is an error
// that does not quote it.
func New(cfg Config) (*Channel, error) {
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultTimeout
	}
	if cfg.Client == nil {
		dialer := &net.Dialer{Timeout: DefaultTimeout, Control: netguard.Guard{DenyPrivate: cfg.DenyPrivate}.Control}
		cfg.Client = &http.Client{
			Transport: &http.Transport{DialContext: dialer.DialContext, MaxIdleConnsPerHost: 4, IdleConnTimeout: 90 * time.Second,
				TLSHandshakeTimeout: DefaultTimeout},
			CheckRedirect: func(*http.Request, []*http.Request) error {
				return http.ErrUseLastResponse
			},
		}
	}
	if cfg.UserAgent == "" {
		cfg.UserAgent = "vigil-webhook/1"
	}
	c := &Channel{cfg: cfg}
	for i, s := range cfg.Secrets {
		k, err := deliver.SecretKey(s)
		if err != nil {
			return nil, fmt.Errorf("webhook: daemon secret %d %v", i+1, err)
		}
		c.keys = append(c.keys, k)
	}
	return c, nil
}

// Send implements deliver.Channel: one signed POST.
func (c *Channel) Send(ctx context.Context, d *deliver.Delivery) (bool, error) {
	o := d.Options.Webhook
	if o == nil {
		return false, errors.New("no webhook in the delivery options")
	}
	keys := c.keys
	if o.Secret != "" {
		k, err := deliver.SecretKey(o.Secret)
		if err != nil {
			return false, fmt.Errorf("the watch's secret %v", err)
		}
		keys = [][]byte{k}
	}
	if len(keys) == 0 {
		return false, errors.New("no signing secret: the daemon has none and the watch gives none")
	}
	ctx, cancel := context.WithTimeout(ctx, c.cfg.Timeout)
	defer cancel()
	var wrote atomic.Bool
	ctx = httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{
		WroteRequest: func(httptrace.WroteRequestInfo) { wrote.Store(true) },
	})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, o.URL, bytes.NewReader(d.Payload))
	if err != nil {
		return false, errors.New("the webhook URL cannot be used")
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", c.cfg.UserAgent)
	SetHeaders(req.Header, keys, d.MessageID, d.Now, d.Payload)
	resp, err := c.cfg.Client.Do(req)
	var refused *netguard.AddrRefusedError
	if errors.As(err, &refused) {
		return false, errors.New("the webhook's address is refused: " + refused.Why)
	}
	if err != nil {
		reason := describe(err, c.cfg.Timeout)
		if wrote.Load() && !writeFailed(err) {
			return false, deliver.Unknown(fmt.Errorf("%s after the request was sent; it may have been received", reason))
		}
		return true, fmt.Errorf("%s before the request was sent", reason)
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxResponse))
	resp.Body.Close()
	retry, err := deliver.Classify(resp.StatusCode)
	if se := (*deliver.StatusError)(nil); retry && errors.As(err, &se) {
		// A 429 or 503 may say when to come back (Standard Webhooks:
		// to be taken into account): the next attempt waits for it.
		se.RetryAfter = deliver.RetryAfter(resp.Header.Get("Retry-After"), d.Now)
	}
	return retry, err
}

// writeFailed reports whether err is the connection's refusal of the
// request's bytes (reset, broken pipe): the request never reached the
// receiver whole, though WroteRequest was heard (net/http calls it once the
// request is in its buffer, before the buffer goes out).
func writeFailed(err error) bool {
	var oe *net.OpError
	return errors.As(err, &oe) && oe.Op == "write"
}

// describe names a transport failure without the URL (which may hold
// credentials or a token in its path).
func describe(err error, timeout time.Duration) string {
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	var ne net.Error
	var oe *net.OpError
	var de *net.DNSError
	switch {
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &ne) && ne.Timeout():
		return "timed out after " + vigil.FormatDuration(timeout)
	case errors.Is(err, context.Canceled):
		return "cancelled"
	case errors.As(err, &de):
		return "the host name did not resolve"
	case errors.As(err, &oe) && oe.Op == "dial":
		return "connection failed (" + syscallText(oe.Err) + ")"
	}
	return "the request failed (" + syscallText(err) + ")"
}

// syscallText keeps the last, address-free part of a network error.
func syscallText(err error) string {
	s := err.Error()
	if i := strings.LastIndex(s, ": "); i >= 0 {
		s = s[i+2:]
	}
	return s
}

// Sign returns the webhook-signature value for a message: one "v1,<sig>"
// per key, separated by spaces.
func Sign(keys [][]byte, id string, ts time.Time, body []byte) string {
	sigs := make([]string, len(keys))
	for i, k := range keys {
		sigs[i] = "v1," + signature(k, id, strconv.FormatInt(ts.Unix(), 10), body)
	}
	return strings.Join(sigs, " ")
}

// SetHeaders sets the three Standard Webhooks headers on h.
func SetHeaders(h http.Header, keys [][]byte, id string, ts time.Time, body []byte) {
	h.Set(HeaderID, id)
	h.Set(HeaderTimestamp, strconv.FormatInt(ts.Unix(), 10))
	h.Set(HeaderSignature, Sign(keys, id, ts, body))
}

func signature(key []byte, id, ts string, body []byte) string {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(id))
	m.Write([]byte{'.'})
	m.Write([]byte(ts))
	m.Write([]byte{'.'})
	m.Write(body)
	return base64.StdEncoding.EncodeToString(m.Sum(nil))
}

// Errors of Verify.
var (
	ErrMissingHeaders = errors.New("webhook: missing webhook-id, webhook-timestamp or webhook-signature")
	ErrTimestamp      = errors.New("webhook: timestamp is too old or too far in the future")
	ErrSignature      = errors.New("webhook: no signature matches")
)

// Verify checks a received webhook: the headers h, the raw body exactly as
// received, the receiver's clock now, and how far the timestamp may be
// from now (zero means DefaultTolerance, which also bounds replays). secret
// is the "whsec_…" secret shared with vigil. It returns nil when one of
// the signatures verifies.
func Verify(secret string, h http.Header, body []byte, now time.Time, tolerance time.Duration) error {
	key, err := deliver.SecretKey(secret)
	if err != nil {
		return fmt.Errorf("webhook: secret %w", err)
	}
	id, ts, sigs := h.Get(HeaderID), h.Get(HeaderTimestamp), h.Get(HeaderSignature)
	if id == "" || ts == "" || sigs == "" {
		return ErrMissingHeaders
	}
	if tolerance <= 0 {
		tolerance = DefaultTolerance
	}
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return ErrTimestamp
	}
	if d := now.Sub(time.Unix(sec, 0)); d > tolerance || d < -tolerance {
		return ErrTimestamp
	}
	want := []byte(signature(key, id, ts, body))
	for _, s := range strings.Fields(sigs) {
		v, sig, ok := strings.Cut(s, ",")
		if ok && v == "v1" && hmac.Equal([]byte(sig), want) {
			return nil
		}
	}
	return ErrSignature
}
