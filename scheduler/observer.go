package scheduler

import (
	"sync"

	"github.com/vigil-run/vigil"
)

// Observer lets a registration wait for its watch's first observation. If
// that observation settles the watch while the registration still waits, the
// registration claims it: the caller gets the answer and nothing is mailed.
// If the registration gave up first, the settlement is mailed as usual.
type Observer struct {
	mu    sync.Mutex
	state int
	w     *vigil.Watch
	done  chan struct{}
}

const (
	observing = iota
	claimed
	abandoned
	finished
)

// NewObserver returns an observer waiting for a first observation.
func NewObserver() *Observer { return &Observer{done: make(chan struct{})} }

// Done is closed when the first observation (or settlement) is known.
func (o *Observer) Done() <-chan struct{} { return o.done }

// Watch returns the watch as the first observation left it; nil when the
// watch vanished or was never probed.
func (o *Observer) Watch() *vigil.Watch {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.w
}

// Abandon gives up waiting; the registration that matched the watch as
// existing gives up for the one waiting, which then gives up again. It
// reports false when the first observation has already claimed the answer
// (or finished): then wait on Done, which closes promptly.
func (o *Observer) Abandon() bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.state == observing || o.state == abandoned {
		o.state = abandoned
		return true
	}
	return false
}

// Claim is called by the settling worker; true means the registration will
// return the answer, so nothing is mailed.
func (o *Observer) Claim() bool {
	if o == nil {
		return false
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.state == observing {
		o.state = claimed
		return true
	}
	return false
}

// Finish closes Done with w, the watch as its first observation (or
// settlement) left it; nil when it vanished. Later calls do nothing.
func (o *Observer) Finish(w *vigil.Watch) {
	if o == nil {
		return
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.state == finished {
		return
	}
	o.state = finished
	o.w = w
	close(o.done)
}
