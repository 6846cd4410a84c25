package engine_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/vigil-run/vigil"
	"github.com/vigil-run/vigil/engine"
	"github.com/vigil-run/vigil/store/memstore"
	"github.com/vigil-run/vigil/watcher"
	"github.com/vigil-run/vigil/watcher/timer"
)

// nextMessage returns the next message.created event on ch, skipping the
// others; it fails the test if none comes.
func nextMessage(t *testing.T, ch <-chan vigil.Event) vigil.Event {
	t.Helper()
	timeout := time.After(10 * time.Second)
	for {
		select {
		case ev, ok := <-ch:
			if !ok {
				t.Fatal("the stream ended")
			}
			if ev.Type == vigil.EventMessage {
				return ev
			}
		case <-timeout:
			t.Fatal("no message event came")
		}
	}
}

// TestSubscribeResume: a stream resumed after a seq first carries the
// messages the filter selects that came after it, in seq order, then the
// live ones, each once (issue #17: 3 of 8 settlements were lost across a
// reconnect).
func TestSubscribeResume(t *testing.T) {
	t.Parallel()
	ignoreAt := cmp.FilterPath(func(p cmp.Path) bool { return p.Last().String() == ".At" }, cmp.Ignore())
	events := func(ms ...*vigil.Message) []vigil.Event {
		var evs []vigil.Event
		for _, m := range ms {
			evs = append(evs, vigil.MessageEvent(m))
		}
		return evs
	}
	read := func(t *testing.T, ch <-chan vigil.Event, n int) []vigil.Event {
		t.Helper()
		var got []vigil.Event
		for range n {
			got = append(got, nextMessage(t, ch))
		}
		return got
	}
	// Four messages, three of agent-1 and one of agent-2: a1, a2, b1, a3.
	type mailbox struct{ a1, a2, b1, a3 *vigil.Message }
	for _, tc := range []struct {
		name    string
		scope   *vigil.Scope
		filter  func(m mailbox) vigil.EventFilter
		backlog func(m mailbox) []*vigil.Message
		live    string // the recipient of messages settled after subscribing
	}{
		{"recipient", nil,
			func(m mailbox) vigil.EventFilter { return vigil.EventFilter{Recipient: "agent-1", After: &m.a1.Seq} },
			func(m mailbox) []*vigil.Message { return []*vigil.Message{m.a2, m.a3} }, "agent-1"},
		{"every recipient, the admin", nil,
			func(m mailbox) vigil.EventFilter { return vigil.EventFilter{After: &m.a1.Seq} },
			func(m mailbox) []*vigil.Message { return []*vigil.Message{m.a2, m.b1, m.a3} }, "agent-2"},
		{"every recipient of a scoped token", &vigil.Scope{Recipients: []string{"agent-2"}},
			func(m mailbox) vigil.EventFilter { return vigil.EventFilter{After: new(int64)} },
			func(m mailbox) []*vigil.Message { return []*vigil.Message{m.b1} }, "agent-2"},
		{"one watch", nil,
			func(m mailbox) vigil.EventFilter { return vigil.EventFilter{WatchID: m.a3.WatchID, After: new(int64)} },
			func(m mailbox) []*vigil.Message { return []*vigil.Message{m.a3} }, ""},
		{"nothing missed", nil,
			func(m mailbox) vigil.EventFilter { return vigil.EventFilter{Recipient: "agent-1", After: &m.a3.Seq} },
			func(m mailbox) []*vigil.Message { return nil }, "agent-1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			v := newEnv(t, envOpts{})
			cancelled := func(recipient string) *vigil.Message {
				t.Helper()
				w := v.register(vigil.RegisterRequest{Kind: vigil.KindTimer, Recipient: recipient, Predicate: obj(`{"in":"1h"}`)})
				if _, err := v.eng.Cancel(v.ctx, w.ID); err != nil {
					t.Fatal(err)
				}
				ms := v.messages(recipient)
				return ms[len(ms)-1]
			}
			m := mailbox{cancelled("agent-1"), cancelled("agent-1"), cancelled("agent-2"), cancelled("agent-1")}
			ctx, stop := context.WithCancel(t.Context())
			defer stop()
			if tc.scope != nil {
				ctx = vigil.WithScope(ctx, *tc.scope)
			}
			ch, err := v.eng.Subscribe(ctx, tc.filter(m))
			if err != nil {
				t.Fatalf("Subscribe(%+v) = %v", tc.filter(m), err)
			}
			backlog := tc.backlog(m)
			if diff := cmp.Diff(events(backlog...), read(t, ch, len(backlog)), ignoreAt); diff != "" {
				t.Errorf("the backlog (-want +got):\n%s", diff)
			}
			if tc.live == "" {
				return
			}
			// A live message comes next, once: the one after it is the
			// following message, not a repeat.
			m1, m2 := cancelled(tc.live), cancelled(tc.live)
			if diff := cmp.Diff(events(m1, m2), read(t, ch, 2), ignoreAt); diff != "" {
				t.Errorf("the live messages (-want +got):\n%s", diff)
			}
		})
	}
}

