package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"math"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/vigil-run/vigil"
	"github.com/vigil-run/vigil/client"
)

// readerName is the one named reader of every soak mailbox.
const readerName = "soak"

// watches holds what the generator and the readers know of each watch,
// by its index (its note). Every field is written once by one goroutine
// and read at the end, or is atomic.
type watches struct {
	n        int
	due      []atomic.Int64  // the timer's instant, unix ms; 0: never sent
	regState []atomic.Uint32 // regNone, regOK, regFailed
	regHash  []atomic.Uint64 // hash of the watch id the registration answered
	regLatMs []int32         // registration round trip, ms
	wakeMs   []int32         // how late the pacer woke for a slot it slept until, ms (the generator's own lag); -1: it did not sleep
	lagMs    []int32         // how late a worker took the slot up, ms (includes waiting for a free worker)
	recv     []atomic.Int32  // messages received for the watch
	recvHash []atomic.Uint64 // hash of the message's watch id
	lateMs   []int32         // message created_at − instant, ms
	delivMs  []int32         // received − created_at, ms
	badType  []atomic.Int32  // messages whose type is not fired
}

const (
	regNone uint32 = iota
	regOK
	regFailed
)

func newWatches(n int) *watches {
	return &watches{n: n,
		due: make([]atomic.Int64, n), regState: make([]atomic.Uint32, n), regHash: make([]atomic.Uint64, n),
		regLatMs: make([]int32, n), wakeMs: make([]int32, n), lagMs: make([]int32, n),
		recv: make([]atomic.Int32, n), recvHash: make([]atomic.Uint64, n),
		lateMs: make([]int32, n), delivMs: make([]int32, n), badType: make([]atomic.Int32, n),
	}
}

func idHash(id string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(id))
	return h.Sum64() | 1 // never 0, which means unset
}

// errorCounts counts errors by API code, keeping a few examples.
type errorCounts struct {
	mu       sync.Mutex
	byCode   map[string]int
	examples []string
}

func (e *errorCounts) add(what string, err error) {
	code := "other"
	var ve *vigil.Error
	if errors.As(err, &ve) {
		code = string(ve.Code)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.byCode == nil {
		e.byCode = map[string]int{}
	}
	e.byCode[code]++
	if len(e.examples) < 5 {
		e.examples = append(e.examples, what+": "+err.Error())
	}
}

func (e *errorCounts) total() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	n := 0
	for _, c := range e.byCode {
		n += c
	}
	return n
}

func (e *errorCounts) String() string {
	e.mu.Lock()
	defer e.mu.Unlock()
	if len(e.byCode) == 0 {
		return "none"
	}
	return fmt.Sprint(e.byCode)
}

// job is one registration slot of the pacer.
type job struct {
	i    int
	slot time.Time // when the pacer meant it to be sent
}

// generator registers timer watches at a steady rate.
type generator struct {
	c         *client.Client
	w         *watches
	rate      float64
	lead      time.Duration
	readers   int
	workers   int
	errs      errorCounts
	ok        atomic.Int64 // registrations answered 201
	sent      atomic.Int64 // slots handed to the workers
	existing  atomic.Int64 // answered as an existing watch: a broken identity
	blocked   atomic.Int64 // nanoseconds the pacer waited for a free worker
	lastDueMs atomic.Int64
}

// run registers until ctx ends or duration passes: one pacer goroutine
// hands out slots at rate, each due at slot+lead, to a pool of workers.
// The pacer keeps absolute slot times, so a pause is caught up by a burst
// and shows as lag, not as a lower rate.
func (g *generator) run(ctx context.Context, start time.Time, duration time.Duration) {
	jobs := make(chan job, g.workers*4)
	var wg sync.WaitGroup
	for range g.workers {
		wg.Go(func() {
			for j := range jobs {
				g.register(ctx, j)
			}
		})
	}
	interval := float64(time.Second) / g.rate
	lastDue := make([]int64, g.readers) // per recipient: a timer's identity is (recipient, instant)
	end := start.Add(duration)
pace:
	for i := 0; i < g.w.n; i++ {
		slot := start.Add(time.Duration(math.Round(float64(i) * interval)))
		if !slot.Before(end) {
			break
		}
		g.w.wakeMs[i] = -1
		if d := time.Until(slot); d > 0 {
			select {
			case <-ctx.Done():
				break pace
			case <-time.After(d):
			}
			g.w.wakeMs[i] = int32(min(time.Since(slot).Milliseconds(), math.MaxInt32))
		}
		r := i % g.readers
		due := slot.Add(g.lead).UnixMilli()
		if due <= lastDue[r] {
			due = lastDue[r] + 1
		}
		lastDue[r] = due
		g.w.due[i].Store(due)
		g.lastDueMs.Store(max(g.lastDueMs.Load(), due))
		select {
		case jobs <- job{i: i, slot: slot}:
		default:
			// Every worker is waiting on the daemon and the queue is full.
			t := time.Now()
			select {
			case jobs <- job{i: i, slot: slot}:
				g.blocked.Add(int64(time.Since(t)))
			case <-ctx.Done():
				break pace
			}
		}
		g.sent.Add(1)
	}
	close(jobs)
	wg.Wait()
}

