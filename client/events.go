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
)

// Subscribe implements vigil.Service: GET /v1/events. It returns once the
// daemon has accepted the stream (an error if it refuses, or does not
// answer within the request timeout); the channel then carries each event
// and is closed when ctx ends or the stream drops (an event of more than
// 1 MiB of data ends it too: see readEvents). To resume after a drop,
// subscribe again with f.After set to the Seq of the last message event
// received (sent as Last-Event-ID): the messages settled meanwhile come
// first, once.
func (c *Client) Subscribe(ctx context.Context, f vigil.EventFilter) (<-chan vigil.Event, error) {
	v := url.Values{}
	set(v, "recipient", f.Recipient)
	set(v, "watch", f.WatchID)
	cl := call{method: http.MethodGet, path: wire.PathEvents, query: v}

	sctx, cancel := context.WithCancel(ctx)
	req, err := c.newRequest(sctx, cl)
	if err != nil {
		cancel()
		return nil, err
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
		return nil, c.transportError(ctx, cl, requestTimeout, err)
	}
	if resp.StatusCode != http.StatusOK {
		defer cancel()
		defer resp.Body.Close()
		if resp.StatusCode < 300 {
			return nil, vigil.Errorf(vigil.CodeInternal, "vigil daemon at %s answered %s to an event subscription", c.addr, resp.Status)
		}
		return nil, c.responseError(resp)
	}
	if mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); mt != "text/event-stream" {
		cancel()
		resp.Body.Close()
		return nil, vigil.Errorf(vigil.CodeInternal, "vigil daemon at %s answered an event subscription with %q, not an event stream", c.addr, mt)
	}

	ch := make(chan vigil.Event, 16)
	go func() {
		defer close(ch)
		defer cancel()
		defer resp.Body.Close()
		// A connection that died without a word ends the stream too.
		idle := time.AfterFunc(streamIdle, cancel)
		defer idle.Stop()
		// Whatever ends the stream, the channel is closed, as on a
		// drop: it carries no error, and a subscriber resumes from the
		// last seq it took.
		_ = readEvents(&idleReader{r: resp.Body, t: idle}, func(ev vigil.Event) bool {
			select {
			case ch <- ev:
				return true
			case <-sctx.Done():
				return false
			}
		})
	}()
	return ch, nil
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

// readEvents parses a Server-Sent Events stream, calling emit with each
// event until the stream ends or emit returns false. Comments and fields
// other than event and data are skipped; data that is not a vigil.Event is
// skipped too. It returns why the stream ended: nil at its end or when
// emit returned false, else the read's error, or one saying that a line,
// or the data of one event, ran past maxEventBytes (that event is not
// emitted), so that a stream that never ends an event cannot grow the
// client's memory without bound.
func readEvents(r io.Reader, emit func(vigil.Event) bool) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 4096), maxEventBytes)
	var (
		name string
		data strings.Builder
	)
	for sc.Scan() {
		line := sc.Text()
		if line == "" {
			if data.Len() > 0 {
				var ev vigil.Event
				if json.Unmarshal([]byte(strings.TrimSuffix(data.String(), "\n")), &ev) == nil {
					if ev.Type == "" {
						ev.Type = name
					}
					if !emit(ev) {
						return nil
					}
				}
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
				return vigil.Errorf(vigil.CodeInternal, "the event stream sent an event of more than %d bytes of data", maxEventBytes)
			}
			data.WriteString(value)
			data.WriteByte('\n')
		}
	}
	err := sc.Err()
	if errors.Is(err, bufio.ErrTooLong) {
		return vigil.Errorf(vigil.CodeInternal, "the event stream sent a line of more than %d bytes", maxEventBytes)
	}
	return err
}
