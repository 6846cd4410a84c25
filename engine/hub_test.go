package engine

import (
	"strconv"
	"testing"

	"github.com/vigil-run/vigil"
)

func TestHubDeliversToMatchingSubscribersOnly(t *testing.T) {
	h := newHub()
	all, cancelAll := h.subscribe(vigil.EventFilter{}, 8)
	r1, cancelR1 := h.subscribe(vigil.EventFilter{Recipient: "r1"}, 8)
	r1msg, cancelR1msg := h.subscribe(vigil.EventFilter{Recipient: "r1"}, 8, vigil.EventMessage)
	w1, cancelW1 := h.subscribe(vigil.EventFilter{WatchID: "w1"}, 8)
	w1r2, cancelW1r2 := h.subscribe(vigil.EventFilter{WatchID: "w1", Recipient: "r2"}, 8)

	h.publish(vigil.Event{Type: vigil.EventWatchSettled, WatchID: "w1", Recipient: "r1"})
	h.publish(vigil.Event{Type: vigil.EventMessage, WatchID: "w1", Recipient: "r1"})
	h.publish(vigil.Event{Type: vigil.EventMessage, WatchID: "w2", Recipient: "r2"})

	for name, c := range map[string]struct {
		s    *sub
		want int
	}{"all": {all, 3}, "r1": {r1, 2}, "r1 messages": {r1msg, 1}, "w1": {w1, 2}, "w1 of r2": {w1r2, 0}} {
		if got := len(c.s.ch); got != c.want {
			t.Errorf("%s got %d events, want %d", name, got, c.want)
		}
	}
	for _, cancel := range []func(){cancelAll, cancelR1, cancelR1msg, cancelW1, cancelW1r2} {
		cancel()
	}
	if n := h.len(); n != 0 || len(h.byWatch) != 0 || len(h.byRecipient) != 0 {
		t.Errorf("after every cancel: %d subscribers, %d watch keys, %d recipient keys; want none", n, len(h.byWatch), len(h.byRecipient))
	}
}

// BenchmarkPublishWithIdleReaders publishes events for one recipient while
// 10 000 long-polls wait on 10 000 others: a publish must not visit them.
func BenchmarkPublishWithIdleReaders(b *testing.B) {
	h := newHub()
	for i := range 10_000 {
		_, cancel := h.subscribe(vigil.EventFilter{Recipient: "idle-" + strconv.Itoa(i)}, 1, vigil.EventMessage)
		b.Cleanup(cancel)
	}
	s, cancel := h.subscribe(vigil.EventFilter{Recipient: "busy"}, 1, vigil.EventMessage)
	b.Cleanup(cancel)
	ev := vigil.Event{Type: vigil.EventMessage, WatchID: "w", Recipient: "busy"}
	b.ReportAllocs()
	for b.Loop() {
		h.publish(ev)
		<-s.ch
	}
}