func TestSubscribeResumeRefusesANegativeSeq(t *testing.T) {
	t.Parallel()
	v := newEnv(t, envOpts{})
	if _, err := v.eng.Subscribe(t.Context(), vigil.EventFilter{After: new(int64(-1))}); vigil.ErrorCode(err) != vigil.CodeInvalidRequest {
		t.Errorf("Subscribe(after -1) = %v, want invalid_request", err)
	}
}

// heldStore holds back the return of the MessageCreate whose text is
// hold, after it committed, until gate is closed: the message is in the
// mailbox and its event not yet published, as when two writes commit at
// once and the later one is published first.
type heldStore struct {
	vigil.Store
	hold      string
	committed chan struct{}
	gate      chan struct{}
}

func (s *heldStore) MessageCreate(ctx context.Context, m *vigil.Message) (*vigil.Message, error) {
	out, err := s.Store.MessageCreate(ctx, m)
	if m.Text == s.hold {
		close(s.committed)
		<-s.gate
	}
	return out, err
}

// TestStreamSendsMessagesInSeqOrder: a live stream sends message events in
// seq order whatever the order their writes are published in, so the id
// a client last saw (the seq of its last message event) is a point before
// which it has every message: a stream resumed after it misses none and
// repeats none. Here note "first" (seq 1) commits and is held before its
// event goes out; note "second" (seq 2) commits and is published. The
// stream sent "second" (id 2) first, and a client resuming after 2 never
// got "first". So on a stream of one mailbox, of every mailbox (the
// admin's), and of a token's several recipients.
func TestStreamSendsMessagesInSeqOrder(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name   string
		scope  *vigil.Scope
		filter vigil.EventFilter
	}{
		{"one recipient", nil, vigil.EventFilter{Recipient: "r"}},
		{"every recipient", nil, vigil.EventFilter{}},
		{"a token's recipients", &vigil.Scope{Recipients: []string{"r", "s"}}, vigil.EventFilter{}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			st := &heldStore{Store: memstore.New(), hold: "first", committed: make(chan struct{}), gate: make(chan struct{})}
			var release sync.Once
			open := func() { release.Do(func() { close(st.gate) }) }
			t.Cleanup(open)
			v := newEnv(t, envOpts{store: st})
			note := func(ctx context.Context, title string) *vigil.Message {
				m, err := v.eng.Note(ctx, vigil.NoteRequest{Recipient: "r", Title: title})
				if err != nil {
					t.Errorf("Note(%s): %v", title, err)
				}
				return m
			}
			subscribe := func(ctx context.Context, after *int64) <-chan vigil.Event {
				t.Helper()
				if tt.scope != nil {
					ctx = vigil.WithScope(ctx, *tt.scope)
				}
				f := tt.filter
				f.After = after
				ch, err := v.eng.Subscribe(ctx, f)
				if err != nil {
					t.Fatal(err)
				}
				return ch
			}
			ctx, drop := context.WithCancel(t.Context())
			live := subscribe(ctx, nil)
			first := make(chan *vigil.Message, 1)
			go func() { first <- note(context.Background(), "first") }()
			<-st.committed // seq 1 is in the mailbox, its event not out
			second := note(t.Context(), "second")

			// Both come now, in seq order, though "first" is not
			// published yet.
			var got []string
			var last int64
			for len(got) < 2 {
				ev := nextMessage(t, live)
				got = append(got, ev.Text)
				last = ev.Seq
				if got[0] != "first" {
					t.Fatalf("the live stream sent %q (seq %d) first, want \"first\": not in seq order", ev.Text, ev.Seq)
				}
			}
			if want := []string{"first", "second"}; !slices.Equal(got, want) || last != second.Seq {
				t.Fatalf("the live stream sent %q, the last with seq %d; want %q, the last %d", got, last, want, second.Seq)
			}
			drop() // the connection drops; the client resumes after the last id

			resumed := subscribe(t.Context(), &last)
			open() // "first" is published now, late
			if m := <-first; m == nil || m.Seq >= second.Seq {
				t.Fatalf("note first = %+v, want a seq below %d", m, second.Seq)
			}
			third := note(t.Context(), "third")
			if ev := nextMessage(t, resumed); ev.Seq != third.Seq {
				t.Fatalf("the resumed stream's next message is %q (seq %d), want %q (seq %d): nothing again", ev.Text, ev.Seq, third.Text, third.Seq)
			}
		})
	}
}

