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

// flakyStore is a memory store that refuses the receipt written after an
// attempt (not a claim) while refuse says so, as a database that is
// briefly unavailable, or the fence of a replica that lost the watch's
// shard, does.
type flakyStore struct {
	*memstore.Store
	refuse  func() bool
	refused atomic.Int32
}

func (s *flakyStore) ReceiptUpsert(ctx context.Context, p vigil.ReceiptUpsertParams) error {
	if !p.Claim && s.refuse() {
		s.refused.Add(1)
		return &vigil.Error{Code: vigil.CodeUnavailable, Message: "the database is unavailable"}
	}
	return s.Store.ReceiptUpsert(ctx, p)
}

// flakyRig is a rig whose dispatcher writes to st.
func flakyRig(t *testing.T, st *flakyStore, answer func(n int) (int, bool, bool), holds func(string) bool) *rig {
	t.Helper()
	r := &rig{st: st.Store, rv: &receiver{answer: answer}, stop: func() {}}
	ch, err := webhook.New(webhook.Config{Client: &http.Client{Transport: r.rv}, Secrets: []string{testSecret}})
	if err != nil {
		t.Fatal(err)
	}
	r.d = deliver.New(deliver.Config{Store: st, Channels: map[string]deliver.Channel{deliver.ChannelWebhook: ch},
		Logger: slog.New(slog.DiscardHandler), HoldsFunc: holds})
	startRun(t, r)
	return r
}

// TestReceiptWrittenAgain: when the store fails to record what an attempt
// answered (a 503), the receipt is written again later and the retry goes
// out on the ladder. The job was dropped: the receipt stayed "sending" and
// the delivery was not retried until the next start, which found it
// unknown.
func TestReceiptWrittenAgain(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var down atomic.Bool
		down.Store(true)
		st := &flakyStore{Store: memstore.New(), refuse: down.Load}
		r := flakyRig(t, st, func(n int) (int, bool, bool) {
			if n == 1 {
				return http.StatusServiceUnavailable, false, false
			}
			return http.StatusOK, false, false
		}, nil)
		w, m := settled(t, st, "w1", hookOpts, vigil.StateFired)
		r.d.Deliver(w, m)
		synctest.Wait()
		if rc := r.receipt(t, "w1", "webhook"); rc.Status != vigil.ReceiptSending || st.refused.Load() != 1 {
			t.Fatalf("receipt after the refused write = %+v (%d refused), want sending, 1 refused", rc, st.refused.Load())
		}
		down.Store(false) // the database is back
		time.Sleep(time.Minute)
		synctest.Wait()
		if n := len(r.rv.requests()); n != 2 {
			t.Errorf("the webhook was called %d times, want twice (the 503 and its retry)", n)
		}
		if rc := r.receipt(t, "w1", "webhook"); rc.Status != vigil.ReceiptDelivered || rc.Attempts != 2 {
			t.Errorf("receipt = %+v, want delivered on attempt 2", rc)
		}
		if n := r.d.Pending(); n != 0 {
			t.Errorf("Pending() = %d, want 0", n)
		}
		r.stop()
	})
}

// TestReceiptNotWrittenAfterShardMoved: a receipt the store refuses
// because the watch's shard moved to another replica meanwhile is not
// written again: the job is dropped at once, and the new holder resumes
// the delivery.
func TestReceiptNotWrittenAfterShardMoved(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var held atomic.Bool
		held.Store(true)
		fenced := func() bool { return !held.Load() }
		st := &flakyStore{Store: memstore.New(), refuse: fenced}
		r := flakyRig(t, st, func(int) (int, bool, bool) {
			held.Store(false) // the shard moves while the request is out
			return http.StatusServiceUnavailable, false, false
		}, func(string) bool { return held.Load() })
		w, m := settled(t, st, "w1", hookOpts, vigil.StateFired)
		r.d.Deliver(w, m)
		synctest.Wait()
		if n := r.d.Pending(); n != 0 {
			t.Errorf("Pending() = %d after the fenced write, want 0: the shard's new holder resumes it", n)
		}
		time.Sleep(time.Minute)
		synctest.Wait()
		if n := st.refused.Load(); n != 1 {
			t.Errorf("%d writes refused, want 1: nothing is written for a shard not held", n)
		}
		if rc := r.receipt(t, "w1", "webhook"); rc.Status != vigil.ReceiptSending || rc.Attempts != 1 {
			t.Errorf("receipt = %+v, want sending (the new holder reads it as unknown)", rc)
		}
		r.stop()
	})
}
