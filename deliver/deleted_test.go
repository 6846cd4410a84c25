package deliver_test

import (
	"context"
	"log/slog"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/vigil-run/vigil"
	"github.com/vigil-run/vigil/deliver"
	"github.com/vigil-run/vigil/store/memstore"
)

// heldSend is a channel whose Send waits for release, then answers ok.
type heldSend struct {
	release chan struct{}
	sends   atomic.Int32
}

func (g *heldSend) Send(ctx context.Context, _ *deliver.Delivery) (bool, error) {
	g.sends.Add(1)
	<-g.release
	return false, nil
}

// countingStore counts the receipt writes that end an attempt.
type finalReceipts struct {
	*memstore.Store
	finals atomic.Int32
}

func (s *finalReceipts) ReceiptUpsert(ctx context.Context, p vigil.ReceiptUpsertParams) error {
	if !p.Claim {
		s.finals.Add(1)
	}
	return s.Store.ReceiptUpsert(ctx, p)
}

// TestWatchDeletedWhileItsDeliveryIsSent: a settled watch deleted (vigil rm, or
// pruned) while its delivery is in flight. The final receipt write finds
// no watch (ErrNotFound); the job must be dropped, not retried every
// storeRetry forever.
func TestWatchDeletedWhileItsDeliveryIsSent(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := &finalReceipts{Store: memstore.New()}
		g := &heldSend{release: make(chan struct{})}
		d := deliver.New(deliver.Config{Store: st, Channels: map[string]deliver.Channel{deliver.ChannelWebhook: g},
			Logger: slog.New(slog.DiscardHandler)})
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { _ = d.Run(ctx); close(done) }()
		defer func() { cancel(); <-done }()

		w, m := settled(t, st, "w1", hookOpts, vigil.StateFired)
		d.Deliver(w, m)
		synctest.Wait()
		if g.sends.Load() != 1 {
			t.Fatalf("sends = %d, want 1", g.sends.Load())
		}
		if err := st.WatchDelete(context.Background(), "w1"); err != nil {
			t.Fatal(err)
		}
		close(g.release)
		synctest.Wait()
		time.Sleep(time.Hour)
		synctest.Wait()
		if n := st.finals.Load(); n != 1 {
			t.Errorf("final receipt written %d times in an hour for a deleted watch, want 1", n)
		}
		if n := d.Pending(); n != 0 {
			t.Errorf("Pending() = %d, want 0: the watch is gone", n)
		}
	})
}
