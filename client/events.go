package client

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"mime"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/vigil-run/vigil"
	"github.com/vigil-run/vigil/internal/wire"
)

const (
	// maxEventBytes bounds one line of the event stream, and the data of
	// one event (its data lines together).
	maxEventBytes = 1 << 20
	// streamIdle is how long an event stream may stay silent before the
	// client takes it for dead: the daemon sends a heartbeat comment every
	// wire.DefaultHeartbeat.
	streamIdle = 4 * wire.DefaultHeartbeat
	// reconnectDefault is the pause before reconnecting to a dropped
	// event stream when the stream named none (its "retry:" field).
	reconnectDefault = 2 * time.Second
	// reconnectStep and reconnectMax bound the pauses between the tries
	// of a reconnection that fails, which double from the stream's own.
	reconnectStep = 100 * time.Millisecond
	reconnectMax  = 30 * time.Second
)

// Subscribe implements vigil.Service: GET /v1/events. It returns once the
// daemon has accepted the stream (an error if it refuses, or does not
// answer within the request timeout); the channel then carries each event
// until ctx ends, when it is closed.
//
// A stream that drops (the daemon restarts, a connection dies without a
// word) is resumed: the client connects again, after the pause the stream
// asked for ("retry:", 2 s from vigil) and longer ones while the daemon
// cannot answer, with Last-Event-ID set to the id of the last event it
// took (a message event's seq, or the seq the stream said it started
// after), so that the message events settled meanwhile come first, each
// once, and none is lost: a message event at or before that seq is not
// passed on twice. The other events (progress, observations) are not
// durable, and those sent while the stream was down are not seen.
//
// The channel is closed before ctx ends when the stream cannot be resumed
// without loss: the daemon refuses the reconnection (unauthorized,
// not_found, invalid_request: anything but unavailable or rate_limited),
// the stream never said where it stood (no id, from a daemon that sends
// none), or an event had more than 1 MiB of data (see readEvents). A
// subscriber may then subscribe again with f.After set to the Seq of the
// last message event it received.
func (c *Client) Subscribe(ctx context.Context, f vigil.EventFilter) (<-chan vigil.Event, error) {
	resp, cancel, err := c.openStream(ctx, f)
	if err != nil {
		return nil, err
	}
	ch := make(chan vigil.Event, 16)
	go c.follow(ctx, f, resp, cancel, ch)
	return ch, nil
}

// openStream connects to the event stream of f, resuming after f.After
// when set, and returns the accepted response and the cancel of its
// request.
func (c *Client) openStream(ctx context.Context, f vigil.EventFilter) (*http.Response, context.CancelFunc, error) {
	v := url.Values{}
	set(v, "recipient", f.Recipient)
	set(v, "watch", f.WatchID)
	cl := call{method: http.MethodGet, path: wire.PathEvents, query: v}

	sctx, cancel := context.WithCancel(ctx)
	req, err := c.newRequest(sctx, cl)
	if err != nil {
		cancel()
		return nil, nil, err
	}
	req.Header.Set("Accept", "text/event-stream")
	if f.After != nil {
		req.Header.Set(wire.HeaderLastEventID, strconv.FormatInt(*f.After, 10))
	}
	// Only the wait for the response is bounded; the stream is not.
	timer := time.AfterFunc(requestTimeout, cancel)
	resp, err := c.hc.Do(req)
	if timedOut := !timer.Stop(); err != nil || timedOut {
		if err == nil {
			resp.Body.Close()
		}
		cancel()
		if timedOut && ctx.Err() == nil {
			err = context.DeadlineExceeded
		}
		return nil, nil, c.transportError(ctx, cl, requestTimeout, err)
	}
	if resp.StatusCode != http.StatusOK {
		defer cancel()
		defer resp.Body.Close()
		if resp.StatusCode < 300 {
			return nil, nil, vigil.Errorf(vigil.CodeInternal, "vigil daemon at %s answered %s to an event subscription", c.addr, resp.Status)
		}
		return nil, nil, c.responseError(resp)
	}
	if mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); mt != "text/event-stream" {
		cancel()
		resp.Body.Close()
		return nil, nil, vigil.Errorf(vigil.CodeInternal, "vigil daemon at %s answered an event subscription with %q, not an event stream", c.addr, mt)
	}
	return resp, cancel, nil
}

// follow passes the events of the stream resp on to ch, and of the
// streams that resume it when it drops (Subscribe), until ctx ends or the
// stream cannot be resumed without loss; then it closes ch.
func (c *Client) follow(ctx context.Context, f vigil.EventFilter, resp *http.Response, cancel context.CancelFunc, ch chan<- vigil.Event) {
	defer close(ch)
	st := &streamState{last: f.After}
	// quick grows while connections end without an event: a daemon (or
	// a proxy) that takes a stream and drops it at once is not called
	// again at once for ever.
	var quick time.Duration
	for {
		emitted, err := readConn(ctx, resp, cancel, st, ch)
		if ctx.Err() != nil || errors.Is(err, errEventTooLarge) || st.last == nil {
			return
		}
		// Resume after the last event taken, after the stream's pause;
		// longer ones while it cannot be reached, or drops at once.
		pause := reconnectDefault
		if st.retry != nil {
			pause = *st.retry
		}
		if emitted {
			quick = 0
		} else {
			quick = min(max(2*quick, reconnectStep), reconnectMax)
			pause = max(pause, quick)
		}
		for {
			t := time.NewTimer(pause)
			select {
			case <-ctx.Done():
				t.Stop()
				return
			case <-t.C:
			}
			after := *st.last
			f.After = &after
			if resp, cancel, err = c.openStream(ctx, f); err == nil {
				break
			}
			if ctx.Err() != nil || !resumable(err) {
				return
			}
			pause = min(max(2*pause, reconnectStep), reconnectMax)
			if d, ok := RetryAfter(err); ok {
				// As long as the daemon asks, within the bound.
				pause = max(pause, min(d, reconnectMax))
			}
		}
	}
}

