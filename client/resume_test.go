package client

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/vigil-run/vigil"
)

// streamServer is an event stream whose connections are answered in turn
// by conns (the last one for every later connection); it records the
// Last-Event-ID of each.
type streamServer struct {
	conns []func(w http.ResponseWriter, r *http.Request)
	mu    sync.Mutex
	ids   []string
}

func (s *streamServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	n := len(s.ids)
	s.ids = append(s.ids, r.Header.Get("Last-Event-ID"))
	s.mu.Unlock()
	s.conns[min(n, len(s.conns)-1)](w, r)
}

func (s *streamServer) lastEventIDs() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.ids...)
}

// open answers a stream's header and writes frames, flushed.
func open(w http.ResponseWriter, frames ...string) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	for _, f := range frames {
		fmt.Fprint(w, f)
	}
	w.(http.Flusher).Flush()
}

// refuse answers a connection with a vigil error.
func refuse(status int, code vigil.Code) func(http.ResponseWriter, *http.Request) {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		fmt.Fprintf(w, `{"error":{"code":%q,"message":"no"}}`, code)
	}
}

func message(seq int64) string {
	return fmt.Sprintf("event: message.created\nid: %d\ndata: {\"type\":\"message.created\",\"watch_id\":\"w1\",\"seq\":%d}\n\n", seq, seq)
}

// TestSubscribeResumesAfterADrop holds that a stream that drops is
// resumed from the id of the last event taken, an event cut off by the
// drop not counting, and that a message sent again on the new connection
// is not passed on twice: the subscriber gets every message once, in
// order, on one channel.
func TestSubscribeResumesAfterADrop(t *testing.T) {
	t.Parallel()
	s := &streamServer{conns: []func(http.ResponseWriter, *http.Request){
		func(w http.ResponseWriter, r *http.Request) {
			open(w, "retry: 1\nid: 5\n: vigil event stream\n\n", message(6),
				"event: watch.observed\ndata: {\"type\":\"watch.observed\",\"watch_id\":\"w1\",\"polls\":3}\n\n",
				// Cut off by the drop: never taken, so not resumed from.
				"event: message.created\nid: 7\ndata: {\"type\":\"message.created\",\"seq\":7")
			// Returning drops the connection.
		},
		func(w http.ResponseWriter, r *http.Request) {
			// A duplicate of 6, which the client has.
			open(w, "retry: 1\nid: 6\n: vigil event stream\n\n", message(6), message(7), message(8))
		},
		// The test's end: a refusal closes the channel.
		refuse(http.StatusUnauthorized, vigil.CodeUnauthorized),
	}}
	ts := httptest.NewServer(s)
	defer ts.Close()
	c, _ := New(ts.URL, token, &Options{HTTPClient: ts.Client()})
	ch, err := c.Subscribe(context.Background(), vigil.EventFilter{WatchID: "w1"})
	if err != nil {
		t.Fatal(err)
	}
	var got []vigil.Event
	for ev := range ch {
		got = append(got, ev)
	}
	want := []vigil.Event{
		{Type: vigil.EventMessage, WatchID: "w1", Seq: 6},
		{Type: vigil.EventWatchObserved, WatchID: "w1", Polls: 3},
		{Type: vigil.EventMessage, WatchID: "w1", Seq: 7},
		{Type: vigil.EventMessage, WatchID: "w1", Seq: 8},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("events across a drop (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"", "6", "8"}, s.lastEventIDs()); diff != "" {
		t.Errorf("Last-Event-ID of each connection (-want +got):\n%s", diff)
	}
}

// TestSubscribeResumesThroughAnOutage holds that a reconnection the
// daemon cannot answer for now (503 unavailable, as while it starts) is
// tried again, from the same id, and that one it refuses (401) closes the
// channel.
func TestSubscribeResumesThroughAnOutage(t *testing.T) {
	t.Parallel()
	s := &streamServer{conns: []func(http.ResponseWriter, *http.Request){
		func(w http.ResponseWriter, r *http.Request) { open(w, "retry: 1\nid: 0\n\n", message(1)) },
		refuse(http.StatusServiceUnavailable, vigil.CodeUnavailable),
		func(w http.ResponseWriter, r *http.Request) { open(w, "retry: 1\nid: 1\n\n", message(2)) },
		refuse(http.StatusUnauthorized, vigil.CodeUnauthorized),
	}}
	ts := httptest.NewServer(s)
	defer ts.Close()
	c, _ := New(ts.URL, token, &Options{HTTPClient: ts.Client()})
	ch, err := c.Subscribe(context.Background(), vigil.EventFilter{})
	if err != nil {
		t.Fatal(err)
	}
	var seqs []int64
	for ev := range ch { // closed once the token is refused
		seqs = append(seqs, ev.Seq)
	}
	if diff := cmp.Diff([]int64{1, 2}, seqs); diff != "" {
		t.Errorf("message seqs (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"", "1", "1", "2"}, s.lastEventIDs()); diff != "" {
		t.Errorf("Last-Event-ID of each connection (-want +got):\n%s", diff)
	}
}

// TestSubscribeWithoutAnIDIsNotResumed holds that a stream that never
// said where it stood is not resumed, which would start live again and
// lose what came in between: the channel is closed, and the subscriber
// knows.
func TestSubscribeWithoutAnIDIsNotResumed(t *testing.T) {
	t.Parallel()
	s := &streamServer{conns: []func(http.ResponseWriter, *http.Request){
		func(w http.ResponseWriter, r *http.Request) {
			open(w, "retry: 1\n: vigil event stream\n\n", "event: watch.observed\ndata: {\"type\":\"watch.observed\"}\n\n")
		},
	}}
	ts := httptest.NewServer(s)
	defer ts.Close()
	c, _ := New(ts.URL, token, &Options{HTTPClient: ts.Client()})
	ch, err := c.Subscribe(context.Background(), vigil.EventFilter{})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for range ch {
		n++
	}
	if n != 1 || len(s.lastEventIDs()) != 1 {
		t.Errorf("got %d events on %d connections, want 1 on 1", n, len(s.lastEventIDs()))
	}
}
