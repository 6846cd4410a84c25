package daemon

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/vigil-run/vigil"
	"github.com/vigil-run/vigil/deliver"
	"github.com/vigil-run/vigil/deliver/webhook"
	"github.com/vigil-run/vigil/internal/pgtest"
	"github.com/vigil-run/vigil/scheduler"
	"github.com/vigil-run/vigil/store/postgres"
)

// TestReleaseWaitsForDeliveryInFlight: replica a holds every shard and a
// webhook attempt of a watch of one of them is in flight when replica b
// joins and a's lease step releases half the shards to it. The release
// waits for the attempt (the receiver answers 503 only once the step has
// begun to wait), whose result is recorded while a's fence still holds
// the shard: the receipt is retrying, b resumes it on its ladder and sends
// it again. Before, a's fence forgot the shard first: the 503 could not be
// recorded, b read the receipt back as unknown and never sent it again.
// The dispatchers run on fixed clocks (b's an hour on, past the retry's
// rung); the steps are driven by hand.
func TestReleaseWaitsForDeliveryInFlight(t *testing.T) {
	u := pgtest.Schema(t, "vigil_release")
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute) // a failure guard only
	defer cancel()
	open := func(replica string) *postgres.Store {
		st, err := postgres.Open(ctx, u, &postgres.Options{MaxConns: 4, Replica: replica})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		return st
	}
	pa, pb := open("a"), open("b")

	// The receiver: the first request waits until the test lets it go,
	// then answers 503; the next is accepted.
	arrived, answer, again := make(chan struct{}), make(chan struct{}), make(chan int, 4)
	var mu sync.Mutex
	requests := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		requests++
		n := requests
		mu.Unlock()
		if n == 1 {
			close(arrived)
			select {
			case <-answer:
			case <-r.Context().Done():
			}
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		again <- n
	}))
	defer srv.Close()
	wh, err := webhook.New(webhook.Config{Secrets: []string{"whsec_c2VjcmV0LXNlY3JldC1zZWNyZXQtc2VjcmV0LXh5eg=="}})
	if err != nil {
		t.Fatal(err)
	}

	t0 := time.Now().UTC().Truncate(time.Millisecond)
	// Closed at a's log line that its release waits for the attempt.
	draining := make(chan struct{})
	var drainingOnce sync.Once
	drainLog := onRecord(func(msg string) {
		if msg == "waiting for the delivery attempts in flight on watches changing hands" {
			drainingOnce.Do(func() { close(draining) })
		}
	})
	recorded := func(into chan string) func(string, string) {
		return func(_, status string) { into <- status }
	}
	aReceipts, bReceipts := make(chan string, 8), make(chan string, 8)
	replica := func(st *postgres.Store, id string, now time.Time, log slog.Handler, receipts chan string) (*shards, *deliver.Dispatcher) {
		disp := deliver.New(deliver.Config{Store: st, Channels: map[string]deliver.Channel{deliver.ChannelWebhook: wh},
			NowFunc: func() time.Time { return now }, HoldsFunc: st.Holds, Logger: slog.New(log), ReceiptFunc: recorded(receipts)})
		dctx, stop := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() { defer close(done); _ = disp.Run(dctx) }()
		t.Cleanup(func() { stop(); <-done })
		sched := scheduler.New(scheduler.Config{})
		discard := slog.New(slog.DiscardHandler)
		s, err := newShards(Config{}, st, id, nil, sched, disp, newFSWake(discard, sched), nil, nil, discard)
		if err != nil {
			t.Fatal(err)
		}
		return s, disp
	}
	sa, _ := replica(pa, "a", t0, drainLog, aReceipts)
	sb, db := replica(pb, "b", t0.Add(time.Hour), slog.DiscardHandler, bReceipts)

	// a alone takes every shard.
	if err := sa.mgr.Step(ctx); err != nil {
		t.Fatal(err)
	}
	if got := sa.held(); len(got) != postgres.Shards {
		t.Fatalf("a alone holds %d shards, want %d", len(got), postgres.Shards)
	}
	// A watch of the last shard, which a gives up to b, settles; its
	// webhook goes out and hangs.
	const shard = postgres.Shards - 1
	var id string
	for i := 0; id == ""; i++ {
		if c := fmt.Sprintf("w-release-%d", i); postgres.ShardOf(c) == shard {
			id = c
		}
	}
	w := &vigil.Watch{ID: id, Recipient: "r", Kind: vigil.KindTimer, Mode: vigil.ModeUntil, Predicate: []byte(`{"in":"1h"}`),
		CreatedAt: t0, Deadline: t0.Add(time.Hour), Deliver: []byte(`{"webhook":{"url":"` + srv.URL + `/hook"}}`)}
	w.Identity = vigil.Identity(w.Recipient, w.Kind, w.Mode, w.Predicate)
	if _, err := pa.WatchCreate(ctx, vigil.WatchCreateParams{Watch: w}); err != nil {
		t.Fatal(err)
	}
	m := &vigil.Message{ID: "m-" + id, Recipient: "r", WatchID: id, Type: vigil.MessageTypeFor(vigil.StateFired), Text: "fired", CreatedAt: t0}
	won, err := pa.WatchSettle(ctx, []vigil.WatchSettleParams{{ID: id, State: vigil.StateFired,
		Outcome: &vigil.Outcome{State: vigil.StateFired}, SettledAt: t0, Message: m}})
	if err != nil || !won[0] {
		t.Fatalf("settling on a: %v, %v", won, err)
	}
	settled, err := pa.WatchGet(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	sa.disp.Deliver(settled, m)
	waitClosed(ctx, t, arrived, "the webhook attempt to reach the receiver")

	// b joins; a's next step releases the surplus, shard 63 among it. The
	// receiver answers once the step waits for the attempt (or, without
	// that wait, once the step is over).
	if err := sb.mgr.Step(ctx); err != nil {
		t.Fatal(err)
	}
	stepped := make(chan error, 1)
	go func() { stepped <- sa.mgr.Step(ctx) }()
	select {
	case <-draining:
	case err := <-stepped:
		t.Errorf("a's step released its shards (%v) without waiting for the attempt in flight", err)
		stepped <- err
	case <-ctx.Done():
		t.Fatal("a's step neither waited for the attempt in flight nor ended")
	}
	close(answer)
	select {
	case err := <-stepped:
		if err != nil {
			t.Fatal(err)
		}
	case <-ctx.Done():
		t.Fatal("a's step never ended")
	}
	if slices.Contains(sa.held(), shard) {
		t.Fatalf("a still holds shard %d after the release: %v", shard, sa.held())
	}
	select {
	case st := <-aReceipts:
		if st != vigil.ReceiptRetrying {
			t.Errorf("a recorded the 503 as %s, want %s", st, vigil.ReceiptRetrying)
		}
	default:
		t.Error("a's step ended before the attempt in flight recorded its 503")
	}

	// b takes the shards released and resumes their deliveries, as its
	// arming of them does (shards.prime).
	if err := sb.mgr.Step(ctx); err != nil {
		t.Fatal(err)
	}
	var taken []int
	select {
	case taken = <-sb.gained:
	default:
	}
	if !slices.Contains(taken, shard) {
		t.Fatalf("b took shards %v, not %d", taken, shard)
	}
	var res vigil.ReceiptsResumeResult
	if err := db.ResumeWith(ctx, func(ctx context.Context, p vigil.ReceiptsResumeParams) (vigil.ReceiptsResumeResult, error) {
		r, err := pb.ReceiptsResumeShards(ctx, p, taken)
		res = r
		return r, err
	}); err != nil {
		t.Fatal(err)
	}
	if slices.ContainsFunc(res.Unknown, func(r vigil.ReceiptRecord) bool { return r.WatchID == id }) ||
		!slices.ContainsFunc(res.Retrying, func(r vigil.ReceiptRecord) bool { return r.WatchID == id }) {
		t.Fatalf("b resumed the 503 as unknown %v, retrying %v; want it retrying", res.Unknown, res.Retrying)
	}
	// The retry's rung has passed by b's clock: b sends it again.
	select {
	case <-again:
	case <-ctx.Done():
		t.Fatal("b never retried the webhook")
	}
	select {
	case st := <-bReceipts:
		if st != vigil.ReceiptDelivered {
			t.Fatalf("b's retry recorded %s, want %s", st, vigil.ReceiptDelivered)
		}
	case <-ctx.Done():
		t.Fatal("b's retry recorded nothing")
	}
	got, err := pb.WatchGet(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Receipts) != 1 || got.Receipts[0].Status != vigil.ReceiptDelivered || got.Receipts[0].Attempts != 2 {
		t.Fatalf("receipts %+v, want the webhook delivered at the second attempt", got.Receipts)
	}
}

// waitClosed waits for ch to close, failing t when ctx ends first.
func waitClosed(ctx context.Context, t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-ctx.Done():
		t.Fatalf("waited in vain for %s", what)
	}
}
