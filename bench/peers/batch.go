package main

import (
	"context"
	"fmt"
	"syscall"
	"time"

	"github.com/riverqueue/river"

	"github.com/vigil-run/vigil"
)

// batcher is a peer that registers many waits in one call, durably where
// the peer is durable: waits from, from+1, … due at ats.
type batcher interface {
	RegisterBatch(ctx context.Context, from int, ats []time.Time) error
}

// batch: n waits due in an hour, registered from one goroutine in calls of
// size each; throughput, each call's latency, and the CPU spent per wait
// by this process (the client, or the whole peer when it runs in-process)
// and by the peer's own processes (the daemon; PostgreSQL's). A peer with
// no batch call is skipped.
func batch(ctx context.Context, open func(string, int) (peer, error), name string, n, size int) ([]result, error) {
	p, err := open(name, n)
	if err != nil {
		return nil, err
	}
	defer p.Close()
	b, ok := p.(batcher)
	if !ok {
		return nil, nil
	}
	at := time.Now().Add(time.Hour)
	ats := make([]time.Time, size)
	var lat []time.Duration
	self0 := selfCPU()
	peer0, _ := usage(p.Pids())
	start := time.Now()
	for from := 0; from < n; from += size {
		k := min(size, n-from)
		for j := range k {
			ats[j] = at.Add(time.Duration(from+j) * time.Millisecond)
		}
		t := time.Now()
		if err := b.RegisterBatch(ctx, from, ats[:k]); err != nil {
			return nil, err
		}
		lat = append(lat, time.Since(t))
	}
	el := time.Since(start)
	self1 := selfCPU()
	peer1, _ := usage(p.Pids())
	us := func(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) / float64(n) }
	return []result{{label: fmt.Sprintf("size=%d n=%d", size, n), values: map[string]float64{
		"per_s":                  float64(n) / el.Seconds(),
		"call_p50_ms":            ms(quantile(lat, 0.5)),
		"call_p99_ms":            ms(quantile(lat, 0.99)),
		"this_cpu_us_per_wait":   us(self1 - self0),
		"server_cpu_us_per_wait": us(peer1 - peer0),
	}}}, nil
}

// selfCPU is this process's user and system CPU so far.
func selfCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// RegisterBatch implements batcher: one engine.RegisterBatch call.
func (p *inproc) RegisterBatch(ctx context.Context, from int, ats []time.Time) error {
	reqs := make([]vigil.RegisterRequest, len(ats))
	for j, at := range ats {
		reqs[j] = timerReq(from+j, at)
	}
	res, err := p.eng.RegisterBatch(ctx, reqs)
	return batchErr(res, err)
}

// RegisterBatch implements batcher: one POST /v1/watches/batch.
func (p *served) RegisterBatch(ctx context.Context, from int, ats []time.Time) error {
	reqs := make([]vigil.RegisterRequest, len(ats))
	for j, at := range ats {
		reqs[j] = timerReq(from+j, at)
		reqs[j].Note = fmt.Sprint(from + j)
	}
	res, err := p.c.RegisterBatch(ctx, reqs)
	return batchErr(res, err)
}

func batchErr(res []vigil.BatchResult, err error) error {
	if err != nil {
		return err
	}
	for _, r := range res {
		if r.Status != vigil.BatchCreated {
			return fmt.Errorf("a wait of the batch: %s %v", r.Status, r.Err)
		}
	}
	return nil
}

// RegisterBatch implements batcher: River's InsertManyFast (PostgreSQL
// COPY in one transaction).
func (p *riverPeer) RegisterBatch(ctx context.Context, from int, ats []time.Time) error {
	ps := make([]river.InsertManyParams, len(ats))
	for j, at := range ats {
		ps[j] = river.InsertManyParams{Args: waitArgs{I: from + j}, InsertOpts: &river.InsertOpts{ScheduledAt: at}}
	}
	_, err := p.client.InsertManyFast(ctx, ps)
	return err
}
