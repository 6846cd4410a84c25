package daemon_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vigil-run/vigil"
	"github.com/vigil-run/vigil/internal/daemontest"
)

// heard is a slog handler that closes each channel of its map at the
// first record with its message.
type heard struct {
	mu   sync.Mutex
	msgs map[string]chan struct{}
}

func (h *heard) Enabled(context.Context, slog.Level) bool { return true }
func (h *heard) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h *heard) WithGroup(string) slog.Handler            { return h }
func (h *heard) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if ch, ok := h.msgs[r.Message]; ok {
		close(ch)
		delete(h.msgs, r.Message)
	}
	return nil
}

// TestPostgresStopRecordsDeliveryInFlight: a replica shut down gracefully
// while a webhook attempt is in flight lets it finish (the receiver
// answers only once the replica has begun to stop and waits for it) and
// records it delivered while its lease, and the fence the receipt is
// written on, still hold; it lets go of its shards only then, and the
// replica that takes them over reads the receipt as delivered. Before,
// the shutdown cut the attempt mid-send (and dropped the fence at the same
// time): the receipt stayed sending, and the next holder read it back as
// unknown, never to be sent again.
func TestPostgresStopRecordsDeliveryInFlight(t *testing.T) {
	t.Parallel()
	url := pgStore(t)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute) // a failure guard only
	defer cancel()

	// The replica stops: its dispatcher waits for the attempt in flight,
	// and its lease manager holds the shards meanwhile.
	waiting, holding := make(chan struct{}), make(chan struct{})
	stopping := &heard{msgs: map[string]chan struct{}{
		"stopping: letting the delivery attempts in flight finish":                             waiting,
		"holding the shards until the delivery attempts in flight have recorded their results": holding,
	}}
	arrived := make(chan struct{}, 4)
	var hits atomic.Int32
	over := make(chan struct{})
	recv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body) // from here a request given up on ends r's context
		hits.Add(1)
		arrived <- struct{}{}
		// Answer only once the replica stops (or gave up on the request).
		for _, ch := range []chan struct{}{waiting, holding} {
			select {
			case <-ch:
			case <-r.Context().Done():
			case <-over:
			}
		}
		w.WriteHeader(http.StatusOK)
	}))
	defer recv.Close()
	defer close(over)

	cfg := testConfig(t.TempDir(), t.TempDir())
	cfg.Store = url
	a := daemontest.Start(t, cfg, slog.New(stopping))
	ca := newClient(t, &running{Daemon: a.Daemon, stop: a.Stop})
	if got := shardsOf(t, 64, ca); len(got[0]) != 64 {
		t.Fatalf("one replica holds %d shards, want 64", len(got[0]))
	}
	w, err := ca.Register(ctx, vigil.RegisterRequest{Kind: vigil.KindTimer, Recipient: "agent", Predicate: json.RawMessage(`{"in":"1s"}`),
		Deliver: json.RawMessage(`{"webhook":{"url":"` + recv.URL + `/hook"}}`)})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-arrived:
	case <-ctx.Done():
		t.Fatal("the receiver got no request")
	}
	stopped := make(chan error, 1)
	go func() { stopped <- a.Stop() }() // graceful shutdown (SIGTERM)
	select {
	case err := <-stopped:
		if err != nil {
			t.Fatalf("stopping replica a: %v", err)
		}
	case <-ctx.Done():
		t.Fatal("replica a never stopped")
	}

	// Replica b takes every shard over and resumes their deliveries.
	cfg.DataDir = t.TempDir()
	b := start(t, cfg)
	cb := newClient(t, b)
	shardsOf(t, 64, cb)
	got, err := cb.Watch(ctx, w.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.State != vigil.StateFired || len(got.Receipts) != 1 || got.Receipts[0].Status != vigil.ReceiptDelivered || got.Receipts[0].Attempts != 1 {
		t.Fatalf("on replica b: state %s, receipts %+v; want fired, the webhook delivered on attempt 1", got.State, got.Receipts)
	}
	if n := hits.Load(); n != 1 {
		t.Errorf("the receiver got %d requests, want 1", n)
	}
}