// resumable reports whether a refused reconnection may be tried again:
// the daemon could not answer for now (unavailable: restarting, not
// listening; rate_limited).
func resumable(err error) bool {
	switch vigil.ErrorCode(err) {
	case vigil.CodeUnavailable, vigil.CodeRateLimited:
		return true
	}
	return false
}

// readConn passes the events of one connection on to ch until it ends (or
// ctx does), and returns whether it passed any on, and why it ended.
func readConn(ctx context.Context, resp *http.Response, cancel context.CancelFunc, st *streamState, ch chan<- vigil.Event) (emitted bool, err error) {
	defer cancel()
	defer resp.Body.Close()
	// A connection that died without a word ends too.
	idle := time.AfterFunc(streamIdle, cancel)
	defer idle.Stop()
	err = readStream(&idleReader{r: resp.Body, t: idle}, st, func(ev vigil.Event) bool {
		select {
		case ch <- ev:
			emitted = true
			return true
		case <-ctx.Done():
			return false
		}
	})
	return emitted, err
}

// idleReader restarts t each time a read returns data.
type idleReader struct {
	r io.Reader
	t *time.Timer
}

func (r *idleReader) Read(p []byte) (int, error) {
	n, err := r.r.Read(p)
	if n > 0 {
		r.t.Reset(streamIdle)
	}
	return n, err
}

// streamState is what an event stream said that outlives its connection.
type streamState struct {
	// last is the id of the last event taken (emitted, or without data:
	// the stream's opening), a mailbox seq; nil when none came.
	last *int64
	// retry is the pause before reconnecting that the stream asked for;
	// nil when it did not.
	retry *time.Duration
}

// errEventTooLarge ends a stream that sent an event of more than
// maxEventBytes of data, or a line longer than that.
var errEventTooLarge = errors.New("event too large")

// readEvents parses a Server-Sent Events stream, calling emit with each
// event until the stream ends or emit returns false. It is readStream with
// a state of its own.
func readEvents(r io.Reader, emit func(vigil.Event) bool) error {
	return readStream(r, &streamState{}, emit)
}

// readStream parses a Server-Sent Events stream, calling emit with each
// event until the stream ends or emit returns false. Comments and fields
// other than event, data, id and retry are skipped; data that is not a
// vigil.Event is skipped too. An event's id, a whole number (a message
// event's mailbox seq), becomes st.last once the event is emitted (or at
// once for one without data, as the stream's opening is), as the SSE
// standard has it: an event cut off before its end changes nothing. A
// message event whose seq is at or before st.last is not emitted: it was
// already. It returns why the stream ended: nil at its end or when emit
// returned false, else the read's error, or one saying that a line, or the
// data of one event, ran past maxEventBytes (that event is not emitted;
// errors.Is errEventTooLarge), so that a stream that never ends an event
// cannot grow the client's memory without bound.
func readStream(r io.Reader, st *streamState, emit func(vigil.Event) bool) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 4096), maxEventBytes)
	var (
		name string
		data strings.Builder
		// id is the stream's last event id buffer: it holds from the
		// event that set it on.
		id = st.last
	)
	for sc.Scan() {
		line := sc.Text()
		if line == "" {
			if data.Len() == 0 {
				st.last = id
			} else {
				var ev vigil.Event
				if json.Unmarshal([]byte(strings.TrimSuffix(data.String(), "\n")), &ev) == nil {
					if ev.Type == "" {
						ev.Type = name
					}
					if ev.Type == vigil.EventMessage && ev.Seq > 0 && st.last != nil && ev.Seq <= *st.last {
						// Sent again: the subscriber has it.
					} else if !emit(ev) {
						return nil
					}
				}
				st.last = id
			}
			name = ""
			data.Reset()
			continue
		}
		if strings.HasPrefix(line, ":") {
			continue // a comment: the heartbeat
		}
		field, value, _ := strings.Cut(line, ":")
		value = strings.TrimPrefix(value, " ")
		switch field {
		case "event":
			name = value
		case "data":
			if data.Len()+len(value)+1 > maxEventBytes {
				return &vigil.Error{Code: vigil.CodeInternal, Err: errEventTooLarge,
					Message: "the event stream sent an event of more than " + strconv.Itoa(maxEventBytes) + " bytes of data"}
			}
			data.WriteString(value)
			data.WriteByte('\n')
		case "id":
			if n, err := strconv.ParseInt(value, 10, 64); err == nil && n >= 0 && !strings.HasPrefix(value, "+") {
				id = &n
			}
		case "retry":
			if ms, err := strconv.ParseInt(value, 10, 64); err == nil && ms >= 0 && !strings.HasPrefix(value, "+") {
				d := reconnectMax
				if ms < int64(reconnectMax/time.Millisecond) {
					d = time.Duration(ms) * time.Millisecond
				}
				st.retry = &d
			}
		}
	}
	err := sc.Err()
	if errors.Is(err, bufio.ErrTooLong) {
		return &vigil.Error{Code: vigil.CodeInternal, Err: errEventTooLarge,
			Message: "the event stream sent a line of more than " + strconv.Itoa(maxEventBytes) + " bytes"}
	}
	return err
}
