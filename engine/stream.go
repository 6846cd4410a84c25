package engine

import (
	"context"

	"github.com/vigil-run/vigil"
)

// streamPage is how many messages an event stream reads from the mailbox
// at a time.
const streamPage = 500

// stream serves an event stream (Subscribe): the events f selects, from
// message seq last on. Its message events come from the mailbox, not the
// hub: a message event the hub carries only wakes the stream, which then
// reads the messages after the last one it sent. So every message the
// filter selects is sent once and in seq order, whatever the order in
// which their writes were published (each from its own goroutine, after
// its commit), and the seq of the last one sent is a point before which
// the subscriber has them all: a stream resumed after it (Last-Event-ID)
// misses none. Messages become visible in seq order in every store (one
// writer, or PostgreSQL's advisory lock), so a read that saw seq n never
// later finds a new message below n.
//
// A stream reads only when woken: by the event of a message it selects
// past the last it read, or whose seq the publisher did not know (0), or
// by a message event that found its buffer full (sub.wake). The events of
// messages a read already took, and of other recipients' messages, are
// dropped without a read. Nor does the event of the seq right after the
// last one the stream took need a read: that is the next message of
// every mailbox, and it is sent (when selected) as it came. So a stream
// that keeps up with messages published in order reads nothing, and one
// of a single recipient's mailbox reads only for its own messages after
// a gap. A resumed stream first reads what came after last. The hub's
// other events pass as they come.
//
// recipient names the mailbox to read ("" reads every recipient's,
// filtered by f and allowed). s is the stream's subscription, made before
// last was read, and cancel removes it.
func (e *Engine) stream(ctx context.Context, s *sub, cancel func(), f vigil.EventFilter, allowed func(vigil.Event) bool,
	recipient string, last int64, resumed bool) <-chan vigil.Event {
	out := make(chan vigil.Event, 16)
	send := func(ev vigil.Event) bool {
		select {
		case out <- ev:
			return true
		case <-ctx.Done():
			return false
		}
	}
	// selected reports whether ev, a message event, passes the filter.
	selected := func(ev vigil.Event) bool {
		return (f.WatchID == "" || ev.WatchID == f.WatchID) && (f.Recipient == "" || ev.Recipient == f.Recipient) &&
			(allowed == nil || allowed(ev))
	}
	// catchUp sends the messages after last that the stream selects.
	catchUp := func() bool {
		for {
			after := last
			page, err := e.store.MessagesRead(ctx, vigil.MessagesReadParams{
				Recipient: recipient, AllRecipients: recipient == "", After: &after, Limit: streamPage})
			if err != nil {
				if ctx.Err() == nil {
					e.log.Error("event stream: reading the mailbox", "err", err)
				}
				return false // the stream ends; the subscriber resumes
			}
			for _, m := range page.Messages {
				last = m.Seq
				if ev := vigil.MessageEvent(m); selected(ev) && !send(ev) {
					return false
				}
			}
			if len(page.Messages) < streamPage {
				return true
			}
		}
	}
	go func() {
		defer close(out)
		defer cancel()
		if resumed && !catchUp() {
			return
		}
		for {
			select {
			case <-ctx.Done():
				return
			case <-s.wake:
				if !catchUp() {
					return
				}
			case ev := <-s.ch:
				if ev.Type == vigil.EventMessage {
					switch {
					case ev.Seq == last+1:
						// The very next message of every mailbox,
						// committed: nothing is missing before it.
						last = ev.Seq
						if selected(ev) && !send(ev) {
							return
						}
					case !selected(ev):
						// Another recipient's: the stream's own
						// messages each wake it.
					case ev.Seq <= 0 || ev.Seq > last:
						if !catchUp() {
							return
						}
					}
					continue
				}
				if (allowed == nil || allowed(ev)) && !send(ev) {
					return
				}
			}
		}
	}()
	return out
}
