package engine

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/vigil-run/vigil"
	"github.com/vigil-run/vigil/internal/fifo"
)

// Bounds of the recent-probe memory: ProbesPerWatch probes per watch, for
// at most probeWatches watches (the oldest-remembered watch is forgotten
// first), so it holds at most a fixed number of short records.
const (
	ProbesPerWatch = 20
	probeWatches   = 4096
	probeTextBytes = 240
)

// Probe is one probe of a watch as the engine remembers it (in memory
// only; a restart forgets it).
type Probe struct {
	At      time.Time     `json:"at"`
	Verdict vigil.Verdict `json:"verdict"`
	// Summary is the observation's one line, or its reason when it could
	// not tell; clipped.
	Summary string `json:"summary,omitempty"`
}

// probeRing is a watch's last ProbesPerWatch probes, oldest first from
// next once full, in the order they started (seq).
type probeRing struct {
	buf  [ProbesPerWatch]Probe
	seq  [ProbesPerWatch]uint64
	n    int // how many are held (at most ProbesPerWatch)
	next int // where the next one goes
}

// add puts p, started at seq (0: unknown, taken as the newest), in its
// place: a probe is recorded once what it decided is written, and one
// that started earlier can finish writing later (a registration's first
// probe, whose caller is answered before the probe log hears of it). A
// probe older than all of a full ring is dropped.
func (r *probeRing) add(p Probe, seq uint64) {
	at := func(i int) int { return (r.next - i + 2*ProbesPerWatch) % ProbesPerWatch } // i-th newest, from 1
	if seq != 0 && r.n == ProbesPerWatch && r.seq[at(r.n)] > seq {
		return
	}
	r.buf[r.next], r.seq[r.next] = p, seq
	r.next = (r.next + 1) % ProbesPerWatch
	r.n = min(r.n+1, ProbesPerWatch)
	for i := 1; i < r.n && seq != 0 && r.seq[at(i+1)] > seq; i++ {
		a, b := at(i), at(i+1)
		r.buf[a], r.buf[b] = r.buf[b], r.buf[a]
		r.seq[a], r.seq[b] = r.seq[b], r.seq[a]
	}
}

// probeLog remembers the recent probes of the most recently probed watches
// and wakes the callers waiting for a watch's next probe (Check).
type probeLog struct {
	mu    sync.Mutex
	rings *fifo.Map[string, *probeRing] // the first remembered forgotten first
	spare *probeRing                    // the ring of the watch last forgotten
	// waiters wait for a probe of a watch that starts after they came.
	// Probes are told apart by the order they start in (started counts
	// every probe that starts, without a lock), never by their clock: two
	// instants read from a coarse (or a test's) clock can be equal.
	waiters map[string][]probeWaiter
	started atomic.Uint64
}

type probeWaiter struct {
	after uint64 // started when it came
	ch    chan struct{}
}

func newProbeLog() *probeLog {
	return &probeLog{rings: fifo.New[string, *probeRing](probeWatches), waiters: make(map[string][]probeWaiter)}
}

// start is called as a probe of watch id starts looking: it returns the
// probe's ticket for record, its place in the order probes start.
func (l *probeLog) start(string) uint64 {
	return l.started.Add(1)
}

// record remembers one probe of watch id made at obs.At (or at), in the
// order probes started (ticket, from start; 0: unknown, the newest), and
// wakes the waiters that came before it started (0 wakes none).
func (l *probeLog) record(id string, obs *vigil.Observation, at time.Time, ticket uint64) {
	text := obs.Summary
	if text == "" {
		text = obs.Reason
	}
	if len(text) > probeTextBytes {
		text = clipUTF8(text, probeTextBytes) + "…"
	}
	p := Probe{At: at.UTC(), Verdict: obs.Verdict, Summary: text}
	l.mu.Lock()
	defer l.mu.Unlock()
	r, ok := l.rings.Get(id)
	if !ok {
		// A full log forgets the watch first remembered, whose ring
		// serves this one: a storm of timers records thousands of
		// watches once each.
		r = l.spare
		if r == nil {
			r = &probeRing{}
		}
		l.spare = nil
		if _, _, old, forgot := l.rings.Add(id, r); forgot {
			*old = probeRing{}
			l.spare = old
		}
	}
	r.add(p, ticket)
	ws, ok := l.waiters[id]
	if !ok || ticket == 0 {
		return
	}
	kept := ws[:0]
	for _, w := range ws {
		if ticket > w.after {
			close(w.ch)
			continue
		}
		kept = append(kept, w)
	}
	if len(kept) == 0 {
		delete(l.waiters, id)
	} else {
		l.waiters[id] = kept
	}
}

// recent returns watch id's remembered probes, newest first.
func (l *probeLog) recent(id string) []Probe {
	l.mu.Lock()
	defer l.mu.Unlock()
	r, ok := l.rings.Get(id)
	if !ok {
		return []Probe{}
	}
	out := make([]Probe, 0, r.n)
	for i := 1; i <= r.n; i++ {
		out = append(out, r.buf[(r.next-i+ProbesPerWatch)%ProbesPerWatch])
	}
	return out
}

// wait returns a channel closed once a probe of id that starts after
// this call has been recorded, and the function that stops waiting.
func (l *probeLog) wait(id string) (<-chan struct{}, func()) {
	ch := make(chan struct{})
	l.mu.Lock()
	l.waiters[id] = append(l.waiters[id], probeWaiter{after: l.started.Load(), ch: ch})
	l.mu.Unlock()
	return ch, func() {
		l.mu.Lock()
		defer l.mu.Unlock()
		ws := l.waiters[id]
		for i, w := range ws {
			if w.ch == ch {
				ws = append(ws[:i], ws[i+1:]...)
				break
			}
		}
		if len(ws) == 0 {
			delete(l.waiters, id)
		} else {
			l.waiters[id] = ws
		}
	}
}

// clipUTF8 cuts s to at most n bytes without splitting a character.
func clipUTF8(s string, n int) string {
	for n > 0 && n < len(s) && s[n]&0xC0 == 0x80 {
		n--
	}
	return s[:n]
}
