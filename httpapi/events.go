package httpapi

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/vigil-run/vigil"
)

// events serves GET /v1/events: Server-Sent Events, one per vigil.Event,
// with a comment line every Heartbeat while the client stays. Each event
// carries "event: <type>", "id: <n>" (its position in this stream, from 1)
// and "data: <the event as JSON>". The stream ends when the client goes,
// when the service closes its channel, or when Close is called. Streams do
// not resume: the mailbox is the durable record.
func (s *Server) events(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	var f vigil.EventFilter
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
	ctx, done := s.calls.Track(r.Context())
	defer done()
	ch, err := s.svc.Subscribe(ctx, f)
	if err != nil {
		return interrupted(ctx, err)
	}

	rc := http.NewResponseController(w)
	_ = rc.SetWriteDeadline(time.Time{})
	h := w.Header()
	h.Set("Content-Type", contentTypeEventStream)
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no") // nginx: do not buffer the stream
	w.WriteHeader(http.StatusOK)
	// A first comment gets the header to the client at once.
	if _, err := fmt.Fprint(w, ": vigil event stream\n\n"); err != nil {
		return nil
	}
	if err := rc.Flush(); err != nil {
		return nil
	}

	// The ticker lives only while this client is connected.
	tick := time.NewTicker(s.heartbeat)
	defer tick.Stop()
	var n int64
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
			n++
			frame = fmt.Sprintf("event: %s\nid: %d\ndata: %s\n\n", oneLine(ev.Type), n, data)
		case <-tick.C:
			frame = ": heartbeat\n\n"
		}
		if _, err := fmt.Fprint(w, frame); err != nil {
			return nil // the client went away
		}
		if err := rc.Flush(); err != nil {
			return nil
		}
	}
}

// oneLine keeps a field value from breaking the event framing.
func oneLine(s string) string {
	if s == "" {
		return "message"
	}
	return strings.NewReplacer("\r", "", "\n", "").Replace(s)
}
