// Package deliver pushes a settled watch's outcome to the push channels a
// watch (or its recipient) asked for: a webhook, a command, an email. The
// mailbox is not a push channel: its message commits with the settlement
// (SPEC §5); everything here happens after that commit.
//
// The package holds the contract every channel implements (Channel: one
// attempt, answering retry or not), the one classifier of HTTP statuses
// (Classify), the retry ladder, the delivery options a registration may
// carry (Policy.Canonicalize validates them; Redact hides their secrets),
// and the Dispatcher, the component that runs deliveries and records what
// became of each as a receipt:
//
//	sending → delivered | undeliverable | unknown
//	sending → retrying → sending → …
//
// A receipt is written "sending" BEFORE each attempt leaves, so a crash
// mid-send reads back as "unknown" at the next start; unknown is never
// resent unless the watch opted in with retry_unknown. Channels live in
// their own packages (deliver/webhook, deliver/command, deliver/email) and
// are wired explicitly by the daemon. See docs/delivery.md.
package deliver

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/vigil-run/vigil"
)

// Channel names, as receipts and the deliver options spell them.
const (
	ChannelWebhook = "webhook"
	ChannelCommand = "command"
	ChannelEmail   = "email"
	// ChannelResume starts a new turn in a saved agent session (an exec
	// delivery, like ChannelCommand).
	ChannelResume = "resume"
)

// Channel is one push integration. Send makes ONE attempt and says whether
// a failure is worth retrying (a 5xx, a connection refused before anything
// was sent). A failure that may have landed (a timeout after the request
// was sent) is returned wrapped by Unknown; any other failure is a
// rejection. Errors must never hold a secret or a URL's credentials.
type Channel interface {
	Send(ctx context.Context, d *Delivery) (retry bool, err error)
}

// A Waiter is a Channel whose attempts may wait for their turn before
// they start (a resume waits while another turn of its session runs).
// The dispatcher calls Wait before it writes the receipt that starts the
// attempt, so a delivery that waits has no receipt "sending" (which a
// crash would leave unknown, never made) until its turn has come, and
// holds what Wait returned until Send has returned. Wait returns an error
// only when ctx ends or d.Stopping closes first: nothing is written then,
// and the next start makes the attempt.
type Waiter interface {
	Wait(ctx context.Context, d *Delivery) (release func(), err error)
}

// Delivery is one attempt to push one outcome on one channel.
type Delivery struct {
	// Watch is the settled watch, as stored (secrets included).
	Watch *vigil.Watch
	// MessageID is the outcome message's id: the webhook-id, stable across
	// retries.
	MessageID string
	// Options are the watch's delivery options, with a recipient default
	// webhook filled in.
	Options Options
	// Payload is the outcome as JSON (see Payload): a webhook's body, a
	// command's stdin.
	Payload []byte
	// Attempt counts from 1.
	Attempt int
	// Now is when this attempt is made.
	Now time.Time
	// Stopping is closed once the dispatcher is stopping (Run's context
	// ended): a channel that waits before it starts its attempt (a resume
	// waiting for its session's turn) gives it up then, starting nothing,
	// and returns ErrStopping with retry true.
	Stopping <-chan struct{}
	// Waited says the dispatcher called the channel's Wait (Waiter) for
	// this attempt, and holds its turn until Send returns.
	Waited bool
}

// ErrStopping is the error of an attempt a channel gave up before it
// started anything because the dispatcher is stopping (Delivery.Stopping):
// its receipt is retrying, due at once, so that the next start makes it.
var ErrStopping = errors.New("the daemon is stopping: not started; it is made at the next start")

// Payload is the JSON document a push channel carries: the outcome of one
// watch, built only from what was frozen at settlement, so every retry
// carries the same bytes.
type Payload struct {
	Type        string             `json:"type"`
	MessageID   string             `json:"message_id"`
	WatchID     string             `json:"watch_id"`
	Recipient   string             `json:"recipient"`
	Kind        vigil.Kind         `json:"kind"`
	State       vigil.State        `json:"state"`
	Sentence    string             `json:"sentence"`
	Reason      string             `json:"reason,omitempty"`
	Attention   bool               `json:"attention,omitempty"`
	Held        bool               `json:"held,omitempty"`
	Observation *vigil.Observation `json:"observation,omitempty"`
	Note        string             `json:"note,omitempty"`
	Labels      map[string]string  `json:"labels,omitempty"`
	SettledAt   string             `json:"settled_at"`
}

// PayloadType is Payload.Type.
const PayloadType = "watch.settled"

// NewPayload returns the outcome document of a settled watch.
func NewPayload(w *vigil.Watch, messageID string) Payload {
	p := Payload{Type: PayloadType, MessageID: messageID, WatchID: w.ID, Recipient: w.Recipient, Kind: w.Kind,
		State: w.State, Note: w.Note, Labels: w.Labels, SettledAt: vigil.FormatTime(w.SettledAt)}
	if o := w.Outcome; o != nil {
		p.Sentence, p.Reason, p.Attention, p.Held, p.Observation = o.Sentence, o.Reason, o.Attention, o.Held, o.Observation
	}
	return p
}

