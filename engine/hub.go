package engine

import (
	"context"
	"sync"

	"github.com/vigil-run/vigil"
)

// hub fans events out to subscribers: event-stream clients, waits on a
// watch, and mailbox long-polls. It never blocks a publisher: a subscriber
// whose buffer is full misses events (the mailbox, not the stream, is the
// durable path).
type hub struct {
	mu   sync.Mutex
	subs map[*sub]struct{}
}

type sub struct {
	f  vigil.EventFilter
	ch chan vigil.Event
	// types, when set, restricts the event types delivered.
	types map[string]bool
}

func newHub() *hub { return &hub{subs: make(map[*sub]struct{})} }

func (h *hub) publish(ev vigil.Event) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for s := range h.subs {
		if s.f.Recipient != "" && s.f.Recipient != ev.Recipient {
			continue
		}
		if s.f.WatchID != "" && s.f.WatchID != ev.WatchID {
			continue
		}
		if s.types != nil && !s.types[ev.Type] {
			continue
		}
		select {
		case s.ch <- ev:
		default:
		}
	}
}

// subscribe registers a subscriber; call the returned func to remove it.
func (h *hub) subscribe(f vigil.EventFilter, buf int, types ...string) (*sub, func()) {
	s := &sub{f: f, ch: make(chan vigil.Event, buf)}
	if len(types) > 0 {
		s.types = make(map[string]bool, len(types))
		for _, t := range types {
			s.types[t] = true
		}
	}
	h.mu.Lock()
	h.subs[s] = struct{}{}
	h.mu.Unlock()
	return s, func() {
		h.mu.Lock()
		delete(h.subs, s)
		h.mu.Unlock()
	}
}

// stream subscribes and returns a channel that is closed when ctx ends.
func (h *hub) stream(ctx context.Context, f vigil.EventFilter, allowed func(vigil.Event) bool) <-chan vigil.Event {
	s, cancel := h.subscribe(f, 256)
	out := make(chan vigil.Event, 16)
	go func() {
		defer close(out)
		defer cancel()
		for {
			select {
			case <-ctx.Done():
				return
			case ev := <-s.ch:
				if allowed != nil && !allowed(ev) {
					continue
				}
				select {
				case out <- ev:
				case <-ctx.Done():
					return
				}
			}
		}
	}()
	return out
}
