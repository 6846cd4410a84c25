package deliver_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/vigil-run/vigil"
	"github.com/vigil-run/vigil/deliver"
	"github.com/vigil-run/vigil/store/sqlite"
)

// endsAnyway is a channel whose attempt outlives the dispatcher's context,
// as an SMTP conversation on its connection's deadline does: the shutdown
// comes while the mail is handed over, and the server accepts it.
type endsAnyway struct{ started chan struct{} }

func (c *endsAnyway) Send(ctx context.Context, _ *deliver.Delivery) (bool, error) {
	close(c.started)
	<-ctx.Done()
	return false, nil
}

// TestShutdownRecordsDelivered: an attempt that succeeds while the daemon
// shuts down is recorded delivered, on the SQLite store too, which refuses
// a write whose context is done: the receipt that ends an attempt is
// written on a context of its own, so it is not left "sending", read back
// as unknown at the next start.
func TestShutdownRecordsDelivered(t *testing.T) {
	st, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "v.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	mail := &endsAnyway{started: make(chan struct{})}
	d := deliver.New(deliver.Config{Store: st, Channels: map[string]deliver.Channel{deliver.ChannelEmail: mail}})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = d.Run(ctx); close(done) }()
	w, m := settled(t, st, "w1", `{"email":{"to":"ops@example.com"}}`, vigil.StateFired)
	d.Deliver(w, m)
	<-mail.started
	cancel() // graceful shutdown while the mail is handed over
	<-done
	if err := deliver.New(deliver.Config{Store: st}).Resume(t.Context()); err != nil { // the next start
		t.Fatal(err)
	}
	got, err := st.WatchGet(t.Context(), "w1")
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Receipts) != 1 || got.Receipts[0].Status != vigil.ReceiptDelivered || got.Receipts[0].Attempts != 1 {
		t.Errorf("receipts after the shutdown and the next start = %+v, want delivered after 1 attempt", got.Receipts)
	}
}
