package deliver

import (
	"context"
	"sync"
)

// drainer keeps the attempts in flight by watch id, and the watches whose
// attempts may not start (Drain), for a replica handing shards over. It
// has a lock of its own, apart from the dispatcher's queues.
type drainer struct {
	mu sync.Mutex
	// stop, when set, names the watches whose attempts may not start.
	stop func(watchID string) bool
	// flying counts the attempts in flight by watch id.
	flying map[string]int
	// landed is closed (and forgotten) when an attempt ends, for the
	// Drain waiting; nil when none waits.
	landed chan struct{}
}

// takeOff says whether an attempt of watchID may start, and counts it in
// flight if so, in one step: a Drain that begins after it waits for it,
// and one that began before it stops it. Every takeOff that returns true
// is followed by one land.
func (d *Dispatcher) takeOff(watchID string) bool {
	dr := &d.drain
	dr.mu.Lock()
	defer dr.mu.Unlock()
	if dr.stop != nil && dr.stop(watchID) {
		return false
	}
	if dr.flying == nil {
		dr.flying = map[string]int{}
	}
	dr.flying[watchID]++
	return true
}

// land ends an attempt takeOff started: its result is recorded (or could
// not be).
func (d *Dispatcher) land(watchID string) {
	dr := &d.drain
	dr.mu.Lock()
	defer dr.mu.Unlock()
	if dr.flying[watchID]--; dr.flying[watchID] <= 0 {
		delete(dr.flying, watchID)
	}
	if dr.landed != nil {
		close(dr.landed)
		dr.landed = nil
	}
}

// Drain is for a replica handing over the shards of the watches stop
// names while its lease on them still holds: from now on no attempt of
// those watches starts (each is dropped at its turn, as one of a shard
// not held: the next holder resumes it from its receipt), and Drain waits
// until the attempts of those watches already in flight have ended, their
// results recorded, or until ctx ends. It returns how many were still in
// flight then (0: all recorded); their receipts stay sending, and the
// next holder reads them back as unknown.
//
// The attempts stay stopped after Drain returns, until Undrain: the
// replica lets go of the shards in its fence first, after which they are
// not held here anyway. One Drain at a time: another replaces its stop.
func (d *Dispatcher) Drain(ctx context.Context, stop func(watchID string) bool) int {
	dr := &d.drain
	dr.mu.Lock()
	defer dr.mu.Unlock()
	dr.stop = stop
	for said := false; ; said = true {
		n := 0
		for id, k := range dr.flying {
			if stop(id) {
				n += k
			}
		}
		if n == 0 || ctx.Err() != nil {
			return n
		}
		if dr.landed == nil {
			dr.landed = make(chan struct{})
		}
		landed := dr.landed
		dr.mu.Unlock()
		if !said {
			d.log.Info("waiting for the delivery attempts in flight on watches changing hands", "attempts", n)
		}
		select {
		case <-landed:
		case <-ctx.Done():
		}
		dr.mu.Lock()
	}
}

// Undrain lets the attempts Drain stopped start again (their shards came
// back, or the replica let go of them and its holds check drops them).
func (d *Dispatcher) Undrain() {
	dr := &d.drain
	dr.mu.Lock()
	dr.stop = nil
	dr.mu.Unlock()
}
