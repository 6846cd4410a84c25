package postgres

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/vigil-run/vigil"
)

const (
	// maxGroup bounds the registrations one transaction of creates takes.
	// It also scales the margin of the global cap (see createOne): every
	// registration transaction in flight may add this many watches.
	maxGroup = 32
	// groupTimeout bounds a transaction of registrations made together,
	// which runs on none of their callers' contexts.
	groupTimeout = 30 * time.Second
)

// creates shares the store's registration transactions among the
// registrations made at the same time, as SQLite's writer shares its
// commits: a transaction's cost on the database server is mostly its own
// (its round trips, its commit), not its rows', so a transaction of 16
// registrations costs the server a small part of 16 transactions of one
// (store/postgres's BenchmarkRegisterCPU).
//
// At most max registration transactions run at once: one (Open), so that
// a burst makes groups as large as it can (with two, measured with
// BenchmarkRegisterCPU, the groups were half as large and the server's CPU
// a registration higher, for the same throughput). A registration that
// finds one free runs now, on its caller's goroutine, taking with it the
// registrations that wait, up to maxGroup (alone, it is createOne's two
// round trips, as before there were groups). One that finds none free
// waits in line; when a transaction ends and registrations wait, a new
// one takes them. No registration waits for a timer or for others to
// come: a group is what arrived while the previous transaction ran.
//
// The registrations of one transaction resolve in the order they came,
// each seeing those before it (createMany), as if made one after the
// other: a second registration of one identity, or of one idempotency
// key, finds the first.
type creates struct {
	mu      sync.Mutex
	queue   []*queuedCreate
	running int
	max     int
	// group bounds a transaction's registrations: maxGroup (a test
	// shrinks it, with the margin of the cap).
	group int

	// ctx is the context of the transactions of groups (none of their
	// callers'): Close ends it.
	ctx    context.Context
	cancel context.CancelFunc

	// groups counts the transactions that held more than one
	// registration, and grouped the registrations they held.
	groups, grouped atomic.Int64
}

// queuedCreate is one registration submitted to creates.
type queuedCreate struct {
	it   batchItem
	done chan struct{} // closed when out and err are set; nil for the runner's own
	out  *vigil.Watch
	err  error
	// taken is set, under creates.mu, when a transaction takes it.
	taken bool
}

// init lets n transactions of registrations run at once (at least one).
func (c *creates) init(n int) {
	c.max = max(1, n)
	c.group = maxGroup
	c.ctx, c.cancel = context.WithCancel(context.Background())
}

// close ends the transactions of groups and refuses what waits.
func (c *creates) close() { c.cancel() }

// submit registers it and returns its answer.
func (c *creates) submit(ctx context.Context, s *Store, it batchItem) (*vigil.Watch, error) {
	q := &queuedCreate{it: it}
	c.mu.Lock()
	if c.running < c.max {
		c.running++
		group := c.takeLocked(q)
		c.mu.Unlock()
		defer c.release(s)
		s.runCreates(ctx, true, group)
		return q.out, q.err
	}
	q.done = make(chan struct{})
	c.queue = append(c.queue, q)
	c.mu.Unlock()
	select {
	case <-q.done:
		return q.out, q.err
	case <-ctx.Done():
	}
	c.mu.Lock()
	if !q.taken {
		// Not taken: it never reaches the database.
		if i := slices.Index(c.queue, q); i >= 0 {
			c.queue = slices.Delete(c.queue, i, i+1)
		}
		c.mu.Unlock()
		return nil, ctx.Err()
	}
	c.mu.Unlock()
	// Taken: its transaction goes on, on the store's context, and may
	// commit it; so the answer is what the database holds, as SQLite's
	// writer answers an op that has begun. The wait is bounded by the
	// group's (groupTimeout). Answering ctx's error here told a caller
	// its registration failed while the group went on to make it.
	<-q.done
	return q.out, q.err
}

