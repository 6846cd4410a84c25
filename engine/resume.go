package engine

import (
	"context"

	"github.com/vigil-run/vigil"
)

// resumePage is how many messages a resumed stream reads at a time.
const resumePage = 500

// resume streams the events f selects to a subscriber coming back after
// message seq *f.After. Its message events come from the mailbox, not the
// hub: first those after *f.After, then, each time the hub announces a
// message past the last one sent, those after that. So every message the
// filter selects is sent once, in seq order, even one the hub dropped for
// a full buffer; the hub's other events pass as they come. recipient names
// the mailbox to read ("" reads every recipient's, filtered by f and
// allowed).
func (e *Engine) resume(ctx context.Context, f vigil.EventFilter, allowed func(vigil.Event) bool, recipient string) <-chan vigil.Event {
	// Subscribe first: a message committed after the first read is then
	// announced on s.ch.
	s, cancel := e.hub.subscribe(f, 256)
	out := make(chan vigil.Event, 16)
	last := *f.After
	send := func(ev vigil.Event) bool {
		select {
		case out <- ev:
			return true
		case <-ctx.Done():
			return false
		}
	}
	// catchUp sends the messages after last that the stream selects.
	catchUp := func() bool {
		for {
			after := last
			page, err := e.store.MessagesRead(ctx, vigil.MessagesReadParams{
				Recipient: recipient, AllRecipients: recipient == "", After: &after, Limit: resumePage})
			if err != nil {
				if ctx.Err() == nil {
					e.log.Error("resuming an event stream: reading the mailbox", "err", err)
				}
				return false // the stream ends; the subscriber resumes again
			}
			for _, m := range page.Messages {
				last = m.Seq
				ev := vigil.MessageEvent(m)
				if (f.WatchID != "" && ev.WatchID != f.WatchID) || (f.Recipient != "" && ev.Recipient != f.Recipient) ||
					(allowed != nil && !allowed(ev)) {
					continue
				}
				if !send(ev) {
					return false
				}
			}
			if len(page.Messages) < resumePage {
				return true
			}
		}
	}
	go func() {
		defer close(out)
		defer cancel()
		if !catchUp() {
			return
		}
		for {
			select {
			case <-ctx.Done():
				return
			case ev := <-s.ch:
				if allowed != nil && !allowed(ev) {
					continue
				}
				if ev.Type == vigil.EventMessage {
					if ev.Seq > last && !catchUp() {
						return
					}
					continue
				}
				if !send(ev) {
					return
				}
			}
		}
	}()
	return out
}
