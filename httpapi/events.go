package httpapi

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/vigil-run/vigil"
	"github.com/vigil-run/vigil/internal/wire"
)

// HeaderLastEventID is the header an event stream client sends on
// reconnecting: the id of the last event it received.
const HeaderLastEventID = wire.HeaderLastEventID

// retryMillis is how long a client waits before reconnecting to a dropped
// event stream, sent as the stream's "retry:" field.
const retryMillis = 2000

// events serves GET /v1/events: Server-Sent Events, one per vigil.Event,
// with a comment line every Heartbeat while the client stays. The stream
// begins with "retry: 2000" and, with Last-Event-ID or LastSeqFunc, "id:
// <the seq it starts after>"; each event carries "event: <type>" and
// "data: <the event as JSON>", and a message event (durable: it is in the
// mailbox) also "id: <its mailbox seq>". Message events come once each and
// in seq order on every stream (the service reads the mailbox when their
// events come out of order), so a client that reconnects with Last-Event-ID gets the messages its
// filter selects that came after that seq first, then the live events,
// and misses none; the other events are not durable, carry no id and are
// not sent again. The stream ends when the client goes, when the service
// closes its channel, or when Close is called. HEAD is answered with the
// stream's header only.
func (s *Server) events(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	var f vigil.EventFilter
	if v := r.Header.Get(HeaderLastEventID); v != "" {
		seq, err := strconv.ParseInt(v, 10, 64)
		if err != nil || seq < 0 || strings.HasPrefix(v, "+") {
			return invalid(HeaderLastEventID, "Last-Event-ID must be the id of a message event, its mailbox seq (a whole number of 0 or more), not %q", clip(v))
		}
		f.After = &seq
	}
	if v, ok := q["recipient"]; ok {
		if err := checkName("recipient", v[0]); err != nil {
			return err
		}
		f.Recipient = v[0]
	}
	if v, ok := q["watch"]; ok {
		if v[0] == "" || len(v[0]) > 64 || !plain(v[0]) {
			return invalid("watch", "watch must be a watch id, not %q", clip(v[0]))
		}
		f.WatchID = v[0]
	}
	if r.Method == http.MethodHead {
		// ServeMux serves HEAD on this GET route; net/http drops the
		// body, so a stream would never end: the headers only.
		streamHeader(w)
		return nil
	}
	ctx, done, err := s.track(w, r, &s.calls)
	if err != nil {
		return err
	}
	defer done()
	if f.After == nil && s.lastSeq != nil {
		// A stream that starts live starts after the newest message,
		// and says so as the id of its opening: a client that loses it
		// before any message event (a daemon restart) reconnects with
		// that Last-Event-ID, not with none, which started live again
		// and lost the messages written meanwhile.
		seq, err := s.lastSeq(ctx)
		if err != nil {
			return interrupted(ctx, err)
		}
		f.After = &seq
	}
	ch, err := s.svc.Subscribe(ctx, f)
	if err != nil {
		return interrupted(ctx, err)
	}

	rc := http.NewResponseController(w)
	_ = rc.SetWriteDeadline(time.Time{})
	streamHeader(w)
	// The reconnection delay, the seq the stream starts after and a
	// first comment get the header to the client at once.
	id := ""
	if f.After != nil {
		id = "id: " + strconv.FormatInt(*f.After, 10) + "\n"
	}
	if _, err := fmt.Fprintf(w, "retry: %d\n%s: vigil event stream\n\n", retryMillis, id); err != nil {
		return nil
	}
	if err := rc.Flush(); err != nil {
		return nil
	}

	// The ticker lives only while this client is connected.
	tick := time.NewTicker(s.heartbeat)
	defer tick.Stop()
	for {
		var frame string
		select {
		case <-ctx.Done():
			return nil
		case ev, ok := <-ch:
			if !ok {
				return nil
			}
			data, err := json.Marshal(ev)
			if err != nil {
				return err // logged by fail; the stream just ends
			}
			id := ""
			if ev.Type == vigil.EventMessage && ev.Seq > 0 {
				id = "id: " + strconv.FormatInt(ev.Seq, 10) + "\n"
			}
			frame = fmt.Sprintf("event: %s\n%sdata: %s\n\n", oneLine(ev.Type), id, data)
		case <-tick.C:
			frame = ": heartbeat\n\n"
		}
		// A client that stopped reading but keeps its connection would
		// hold this handler, its subscription and its buffer forever: a
		// write that cannot be taken within two heartbeats ends the
		// stream (the client reconnects with Last-Event-ID).
		_ = rc.SetWriteDeadline(time.Now().Add(2 * s.heartbeat))
		if _, err := fmt.Fprint(w, frame); err != nil {
			return nil // the client went away
		}
		if err := rc.Flush(); err != nil {
			return nil
		}
	}
}

// streamHeader writes the header of an event stream.
func streamHeader(w http.ResponseWriter) {
	h := w.Header()
	h.Set("Content-Type", contentTypeEventStream)
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no") // nginx: do not buffer the stream
	w.WriteHeader(http.StatusOK)
}

// EventStream serves the event stream (as GET /v1/events: the same query
// parameters, framing and resumption) to a caller another layer has
// authenticated: the scope in the request context applies, none meaning
// the admin. For the web panel, whose sessions are cookies, not bearer
// tokens. Mount it only behind such an authentication.
func (s *Server) EventStream() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := s.events(w, r); err != nil {
			s.fail(w, r, err)
		}
	})
}

// oneLine keeps a field value from breaking the event framing.
func oneLine(s string) string {
	if s == "" {
		return "message"
	}
	return strings.NewReplacer("\r", "", "\n", "").Replace(s)
}