func (g *generator) register(ctx context.Context, j job) {
	t := time.Now()
	g.w.lagMs[j.i] = int32(min(t.Sub(j.slot).Milliseconds(), math.MaxInt32))
	at := time.UnixMilli(g.w.due[j.i].Load())
	req := vigil.RegisterRequest{Kind: vigil.KindTimer, Recipient: recipientName(j.i % g.readers), Note: strconv.Itoa(j.i),
		Predicate: json.RawMessage(`{"at":"` + vigil.FormatTime(at) + `"}`)}
	w, err := g.c.Register(ctx, req)
	g.w.regLatMs[j.i] = int32(min(time.Since(t).Milliseconds(), math.MaxInt32))
	if err != nil {
		g.w.regState[j.i].Store(regFailed)
		if ctx.Err() == nil {
			g.errs.add("register "+strconv.Itoa(j.i), err)
		}
		return
	}
	if w.Existing || w.AnsweredAtCreation {
		g.existing.Add(1)
		g.w.regState[j.i].Store(regFailed)
		g.errs.add("register "+strconv.Itoa(j.i), fmt.Errorf("existing=%t answered_at_creation=%t", w.Existing, w.AnsweredAtCreation))
		return
	}
	g.w.regHash[j.i].Store(idHash(w.ID))
	g.w.regState[j.i].Store(regOK)
	g.ok.Add(1)
}

func recipientName(r int) string { return "soak-r" + strconv.Itoa(r) }

// readers are the standing long-poll readers, one per recipient.
type readers struct {
	c    *client.Client
	w    *watches
	n    int
	wait time.Duration
	errs errorCounts

	polls      atomic.Int64 // answered polls
	empty      atomic.Int64 // answered with no message (the wait ran out)
	received   atomic.Int64 // messages
	phantom    atomic.Int64 // messages for no watch the generator sent
	duplicates atomic.Int64 // a second message for a watch
	disorder   atomic.Int64 // a seq not above the reader's last
	started    atomic.Int64 // readers that have sent their first poll
	phMu       sync.Mutex
	phExamples []string
}

// run starts the readers, spread over ramp, and returns when all of them
// have stopped after ctx ended.
func (rs *readers) run(ctx context.Context, ramp time.Duration) {
	var wg sync.WaitGroup
	start := time.Now()
	for r := range rs.n {
		at := start.Add(time.Duration(int64(ramp) * int64(r) / int64(rs.n)))
		if d := time.Until(at); d > 0 {
			select {
			case <-ctx.Done():
			case <-time.After(d):
			}
		}
		if ctx.Err() != nil {
			break
		}
		wg.Go(func() { rs.read(ctx, recipientName(r)) })
	}
	wg.Wait()
}

// read long-polls one mailbox as the named reader with ack=true, so each
// answer moves the reader's cursor past what it returned.
func (rs *readers) read(ctx context.Context, recipient string) {
	var lastSeq int64
	first := true
	for ctx.Err() == nil {
		if first {
			rs.started.Add(1)
			first = false
		}
		page, err := rs.c.Messages(ctx, vigil.MessagesRequest{Recipient: recipient, Reader: readerName, Wait: rs.wait, Ack: true, Limit: 100})
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			rs.errs.add("messages of "+recipient, err)
			select {
			case <-ctx.Done():
			case <-time.After(time.Second):
			}
			continue
		}
		now := time.Now()
		rs.polls.Add(1)
		if len(page.Messages) == 0 {
			rs.empty.Add(1)
		}
		for _, m := range page.Messages {
			if m.Seq <= lastSeq {
				rs.disorder.Add(1)
			}
			lastSeq = max(lastSeq, m.Seq)
			rs.take(m, now)
		}
	}
}

// messageData is the part of a message's data the soak reads: the note,
// which is the watch's index.
type messageData struct {
	Note string `json:"note"`
}

func (rs *readers) take(m *vigil.Message, now time.Time) {
	rs.received.Add(1)
	var d messageData
	_ = json.Unmarshal(m.Data, &d)
	i, err := strconv.Atoi(d.Note)
	if err != nil || i < 0 || i >= rs.w.n || rs.w.due[i].Load() == 0 {
		rs.phantom.Add(1)
		rs.phMu.Lock()
		if len(rs.phExamples) < 5 {
			rs.phExamples = append(rs.phExamples, fmt.Sprintf("message %s (seq %d, watch %s, note %q)", m.ID, m.Seq, m.WatchID, d.Note))
		}
		rs.phMu.Unlock()
		return
	}
	if rs.w.recv[i].Add(1) > 1 {
		rs.duplicates.Add(1)
		return
	}
	rs.w.recvHash[i].Store(idHash(m.WatchID))
	if m.Type != vigil.MessageTypeFor(vigil.StateFired) {
		rs.w.badType[i].Add(1)
	}
	rs.w.lateMs[i] = int32(m.CreatedAt.UnixMilli() - rs.w.due[i].Load())
	rs.w.delivMs[i] = int32(now.Sub(m.CreatedAt).Milliseconds())
}