// readCounter counts the mailbox reads of its store: of every mailbox,
// and of one.
type readCounter struct {
	vigil.Store
	every, one atomic.Int64
}

func (s *readCounter) MessagesRead(ctx context.Context, p vigil.MessagesReadParams) (vigil.MessagesPage, error) {
	if p.AllRecipients {
		s.every.Add(1)
	} else {
		s.one.Add(1)
	}
	return s.Store.MessagesRead(ctx, p)
}

// TestStreamInOrderReadsNothing: a stream sends the message whose event
// is the seq right after the last one it took as it comes, without
// reading the mailbox, so messages published in order cost no read,
// whatever their recipients. After a gap (a message whose event never
// came) a stream of every mailbox reads once; a stream of one mailbox
// reads only at its own next message, not for another recipient's.
func TestStreamInOrderReadsNothing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := t.Context()
		st := &readCounter{Store: memstore.New()}
		e := engine.New(engine.Config{Store: st, Watchers: watcher.NewRegistry()})
		every, err := e.Subscribe(ctx, vigil.EventFilter{})
		if err != nil {
			t.Fatal(err)
		}
		one, err := e.Subscribe(vigil.WithScope(ctx, vigil.Scope{Recipients: []string{"r"}}), vigil.EventFilter{})
		if err != nil {
			t.Fatal(err)
		}
		var all, mine []int64
		note := func(recipient string) {
			t.Helper()
			m, err := e.Note(ctx, vigil.NoteRequest{Recipient: recipient, Title: "to " + recipient})
			if err != nil {
				t.Fatal(err)
			}
			all = append(all, m.Seq)
			if recipient == "r" {
				mine = append(mine, m.Seq)
			}
			synctest.Wait() // each stream has done what the note asked of it
		}
		seqs := func(evs []vigil.Event) []int64 {
			var out []int64
			for _, ev := range evs {
				out = append(out, ev.Seq)
			}
			return out
		}
		reads := func(every, one int64) {
			t.Helper()
			if n, m := st.every.Load(), st.one.Load(); n != every || m != one {
				t.Errorf("the streams read every mailbox %d times and r's %d; want %d and %d", n, m, every, one)
			}
		}
		for i := range 10 {
			note([]string{"r", "s"}[i%2])
		}
		reads(0, 0)
		// A message of s whose event never comes, then one whose does.
		hidden, err := st.MessageCreate(ctx, &vigil.Message{ID: "hidden", Recipient: "s", Type: vigil.MessageNote, Text: "hidden", CreatedAt: time.Now()})
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, hidden.Seq)
		note("s")
		reads(1, 0)
		note("r")
		reads(1, 1)
		if got := seqs(drain(every)); !slices.Equal(got, all) {
			t.Errorf("the stream of every mailbox sent %v, want %v", got, all)
		}
		if got := seqs(drain(one)); !slices.Equal(got, mine) {
			t.Errorf("the stream of r's mailbox sent %v, want %v", got, mine)
		}
	})
}

// TestStreamFullBufferLosesNoMessage: a stream whose reader lags so far
// that its buffer is full misses the events that do not fit, but not a
// message: its event, not kept, makes the stream read the mailbox once
// there is room.
func TestStreamFullBufferLosesNoMessage(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := t.Context()
		e := engine.New(engine.Config{Store: memstore.New(), Watchers: watcher.NewRegistry(timer.New(timer.Config{}))})
		stream, err := e.Subscribe(ctx, vigil.EventFilter{})
		if err != nil {
			t.Fatal(err)
		}
		// More registrations than the stream holds, none read yet.
		for i := range 400 {
			if _, err := e.Register(ctx, vigil.RegisterRequest{Kind: vigil.KindTimer, Recipient: "r",
				Predicate: obj(fmt.Sprintf(`{"in": "%dm"}`, i+1))}); err != nil {
				t.Fatal(err)
			}
		}
		synctest.Wait()
		m, err := e.Note(ctx, vigil.NoteRequest{Recipient: "r", Title: "past the full buffer"})
		if err != nil {
			t.Fatal(err)
		}
		var created int
		var notes []int64
		for evs := drain(stream); len(evs) > 0; evs = drain(stream) {
			for _, ev := range evs {
				switch ev.Type {
				case vigil.EventWatchCreated:
					created++
				case vigil.EventMessage:
					notes = append(notes, ev.Seq)
				}
			}
		}
		if created >= 400 {
			t.Fatalf("the stream held all %d registrations: its buffer was never full", created)
		}
		if len(notes) != 1 || notes[0] != m.Seq {
			t.Fatalf("the stream sent messages %v, want the note (seq %d) once", notes, m.Seq)
		}
	})
}
