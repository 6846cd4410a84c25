package daemon_test

import (
	"bufio"
	"context"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/vigil-run/vigil"
)

// TestEventStreamResumes is issue #17's reconnect: a client reads some
// settlements, drops, and comes back with the seq of the last message it
// got; the ones settled while it was away come first, once each, then the
// live ones.
func TestEventStreamResumes(t *testing.T) {
	d := start(t, testConfig(t.TempDir(), t.TempDir()))
	c := newClient(t, d)
	settleOne := func() int64 {
		t.Helper()
		w, err := c.Register(t.Context(), vigil.RegisterRequest{Kind: vigil.KindTimer, Recipient: "agent-1", Predicate: []byte(`{"in":"1h"}`)})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.Cancel(t.Context(), w.ID); err != nil {
			t.Fatal(err)
		}
		p, err := c.Messages(t.Context(), vigil.MessagesRequest{Recipient: "agent-1", After: new(int64), Limit: 1000})
		if err != nil {
			t.Fatal(err)
		}
		return p.Messages[len(p.Messages)-1].Seq
	}
	messages := func(ch <-chan vigil.Event, n int) []int64 {
		t.Helper()
		var seqs []int64
		timeout := time.After(20 * time.Second)
		for len(seqs) < n {
			select {
			case ev, ok := <-ch:
				if !ok {
					t.Fatalf("the stream ended after %v", seqs)
				}
				if ev.Type == vigil.EventMessage {
					seqs = append(seqs, ev.Seq)
				}
			case <-timeout:
				t.Fatalf("got %v, want %d message events", seqs, n)
			}
		}
		return seqs
	}

	ctx, drop := context.WithCancel(t.Context())
	ch, err := c.Subscribe(ctx, vigil.EventFilter{Recipient: "agent-1"})
	if err != nil {
		t.Fatal(err)
	}
	want := []int64{settleOne(), settleOne()}
	got := messages(ch, 2)
	if !slices.Equal(got, want) {
		t.Fatalf("before the drop: message seqs %v, want %v", got, want)
	}
	drop()
	for range ch {
	}
	missed := []int64{settleOne(), settleOne(), settleOne()}

	ch, err = c.Subscribe(t.Context(), vigil.EventFilter{Recipient: "agent-1", After: &got[len(got)-1]})
	if err != nil {
		t.Fatal(err)
	}
	if got := messages(ch, 3); !slices.Equal(got, missed) {
		t.Errorf("after resuming: message seqs %v, want those settled meanwhile, %v", got, missed)
	}
	live := []int64{settleOne()}
	if got := messages(ch, 1); !slices.Equal(got, live) {
		t.Errorf("then live: message seqs %v, want %v (nothing twice)", got, live)
	}
}

// TestEventStreamOpensWithItsStart: a stream opened without Last-Event-ID
// sends, as the id of its opening, the seq it starts after; a client
// that loses it before any message event reconnects with that id and
// gets the messages written in between, which a reconnection with no id
// (starting live again) never sent.
func TestEventStreamOpensWithItsStart(t *testing.T) {
	d := start(t, testConfig(t.TempDir(), t.TempDir()))
	c := newClient(t, d)
	if _, err := c.Note(t.Context(), vigil.NoteRequest{Recipient: "agent-1", Title: "before"}); err != nil {
		t.Fatal(err)
	}
	ctx, drop := context.WithCancel(t.Context())
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+d.Addr()+"/v1/events?recipient=agent-1", nil)
	req.Header.Set("Authorization", "Bearer "+d.Token())
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var opening []string
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() && sc.Text() != "" {
		opening = append(opening, sc.Text())
	}
	drop()
	resp.Body.Close()
	var id string
	for _, l := range opening {
		if v, ok := strings.CutPrefix(l, "id: "); ok {
			id = v
		}
	}
	start, err := strconv.ParseInt(id, 10, 64)
	if err != nil {
		t.Fatalf("the stream opened with %q, no id of the seq it starts after", opening)
	}
	m, err := c.Note(t.Context(), vigil.NoteRequest{Recipient: "agent-1", Title: "while away"})
	if err != nil {
		t.Fatal(err)
	}
	ch, err := c.Subscribe(t.Context(), vigil.EventFilter{Recipient: "agent-1", After: &start})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case ev := <-ch:
		if ev.Type != vigil.EventMessage || ev.Seq != m.Seq {
			t.Errorf("after reconnecting with the opening's id: %+v, want the message written meanwhile, seq %d", ev, m.Seq)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the message written while away never came")
	}
}
