package deliver_test

import (
	"context"
	"log/slog"
	"net/http"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/vigil-run/vigil"
	"github.com/vigil-run/vigil/deliver"
	"github.com/vigil-run/vigil/deliver/webhook"
	"github.com/vigil-run/vigil/store/memstore"
)

// getManyFails is a memory store whose WatchGetMany fails once (a
// database blip between two statements).
type getManyFails struct {
	*memstore.Store
	failed atomic.Bool
}

func (s *getManyFails) WatchGetMany(ctx context.Context, ids []string) ([]*vigil.Watch, error) {
	if !s.failed.Swap(true) {
		return nil, &vigil.Error{Code: vigil.CodeUnavailable, Message: "the database is unavailable"}
	}
	return s.Store.WatchGetMany(ctx, ids)
}

// resumeAfterAFailure leaves watch "a" (delivery options opts) settled
// with its webhook receipt left sending, resumes twice, the first time
// failing after the store turned "sending" into "unknown", then runs the
// dispatcher until it is idle. It returns the webhook's receiver and the
// dispatcher, and whether the first resume failed. Call inside synctest.
func resumeAfterAFailure(t *testing.T, opts string) (*receiver, *deliver.Dispatcher, bool) {
	t.Helper()
	st := &getManyFails{Store: memstore.New()}
	settled(t, st, "a", opts, vigil.StateFired)
	if err := st.ReceiptUpsert(t.Context(), vigil.ReceiptUpsertParams{ReceiptRecord: vigil.ReceiptRecord{WatchID: "a", MessageID: "msg-a",
		Receipt: vigil.Receipt{Channel: "webhook", Status: vigil.ReceiptSending, Attempts: 1, UpdatedAt: time.Now()}}}); err != nil {
		t.Fatal(err)
	}
	rv := &receiver{answer: func(int) (int, bool, bool) { return http.StatusOK, false, false }}
	ch, err := webhook.New(webhook.Config{Client: &http.Client{Transport: rv}, Secrets: []string{testSecret}})
	if err != nil {
		t.Fatal(err)
	}
	d := deliver.New(deliver.Config{Store: st, Channels: map[string]deliver.Channel{deliver.ChannelWebhook: ch}, Logger: slog.New(slog.DiscardHandler)})
	failed := d.Resume(t.Context()) != nil
	if err := d.Resume(t.Context()); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = d.Run(ctx); close(done) }()
	synctest.Wait()
	cancel()
	<-done
	return rv, d, failed
}

// TestResumeRetryUnknownAfterAFailedResume: a resume whose reading
// of the watches fails after the store turned "sending" into "unknown"
// is tried again (a replica's arm loop does, a second later; a SQLite
// daemon at its next start). The webhook that opted into retry_unknown
// must still be resent: the first try's conversion must not hide it.
func TestResumeRetryUnknownAfterAFailedResume(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rv, _, failed := resumeAfterAFailure(t, `{"webhook":{"retry_unknown":true,"url":"https://hooks.example/in"}}`)
		if !failed {
			t.Fatal("the first resume did not fail")
		}
		if got := rv.requests(); len(got) != 1 {
			t.Errorf("requests = %d, want 1: the webhook opted into retry_unknown and was left sending", len(got))
		}
	})
}

// TestResumeUnknownNotResentAfterAFailedResume: the same without
// retry_unknown: nothing is sent.
func TestResumeUnknownNotResentAfterAFailedResume(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rv, d, _ := resumeAfterAFailure(t, hookOpts)
		if got := rv.requests(); len(got) != 0 {
			t.Errorf("requests = %d, want 0 (unknown is never resent without retry_unknown)", len(got))
		}
		if n := d.Pending(); n != 0 {
			t.Errorf("Pending() = %d, want 0", n)
		}
	})
}

// TestRetryUnknownSurvivesAFailedStart: a webhook that opted into
// retry_unknown is on its way when the daemon stops, and is cut short (its
// receipt stays sending). The next start's resume fails after the store
// resumed the receipt (reading the watches fails, and that start ends
// there); the start after it must still send the webhook again. Before,
// the first resume turned the receipt unknown, and only that start's
// dispatcher, gone with it, knew it was to be resent.
func TestRetryUnknownSurvivesAFailedStart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := memstore.New()
		first := build(t, mem, func(int) (int, bool, bool) { return http.StatusOK, true, false }, nil)
		startRun(t, first)
		w, m := settled(t, mem, "a", `{"webhook":{"retry_unknown":true,"url":"https://hooks.example/in"}}`, vigil.StateFired)
		first.d.Deliver(w, m)
		synctest.Wait()
		first.stop()
		if rc := first.receipt(t, "a", "webhook"); rc.Status != vigil.ReceiptSending || rc.Attempts != 1 {
			t.Fatalf("after the cut: receipt = %+v, want sending, attempt 1", rc)
		}

		second := deliver.New(deliver.Config{Store: &getManyFails{Store: mem}, Logger: slog.New(slog.DiscardHandler)})
		if err := second.Resume(t.Context()); err == nil {
			t.Fatal("the second start's resume did not fail")
		}

		third := build(t, mem, func(int) (int, bool, bool) { return http.StatusOK, false, false }, nil)
		if err := third.d.Resume(t.Context()); err != nil {
			t.Fatal(err)
		}
		startRun(t, third)
		time.Sleep(time.Hour)
		synctest.Wait()
		if n := len(third.rv.requests()); n != 1 {
			t.Errorf("the third start posted the webhook %d times, want once (retry_unknown); log:\n%s", n, third.logs)
		}
		if rc := third.receipt(t, "a", "webhook"); rc.Status != vigil.ReceiptDelivered || rc.Attempts != 2 {
			t.Errorf("receipt = %+v, want delivered on attempt 2", rc)
		}
	})
}
