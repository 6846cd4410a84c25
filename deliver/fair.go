package deliver

// fairQueue holds the deliveries that are due and hands them to workers
// fairly: recipients take turns (round robin over per-recipient queues, and
// within a recipient over its destinations), a recipient has at most
// perRecipient attempts in flight and a destination at most perDest. So a
// slow or hanging endpoint holds at most perDest workers, a recipient at
// most perRecipient, and a delivery of another recipient waits for neither.
//
// Every operation costs O(1) amortised, whatever the number of recipients
// queued: a recipient whose every queued delivery goes to a destination at
// its bound is parked on those destinations (never scanned again until one
// of them frees a slot), and one at its own bound leaves the round until
// one of its attempts ends. Only recipients and destinations with
// something queued or in flight are held: an idle dispatcher holds none.
// The caller holds the dispatcher's lock.
type fairQueue struct {
	perRecipient, perDest int
	recipients            map[string]*recipientQueue
	dests                 map[string]*destination
	// round is the recipients with a delivery that may start now, in turn.
	round []*recipientQueue
	// freed is the destinations that gained a free slot while recipients
	// were parked on them.
	freed  []*destination
	queued int
}

// States of a recipientQueue with deliveries queued (an empty one is idle).
const (
	rIdle   = iota // nothing queued
	rRound         // in the round
	rCapped        // at its own bound: back in the round when an attempt ends
	rParked        // every queued delivery's destination is at its bound
)

type recipientQueue struct {
	name     string
	inflight int
	// byDest is the queued deliveries by destination, served in turn.
	byDest []*destJobs
	n      int
	state  int
	// gen changes each time the queue parks or leaves the parked state, so
	// a destination's stale waiter entries are recognised and skipped.
	gen uint64
}

type destJobs struct {
	d    *destination
	jobs []*job
}

type destination struct {
	key      string
	inflight int
	// refs counts the recipients' destJobs naming it.
	refs    int
	waiters []waiter
	freed   bool
}

// waiter is a recipient parked on a destination, as of its generation gen.
type waiter struct {
	r   *recipientQueue
	gen uint64
}

// grant is a delivery handed to a worker with the slots it holds; done
// returns them.
type grant struct {
	j *job
	r *recipientQueue
	d *destination
}

func newFairQueue(perRecipient, perDest int) fairQueue {
	return fairQueue{perRecipient: perRecipient, perDest: perDest,
		recipients: map[string]*recipientQueue{}, dests: map[string]*destination{}}
}

// push queues a due delivery of recipient to dest.
func (q *fairQueue) push(j *job, recipient, dest string) {
	r := q.recipients[recipient]
	if r == nil {
		r = &recipientQueue{name: recipient}
		q.recipients[recipient] = r
	}
	var dj *destJobs
	for _, x := range r.byDest {
		if x.d.key == dest {
			dj = x
			break
		}
	}
	if dj == nil {
		d := q.dests[dest]
		if d == nil {
			d = &destination{key: dest}
			q.dests[dest] = d
		}
		d.refs++
		dj = &destJobs{d: d}
		r.byDest = append(r.byDest, dj)
	}
	first := len(dj.jobs) == 0
	dj.jobs = append(dj.jobs, j)
	r.n++
	q.queued++
	switch r.state {
	case rIdle:
		if r.inflight >= q.perRecipient {
			r.state = rCapped
		} else {
			r.state = rRound
			q.round = append(q.round, r)
		}
	case rParked:
		if dj.d.inflight < q.perDest {
			r.gen++
			r.state = rRound
			q.round = append(q.round, r)
		} else if first {
			dj.d.waiters = append(dj.d.waiters, waiter{r, r.gen})
		}
	}
}