// takeLocked returns the next group: first, if not nil, then those that
// wait, in order, up to c.group. c.mu is held.
func (c *creates) takeLocked(first *queuedCreate) []*queuedCreate {
	var group []*queuedCreate
	if first != nil {
		group = append(group, first)
	}
	n := min(len(c.queue), c.group-len(group))
	group = append(group, c.queue[:n]...)
	c.queue = slices.Delete(c.queue, 0, n)
	for _, q := range group {
		q.taken = true
	}
	return group
}

// release ends a transaction of registrations: if registrations wait, a
// new one takes them, on a goroutine of its own.
func (c *creates) release(s *Store) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.queue) == 0 {
		c.running--
		return
	}
	go c.drain(s)
}

// drain runs transactions of the registrations that wait until none does.
func (c *creates) drain(s *Store) {
	for {
		c.mu.Lock()
		if len(c.queue) == 0 {
			c.running--
			c.mu.Unlock()
			return
		}
		group := c.takeLocked(nil)
		c.mu.Unlock()
		s.runCreates(c.ctx, false, group)
	}
}

// runCreates registers group in one transaction and answers each of its
// registrations. When the first is the caller's own (own: ctx is its
// caller's), a group of one is createAlone on ctx; any other group runs on
// the store's own context, as none of its callers' may end it for the
// others.
//
// A panic (a mistake of vigil's) is each registration's error, as
// SQLite's writer makes one: it neither ends the process from drain's
// goroutine nor leaves the transaction counted as running, which would
// hold every later registration in line.
func (s *Store) runCreates(ctx context.Context, own bool, group []*queuedCreate) {
	defer func() {
		if p := recover(); p != nil {
			s.log.Error("a registration transaction panicked", "panic", p, "stack", string(debug.Stack()))
			err := fmt.Errorf("postgres: create watch: internal error: %v", p)
			for _, q := range group {
				q.out, q.err = nil, err
			}
		}
		for _, q := range group {
			if q.done != nil {
				close(q.done)
			}
		}
	}()
	if len(group) == 1 && own {
		q := group[0]
		q.out, q.err = s.createAlone(ctx, &q.it)
		return
	}
	gctx, cancel := context.WithTimeout(s.creates.ctx, groupTimeout)
	defer cancel()
	if len(group) == 1 {
		q := group[0]
		q.out, q.err = s.createAlone(gctx, &q.it)
		return
	}
	items := make([]batchItem, len(group))
	for i, q := range group {
		items[i] = q.it
	}
	var res []vigil.WatchCreateResult
	excl := s.nearCap.Load()
	err := s.writeConn(gctx, func(c *pgx.Conn) error {
		res = make([]vigil.WatchCreateResult, len(items))
		return s.createMany(gctx, c, items, res, &excl)
	})
	if err != nil {
		if !refused(err) {
			// The database could not be asked, or its answer was
			// lost: what each registration alone would have met.
			err = wrap("create watch", err)
			for _, q := range group {
				q.err = err
			}
			return
		}
		// The server refused the transaction, which wrote nothing:
		// perhaps for one registration of the group (a value it does
		// not take). Each runs alone, so the others do not fail with it.
		for _, q := range group {
			q.out, q.err = s.createAlone(gctx, &q.it)
		}
		return
	}
	s.creates.groups.Add(1)
	s.creates.grouped.Add(int64(len(group)))
	n := 0
	for i, q := range group {
		q.out, q.err = res[i].Watch, res[i].Err
		if q.err == nil && !q.out.Existing && !q.out.Replayed {
			n++
		}
	}
	s.wroteWatches(n)
}

// refused reports whether err is the database server's refusal of a
// transaction (which then wrote nothing), or a failure of createMany's own
// before it wrote: not a connection lost or a context ended, after which
// the transaction may have committed.
func refused(err error) bool {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return true
	}
	var ge groupError
	return errors.As(err, &ge)
}

// groupError is a failure of createMany found before its writes were sent.
type groupError struct{ error }

func (e groupError) Unwrap() error { return e.error }
