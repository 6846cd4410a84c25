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
//
// Subscribers are indexed by the watch or recipient they filter on, so an
// event visits only the subscribers that can want it, plus those that filter
// on neither: ten thousand long-polls waiting on ten thousand recipients
// cost a publish nothing. (Scanning every subscriber per event made each
// settlement cost O(waiting readers).)
type hub struct {
	mu          sync.Mutex
	all         map[*sub]struct{}            // no watch or recipient filter
	byWatch     map[string]map[*sub]struct{} // filtered on a watch (and maybe a recipient)
	byRecipient map[string]map[*sub]struct{} // filtered on a recipient only
}

type sub struct {
	f  vigil.EventFilter
	ch chan vigil.Event
	// types, when set, restricts the event types delivered.
	types map[string]bool
}

func newHub() *hub {
	return &hub{all: make(map[*sub]struct{}), byWatch: make(map[string]map[*sub]struct{}), byRecipient: make(map[string]map[*sub]struct{})}
}

func (h *hub) publish(ev vigil.Event) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.send(h.all, ev)
	if ev.WatchID != "" {
		h.send(h.byWatch[ev.WatchID], ev)
	}
	if ev.Recipient != "" {
		h.send(h.byRecipient[ev.Recipient], ev)
	}
}

// send offers ev to each subscriber of set whose filter takes it.
func (h *hub) send(set map[*sub]struct{}, ev vigil.Event) {
	for s := range set {
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

// index returns the map s belongs in and its key ("" for h.all).
func (h *hub) index(s *sub) (map[string]map[*sub]struct{}, string) {
	switch {
	case s.f.WatchID != "":
		return h.byWatch, s.f.WatchID
	case s.f.Recipient != "":
		return h.byRecipient, s.f.Recipient
	}
	return nil, ""
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
	m, key := h.index(s)
	h.mu.Lock()
	if m == nil {
		h.all[s] = struct{}{}
	} else {
		set := m[key]
		if set == nil {
			set = make(map[*sub]struct{})
			m[key] = set
		}
		set[s] = struct{}{}
	}
	h.mu.Unlock()
	return s, func() {
		h.mu.Lock()
		defer h.mu.Unlock()
		if m == nil {
			delete(h.all, s)
			return
		}
		if set := m[key]; set != nil {
			delete(set, s)
			if len(set) == 0 {
				delete(m, key)
			}
		}
	}
}

// len is how many subscribers there are (for tests).
func (h *hub) len() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := len(h.all)
	for _, set := range h.byWatch {
		n += len(set)
	}
	for _, set := range h.byRecipient {
		n += len(set)
	}
	return n
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
