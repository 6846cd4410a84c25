package engine_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/vigil-run/vigil"
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
