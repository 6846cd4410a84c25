package deliver_test

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"testing/synctest"

	"github.com/vigil-run/vigil"
	"github.com/vigil-run/vigil/deliver"
	"github.com/vigil-run/vigil/store/memstore"
)

// sentChannel records the watches it was asked to deliver.
type sentChannel struct {
	mu   sync.Mutex
	sent []string
}

func (c *sentChannel) Send(_ context.Context, d *deliver.Delivery) (bool, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.sent = append(c.sent, d.Watch.ID)
	return false, nil
}

func (c *sentChannel) ids() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.sent...)
}

// TestExecDeliveryRechecksAccess: a command or resume delivery runs a
// program, which the exec scope of the watch's token allowed. Like an
// email, it asks AccessFunc just before it runs: a watch whose token was
// revoked since it settled (the run queued, retried, or resumed at a
// restart) runs nothing, and its receipt is undeliverable saying why; a
// watch whose token still holds runs.
func TestExecDeliveryRechecksAccess(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := memstore.New()
		cmd, res := &sentChannel{}, &sentChannel{}
		access := func(_ context.Context, w *vigil.Watch) error {
			if strings.HasPrefix(w.ID, "revoked") {
				return deliver.Denied("Cancelled: the token that created this watch was revoked.")
			}
			return nil
		}
		d := deliver.New(deliver.Config{Store: st, Logger: slog.New(slog.DiscardHandler), AccessFunc: access,
			Channels: map[string]deliver.Channel{deliver.ChannelCommand: cmd, deliver.ChannelResume: res}})
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { _ = d.Run(ctx); close(done) }()
		defer func() { cancel(); <-done }()

		const cmdOpts = `{"command":{"shell":"deploy.sh","on":"any","timeout":"1m"}}`
		const resOpts = `{"resume":{"harness":"claude","session":"3f9f74a6-6b7c-4a3e-9e1d-2f1f0a9b8c7d","on":"any","timeout":"10m"}}`
		for id, opts := range map[string]string{"revoked-cmd": cmdOpts, "revoked-res": resOpts, "valid-cmd": cmdOpts, "valid-res": resOpts} {
			w, m := settled(t, st, id, opts, vigil.StateFired)
			d.Deliver(w, m)
		}
		synctest.Wait()
		if got := cmd.ids(); len(got) != 1 || got[0] != "valid-cmd" {
			t.Errorf("commands run for %v; want only valid-cmd's", got)
		}
		if got := res.ids(); len(got) != 1 || got[0] != "valid-res" {
			t.Errorf("sessions resumed for %v; want only valid-res's", got)
		}
		for id, channel := range map[string]string{"revoked-cmd": deliver.ChannelCommand, "revoked-res": deliver.ChannelResume} {
			w, err := st.WatchGet(t.Context(), id)
			if err != nil {
				t.Fatal(err)
			}
			if len(w.Receipts) != 1 || w.Receipts[0].Channel != channel || w.Receipts[0].Status != vigil.ReceiptUndeliverable ||
				!strings.Contains(w.Receipts[0].Detail, "revoked") || !strings.Contains(w.Receipts[0].Detail, "nothing was run") {
				t.Errorf("%s: receipts %+v; want one undeliverable %s receipt saying the token was revoked and nothing ran", id, w.Receipts, channel)
			}
		}
	})
}