// unknownError marks a failure that may have landed.
type unknownError struct{ err error }

func (e *unknownError) Error() string { return e.err.Error() }
func (e *unknownError) Unwrap() error { return e.err }

// Unknown marks err as a failure after which the outcome may or may not
// have reached the receiver: the receipt reads "unknown" and the delivery
// is not resent unless the watch opted in with retry_unknown.
func Unknown(err error) error {
	if err == nil {
		return nil
	}
	return &unknownError{err}
}

// IsUnknown reports whether err was marked by Unknown.
func IsUnknown(err error) bool {
	var u *unknownError
	return errors.As(err, &u)
}

// StatusError is an HTTP answer that was not a success.
type StatusError struct {
	Code int
	// RetryAfter is how long a retryable answer's Retry-After asked to be
	// left alone (0: it asked nothing); the next attempt waits at least
	// that, up to MaxRetryAfter, though never less than its rung.
	RetryAfter time.Duration
}

// MaxRetryAfter bounds the wait a receiver's Retry-After may add: the
// ladder's last rung.
const MaxRetryAfter = 10 * time.Minute

func (e *StatusError) Error() string {
	s := fmt.Sprintf("HTTP %d", e.Code)
	if t := http.StatusText(e.Code); t != "" {
		s += " " + t
	}
	if e.RetryAfter > 0 {
		s += fmt.Sprintf(" (Retry-After %s)", vigil.FormatDuration(e.RetryAfter))
	}
	return s
}

// RetryAfter reads a Retry-After header's value at now: a number of
// seconds or an HTTP date. It returns 0 for none, one that cannot be
// read, or one already past; never more than MaxRetryAfter.
func RetryAfter(v string, now time.Time) time.Duration {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0
	}
	var d time.Duration
	if n, err := strconv.ParseInt(v, 10, 64); err == nil {
		if n <= 0 {
			return 0
		}
		d = time.Duration(min(n, int64(MaxRetryAfter/time.Second))) * time.Second
	} else if errors.Is(err, strconv.ErrRange) {
		if v[0] == '-' {
			return 0
		}
		d = MaxRetryAfter
	} else if t, err := http.ParseTime(v); err == nil {
		d = t.Sub(now)
	}
	return min(max(d, 0), MaxRetryAfter)
}

// Classify sorts an HTTP status into delivered (nil), retry (5xx, 408 and
// 429, which ask to be tried again) or rejected (every other status: a 4xx
// says the receiver will not take it, a 3xx is not followed). It is the
// one place statuses are judged.
func Classify(code int) (retry bool, err error) {
	switch {
	case code >= 200 && code < 300:
		return false, nil
	case code >= 500, code == http.StatusRequestTimeout, code == http.StatusTooManyRequests:
		return true, &StatusError{Code: code}
	default:
		return false, &StatusError{Code: code}
	}
}

// Ladder returns the retry backoff: the wait after the first, second, …
// retryable failure (1 s, 5 s, 30 s, 2 min, 10 min). When it runs out the
// receipt is undeliverable.
func Ladder() []time.Duration {
	return []time.Duration{time.Second, 5 * time.Second, 30 * time.Second, 2 * time.Minute, 10 * time.Minute}
}

// NextRetry returns the wait after attempt n (from 1) failed retryably,
// and false when the ladder has run out. (An attempt answered with a
// Retry-After waits the longer of the two: StatusError.RetryAfter.)
func NextRetry(attempt int) (time.Duration, bool) {
	l := Ladder()
	if attempt < 1 || attempt > len(l) {
		return 0, false
	}
	return l[attempt-1], true
}

// Spread lengthens wait, a rung of the ladder, by up to a quarter: by an
// amount fixed by key (a delivery's watch id and channel) and attempt, so
// that deliveries which failed together (a receiver down while a storm
// settled thousands of watches) are tried again spread over a quarter of
// their rung, not all at one instant, and the same delivery's attempt is
// always due at the same time, on any replica. Never shorter than wait.
func Spread(wait time.Duration, key string, attempt int) time.Duration {
	if wait <= 0 {
		return wait
	}
	h := fnv.New64a()
	h.Write([]byte(key))
	h.Write([]byte{byte(attempt), byte(attempt >> 8)})
	const steps = 1 << 16
	return wait + wait/4/steps*time.Duration(h.Sum64()%steps)
}

// Progress reports whether canonical delivery options ask for progress
// events. It is cheap enough to call on every probe.
func Progress(raw json.RawMessage) bool {
	return len(raw) > 0 && bytes.Contains(raw, []byte(`"progress":true`))
}
