package deliver_test

import (
	"context"
	"net/http"
	"path/filepath"
	"testing"
	"testing/synctest"
	"time"

	"github.com/vigil-run/vigil"
	"github.com/vigil-run/vigil/deliver"
	"github.com/vigil-run/vigil/deliver/webhook"
	"github.com/vigil-run/vigil/store/memstore"
	"github.com/vigil-run/vigil/store/sqlite"
)

// connecting is a transport still connecting (a slow TCP handshake, TLS):
// it never writes the request, and gives up when the request's context
// ends.
type connecting struct{}

func (connecting) RoundTrip(req *http.Request) (*http.Response, error) {
	<-req.Context().Done()
	return nil, req.Context().Err()
}

// TestShutdownBeforeSent: a webhook still connecting when the daemon shuts
// down gracefully never left, and its channel says so: the receipt is
// retrying, due at once, and the next start sends it. It was left
// "sending", read back as unknown and never sent.
func TestShutdownBeforeSent(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := memstore.New()
		slow, err := webhook.New(webhook.Config{Client: &http.Client{Transport: connecting{}}, Secrets: []string{testSecret}})
		if err != nil {
			t.Fatal(err)
		}
		first := &rig{st: st, d: deliver.New(deliver.Config{Store: st, Channels: map[string]deliver.Channel{deliver.ChannelWebhook: slow}})}
		startRun(t, first)
		w, m := settled(t, st, "w1", hookOpts, vigil.StateFired)
		first.d.Deliver(w, m)
		synctest.Wait()
		if rc := first.receipt(t, "w1", "webhook"); rc.Status != vigil.ReceiptSending {
			t.Fatalf("receipt while connecting = %+v, want sending", rc)
		}
		stopped := time.Now()
		first.stop() // graceful shutdown (SIGTERM)
		rc := first.receipt(t, "w1", "webhook")
		if rc.Status != vigil.ReceiptRetrying || rc.Attempts != 1 || !rc.UpdatedAt.Equal(stopped.UTC()) {
			t.Fatalf("receipt after the shutdown = %+v, want retrying after 1 attempt, at the shutdown", rc)
		}

		// The next start, with a receiver that answers: sent at once.
		next := build(t, st, func(int) (int, bool, bool) { return http.StatusOK, false, false }, nil)
		if err := next.d.Resume(t.Context()); err != nil {
			t.Fatal(err)
		}
		startRun(t, next)
		synctest.Wait()
		if got := next.rv.requests(); len(got) != 1 || got[0].id != m.ID || !got[0].at.Equal(stopped) {
			t.Errorf("requests at the next start = %+v, want one under %s at once", got, m.ID)
		}
		if rc := next.receipt(t, "w1", "webhook"); rc.Status != vigil.ReceiptDelivered || rc.Attempts != 2 {
			t.Errorf("receipt after the next start = %+v, want delivered on attempt 2", rc)
		}
		next.stop()
	})
}

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