// pop returns the next delivery to start, fairly, and false when none may
// start now.
func (q *fairQueue) pop() (grant, bool) {
	// A destination that freed a slot gives it to a recipient parked on
	// it, in the order they parked.
	for len(q.freed) > 0 {
		d := q.freed[0]
		q.freed[0] = nil
		q.freed = q.freed[1:]
		d.freed = false
		for d.inflight < q.perDest && len(d.waiters) > 0 {
			w := d.waiters[0]
			d.waiters[0] = waiter{}
			d.waiters = d.waiters[1:]
			r := w.r
			if r.state != rParked || w.gen != r.gen {
				continue
			}
			dj := r.jobsFor(d)
			if dj == nil {
				continue
			}
			g := q.take(r, dj)
			if r.state == rParked && len(dj.jobs) > 0 {
				d.waiters = append(d.waiters, waiter{r, r.gen})
			}
			if d.inflight < q.perDest && len(d.waiters) > 0 {
				d.freed = true
				q.freed = append(q.freed, d)
			}
			return g, true
		}
		q.forget(d)
	}
	for len(q.round) > 0 {
		r := q.round[0]
		q.round[0] = nil
		q.round = q.round[1:]
		if r.state != rRound {
			continue
		}
		var dj *destJobs
		for _, x := range r.byDest {
			if x.d.inflight < q.perDest {
				dj = x
				break
			}
		}
		if dj == nil {
			// Every destination it waits for is busy: park it on each, to
			// be woken by the first to free a slot.
			r.state = rParked
			r.gen++
			for _, x := range r.byDest {
				x.d.waiters = append(x.d.waiters, waiter{r, r.gen})
			}
			continue
		}
		g := q.take(r, dj)
		if r.state == rRound {
			q.round = append(q.round, r)
		}
		return g, true
	}
	return grant{}, false
}

func (r *recipientQueue) jobsFor(d *destination) *destJobs {
	for _, x := range r.byDest {
		if x.d == d {
			return x
		}
	}
	return nil
}

// take starts dj's first delivery and sets r's state after it: idle with
// nothing left, capped at its bound, else as it was (the caller puts a
// queue in the round back at its end).
func (q *fairQueue) take(r *recipientQueue, dj *destJobs) grant {
	j := dj.jobs[0]
	dj.jobs[0] = nil
	dj.jobs = dj.jobs[1:]
	r.n--
	q.queued--
	r.inflight++
	dj.d.inflight++
	i := 0
	for r.byDest[i] != dj {
		i++
	}
	// The destination served goes to the back of the recipient's turn.
	copy(r.byDest[i:], r.byDest[i+1:])
	if len(dj.jobs) > 0 {
		r.byDest[len(r.byDest)-1] = dj
	} else {
		r.byDest[len(r.byDest)-1] = nil
		r.byDest = r.byDest[:len(r.byDest)-1]
		dj.d.refs--
	}
	switch {
	case r.n == 0:
		r.state = rIdle
		r.gen++
	case r.inflight >= q.perRecipient:
		r.state = rCapped
		r.gen++
	}
	return grant{j: j, r: r, d: dj.d}
}

// done returns the slots of a delivery that ended.
func (q *fairQueue) done(g grant) {
	r, d := g.r, g.d
	r.inflight--
	d.inflight--
	if r.state == rCapped && r.inflight < q.perRecipient {
		r.state = rRound
		q.round = append(q.round, r)
	}
	if d.inflight < q.perDest && len(d.waiters) > 0 && !d.freed {
		d.freed = true
		q.freed = append(q.freed, d)
	}
	if r.state == rIdle && r.inflight == 0 && q.recipients[r.name] == r {
		delete(q.recipients, r.name)
	}
	q.forget(d)
}

// forget drops a destination nothing refers to any more.
func (q *fairQueue) forget(d *destination) {
	if d.inflight == 0 && d.refs == 0 && !d.freed && q.dests[d.key] == d {
		delete(q.dests, d.key)
	}
}

// drain empties the queue, returning what was queued (not started).
func (q *fairQueue) drain() []*job {
	var out []*job
	for _, r := range q.recipients {
		for _, dj := range r.byDest {
			out = append(out, dj.jobs...)
		}
	}
	*q = newFairQueue(q.perRecipient, q.perDest)
	return out
}
