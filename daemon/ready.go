package daemon

import (
	"context"
	"sync"
	"time"

	"github.com/vigil-run/vigil"
)

// Bounds of /readyz's look at the store.
const (
	// storePingTimeout bounds the store's answer to a readiness ping: one
	// that takes longer counts as no answer.
	storePingTimeout = time.Second
	// storePingTTL is how long a ping's result answers /readyz: a flood of
	// probes, from every load balancer and every one of its nodes, costs
	// the database one cheap query a second.
	storePingTTL = time.Second
)

var (
	errStarting = &vigil.Error{Code: vigil.CodeUnavailable, Message: "vigil is starting; try again shortly"}
	errShutdown = &vigil.Error{Code: vigil.CodeUnavailable, Message: "vigil is stopping"}
	errNoStore  = &vigil.Error{Code: vigil.CodeUnavailable, Message: "vigil cannot reach its database"}
)

// pinger is a store that answers a cheap query: sqlite.Store and
// postgres.Store.
type pinger interface {
	Ping(ctx context.Context) error
}

// storeCheck answers whether the store answers, from a ping at most
// storePingTTL old; one ping runs at a time, and the probes that come
// meanwhile wait for its result.
type storeCheck struct {
	ping func(context.Context) error
	now  func() time.Time

	mu  sync.Mutex
	at  time.Time // when the last ping ended; zero before the first
	err error     // its result
}

func newStoreCheck(st vigil.Store) *storeCheck {
	c := &storeCheck{now: time.Now}
	if p, ok := st.(pinger); ok {
		c.ping = p.Ping
	}
	return c
}

// check returns nil when the store answered its last ping, errNoStore
// otherwise, pinging it again when that ping is older than storePingTTL.
// ctx is the probe's; the ping runs on without it, so that a prober
// giving up early does not count as the store failing.
func (c *storeCheck) check(ctx context.Context) error {
	if c == nil || c.ping == nil {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.at.IsZero() && c.now().Sub(c.at) < storePingTTL {
		return c.err
	}
	pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), storePingTimeout)
	defer cancel()
	c.err = nil
	if err := c.ping(pctx); err != nil {
		c.err = &vigil.Error{Code: errNoStore.Code, Message: errNoStore.Message, Err: err}
	}
	c.at = c.now()
	return c.err
}

// readyz answers /readyz: not while starting (the pending watches are not
// loaded yet), not once a shutdown has begun (so that a load balancer
// sends new requests elsewhere while those in flight finish), and not
// while the store does not answer a cheap query within storePingTimeout.
// A replica holding no shard is ready: it serves the whole API, whose
// requests go to the database.
func (d *Daemon) readyz(ctx context.Context) error {
	if d.isStopping() {
		return errShutdown
	}
	if !d.ready.Load() {
		return errStarting
	}
	return d.storeOK.check(ctx)
}

// isPrimed reports whether Run has loaded the pending watches: from then on
// the API serves, through a shutdown too.
func (d *Daemon) isPrimed() bool {
	select {
	case <-d.primed:
		return true
	default:
		return false
	}
}

// isStopping reports whether Run's context has ended: the daemon shuts
// down.
func (d *Daemon) isStopping() bool {
	select {
	case <-d.stopped:
		return true
	default:
		return false
	}
}
