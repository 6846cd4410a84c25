package engine

import (
	"crypto/sha256"
	"sync"

	"github.com/vigil-run/vigil"
	"github.com/vigil-run/vigil/internal/fifo"
)

// hub fans events out to subscribers: event-stream clients, waits on a
// watch, and mailbox long-polls. It never blocks a publisher: a subscriber
// whose buffer is full misses events (the mailbox, not the stream, is the
// durable path). To an event stream a message event is only a wake (its
// messages are read from the mailbox), and one that finds the stream's
// buffer full pokes the stream's wake instead of being lost.
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
	// seen, on a store shared with other daemons (Config.Shared), keeps
	// an event that reaches the hub twice (published here after the
	// commit, and announced again as another daemon would see it) from
	// being sent twice; nil otherwise.
	seen *seen
}

type sub struct {
	f  vigil.EventFilter
	ch chan vigil.Event
	// types, when set, restricts the event types delivered.
	types map[string]bool
	// wake, an event stream's (capacity 1), is poked when a message
	// event finds ch full: the stream reads its mailbox then.
	wake chan struct{}
}

func newHub() *hub {
	return &hub{all: make(map[*sub]struct{}), byWatch: make(map[string]map[*sub]struct{}), byRecipient: make(map[string]map[*sub]struct{})}
}

// publish sends ev, an event of what this engine committed, to its
// subscribers.
func (h *hub) publish(ev vigil.Event) { h.deliver(ev, false) }

// announce sends ev, an event of what another daemon sharing the store
// committed (or of what this one did, read back from the store), unless
// it was sent already.
func (h *hub) announce(ev vigil.Event) { h.deliver(ev, true) }

func (h *hub) deliver(ev vigil.Event, announced bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.seen != nil && !h.seen.first(ev, announced) {
		return
	}
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
			if s.wake != nil && ev.Type == vigil.EventMessage {
				select {
				case s.wake <- struct{}{}:
				default: // a wake is pending already
				}
			}
		}
	}
}

// wants reports whether a subscriber may want an event of recipient or
// watch id: one that filters on neither, on the watch or on the recipient.
func (h *hub) wants(recipient, id string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.all) > 0 || len(h.byWatch[id]) > 0 || len(h.byRecipient[recipient]) > 0
}

// wakeType is the type of the event wake sends: it reaches only waits
// and long-polls (subscribers restricted to types), never a stream.
const wakeType = "wake"

// wake makes every wait and long-poll look at the store again: what it
// waits for may have happened while events could not come in.
func (h *hub) wake() {
	h.mu.Lock()
	defer h.mu.Unlock()
	poke := func(set map[*sub]struct{}) {
		for s := range set {
			if s.types == nil {
				continue
			}
			select {
			case s.ch <- vigil.Event{Type: wakeType}:
			default:
			}
		}
	}
	poke(h.all)
	for _, set := range h.byWatch {
		poke(set)
	}
	for _, set := range h.byRecipient {
		poke(set)
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
	return s, h.add(s)
}

// streamBuf is how many events an event stream's subscription holds.
const streamBuf = 256

// subscribeStream registers an event stream's subscriber, with its wake;
// call the returned func to remove it.
func (h *hub) subscribeStream(f vigil.EventFilter) (*sub, func()) {
	s := &sub{f: f, ch: make(chan vigil.Event, streamBuf), wake: make(chan struct{}, 1)}
	return s, h.add(s)
}

// add indexes s and returns the func removing it.
func (h *hub) add(s *sub) func() {
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
	return func() {
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

// seenKeys is how many events seen remembers: an event announced again
// more than this many events after it was published here is sent again.
const seenKeys = 1 << 15

// seen remembers the last seenKeys events that can reach the hub twice on
// a shared store (a message by its seq, a watch's creation and its
// settlement by its id) and whether each was announced.
type seen struct {
	announced *fifo.Map[eventKey, bool]
}

// eventKey names an event seen remembers. It holds no pointer, so the
// garbage collector, which an idle daemon's runtime runs every two
// minutes, neither scans seen nor keeps its watch ids alive: with an id
// as a string, a full seen was 32 768 strings and as many pointers to
// mark at every collection.
type eventKey struct {
	typ uint8 // keyMessage, keyCreated, keySettled
	// n is the length of the watch id in id; a longer id (vigil makes
	// 26-byte ULIDs; an embedder's NewIDFunc may make others, up to
	// validID's 64 bytes) is its SHA-256 in id, with n idHashed.
	n   uint8
	id  [32]byte
	seq int64
}

const (
	keyMessage uint8 = iota + 1
	keyCreated
	keySettled
)

// idHashed marks an eventKey whose id is the SHA-256 of a longer one.
const idHashed = 0xff

// watchKey is the eventKey of the event typ of watch id.
func watchKey(typ uint8, id string) eventKey {
	k := eventKey{typ: typ}
	if len(id) <= len(k.id) {
		k.n = uint8(copy(k.id[:], id))
	} else {
		k.id, k.n = sha256.Sum256([]byte(id)), idHashed
	}
	return k
}

func newSeen() *seen {
	return &seen{announced: fifo.New[eventKey, bool](seenKeys)}
}

// first reports whether ev should be sent, and remembers it. An event
// published here after one published here is sent (as with no shared
// store: the engine publishes each once); an announced event after any,
// or a published one after an announced one, is not.
func (s *seen) first(ev vigil.Event, announced bool) bool {
	var k eventKey
	switch ev.Type {
	case vigil.EventMessage:
		if ev.Seq <= 0 {
			return true
		}
		k = eventKey{typ: keyMessage, seq: ev.Seq}
	case vigil.EventWatchCreated:
		k = watchKey(keyCreated, ev.WatchID)
	case vigil.EventWatchSettled:
		k = watchKey(keySettled, ev.WatchID)
	default:
		return true
	}
	was, ok := s.announced.Get(k)
	if ok {
		return !announced && !was
	}
	if ev.Type == vigil.EventWatchCreated {
		// A creation heard after the watch's settlement is stale: the
		// events of two daemons' commits can arrive out of order (a
		// registration's notification is sent just after its commit,
		// and a cancel made on another daemon in between may be heard
		// first). The stream has said the watch ended; it does not say
		// it began after that.
		if _, ended := s.announced.Get(watchKey(keySettled, ev.WatchID)); ended {
			return false
		}
	}
	s.announced.Add(k, announced)
	return true
}
