package deliver_test

import (
	"bytes"
	"log/slog"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/vigil-run/vigil"
	"github.com/vigil-run/vigil/deliver"
	"github.com/vigil-run/vigil/deliver/webhook"
	"github.com/vigil-run/vigil/store/memstore"
)

// replicaRig is a dispatcher standing for one replica: one worker, and a
// HoldsFunc (its shards) the test sets.
func replicaRig(t *testing.T, st *memstore.Store, answer func(n int) (int, bool, bool), holds func(string) bool) *rig {
	t.Helper()
	r := &rig{st: st, rv: &receiver{answer: answer}, logs: &bytes.Buffer{}, stop: func() {}}
	ch, err := webhook.New(webhook.Config{Client: &http.Client{Transport: r.rv}, Secrets: []string{testSecret}})
	if err != nil {
		t.Fatal(err)
	}
	r.d = deliver.New(deliver.Config{Store: st, Channels: map[string]deliver.Channel{deliver.ChannelWebhook: ch},
		Logger: slog.New(slog.NewTextHandler(r.logs, nil)), Workers: 1, HoldsFunc: holds})
	return r
}

// TestStaleJobResumedRetry: replica A has w1's first attempt queued
// (behind a slow delivery) when w1's shard moves to B, which makes the
// attempt (503: retrying after 1 attempt) and stops before the retry is
// due (a rolling deploy); the shard comes back to A, whose resume finds
// the retry while A's old first-attempt job is still queued. That job's
// claim finds the receipt moved on and sends nothing; the retry resumed
// is made in its place. Before, the resume skipped the retry (a job of
// the delivery was queued) and the old job was dropped: the receipt
// stayed retrying, and nobody retried it.
func TestStaleJobResumedRetry(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := memstore.New()
		var aHolds, bHolds atomic.Bool // w1's shard
		aHolds.Store(true)
		a := replicaRig(t, st, func(n int) (int, bool, bool) {
			return http.StatusOK, n == 1, false // w0 hangs until the webhook's timeout
		}, func(id string) bool { return id == "w0" || aHolds.Load() })
		b := replicaRig(t, st, func(int) (int, bool, bool) { return http.StatusServiceUnavailable, false, false },
			func(id string) bool { return id == "w1" && bHolds.Load() })
		startRun(t, a)
		w0, m0 := settled(t, st, "w0", `{"webhook":{"url":"https://slow.example/in"}}`, vigil.StateFired)
		w1, m1 := settled(t, st, "w1", hookOpts, vigil.StateFired)
		a.d.Deliver(w0, m0)
		synctest.Wait()
		a.d.Deliver(w1, m1) // queued behind w0 (one worker)
		synctest.Wait()

		// w1's shard moves to B, which resumes it and makes the attempt.
		aHolds.Store(false)
		bHolds.Store(true)
		if err := b.d.Resume(t.Context()); err != nil {
			t.Fatal(err)
		}
		startRun(t, b)
		synctest.Wait()
		if rc := b.receipt(t, "w1", "webhook"); rc.Status != vigil.ReceiptRetrying || rc.Attempts != 1 {
			t.Fatalf("after B's attempt: receipt = %+v, want retrying after 1 attempt", rc)
		}
		// B stops before the retry is due; A takes the shard back and
		// resumes its receipts, its old job of w1 still queued.
		b.stop()
		bHolds.Store(false)
		aHolds.Store(true)
		if err := a.d.Resume(t.Context()); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Hour)
		synctest.Wait()
		if rc := a.receipt(t, "w1", "webhook"); rc.Status != vigil.ReceiptDelivered || rc.Attempts != 2 {
			t.Errorf("w1's receipt = %+v, want delivered on attempt 2 (a 503 is retried on the ladder); A's log:\n%s", rc, a.logs)
		}
		var w1Calls int
		for _, r := range a.rv.requests() {
			if r.id == m1.ID {
				w1Calls++
			}
		}
		if n := len(b.rv.requests()); w1Calls != 1 || n != 1 {
			t.Errorf("w1 was posted %d times by A and %d by B, want once each (the 503 and its retry)", w1Calls, n)
		}
		if n := a.d.Pending(); n != 0 {
			t.Errorf("A's Pending() = %d, want 0", n)
		}
		a.stop()
	})
}

// TestResumeRetryQueuedHere: a resume that finds a retry this dispatcher
// already has queued (the shard's lease was lost and taken again before
// the retry was due) makes it once, and claims the receipt once: the job
// queued makes the attempt, and the one resumed is forgotten.
func TestResumeRetryQueuedHere(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := memstore.New()
		r := replicaRig(t, st, func(n int) (int, bool, bool) {
			if n == 1 {
				return http.StatusServiceUnavailable, false, false
			}
			return http.StatusOK, false, false
		}, func(string) bool { return true })
		startRun(t, r)
		w, m := settled(t, st, "w1", hookOpts, vigil.StateFired)
		r.d.Deliver(w, m)
		synctest.Wait()
		if err := r.d.Resume(t.Context()); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Hour)
		synctest.Wait()
		if n := len(r.rv.requests()); n != 2 {
			t.Errorf("the webhook was called %d times, want twice (the 503 and its retry)", n)
		}
		if rc := r.receipt(t, "w1", "webhook"); rc.Status != vigil.ReceiptDelivered || rc.Attempts != 2 {
			t.Errorf("receipt = %+v, want delivered on attempt 2", rc)
		}
		if strings.Contains(r.logs.String(), "taken over") {
			t.Errorf("a second job claimed the delivery after the retry was made; log:\n%s", r.logs)
		}
		if n := r.d.Pending(); n != 0 {
			t.Errorf("Pending() = %d, want 0", n)
		}
		r.stop()
	})
}

// TestAttemptOutlivedByTheNext: replica A's attempt hangs on a slow
// receiver while w1's shard moves to B, whose resume finds the receipt
// sending (unknown), and, as retry_unknown asks, makes the next attempt,
// which lands. The shard comes back to A before A's attempt ends with a
// 503. A's end must not write over B's delivered receipt: before, it
// wrote "retrying after 1 attempt" there, and A's retry then posted the
// webhook a third time.
func TestAttemptOutlivedByTheNext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := memstore.New()
		release := make(chan struct{})
		a := replicaRig(t, st, func(n int) (int, bool, bool) {
			if n == 1 {
				<-release
			}
			return http.StatusServiceUnavailable, false, false
		}, func(string) bool { return true }) // lost and back: as A sees it when it ends
		b := replicaRig(t, st, func(int) (int, bool, bool) { return http.StatusOK, false, false },
			func(string) bool { return true })
		startRun(t, a)
		w1, m1 := settled(t, st, "w1", `{"webhook":{"url":"https://hooks.example/in","retry_unknown":true}}`, vigil.StateFired)
		a.d.Deliver(w1, m1)
		synctest.Wait() // A's first attempt is on its way
		if rc := a.receipt(t, "w1", "webhook"); rc.Status != vigil.ReceiptSending || rc.Attempts != 1 {
			t.Fatalf("during A's attempt: receipt = %+v, want sending, attempt 1", rc)
		}
		if err := b.d.Resume(t.Context()); err != nil {
			t.Fatal(err)
		}
		startRun(t, b)
		time.Sleep(time.Hour)
		synctest.Wait()
		if rc := b.receipt(t, "w1", "webhook"); rc.Status != vigil.ReceiptDelivered || rc.Attempts != 2 {
			t.Fatalf("after B's attempt: receipt = %+v, want delivered on attempt 2; B's log:\n%s", rc, b.logs)
		}
		b.stop()
		close(release) // A's attempt ends: 503
		time.Sleep(time.Hour)
		synctest.Wait()
		if rc := a.receipt(t, "w1", "webhook"); rc.Status != vigil.ReceiptDelivered || rc.Attempts != 2 {
			t.Errorf("after A's attempt ended: receipt = %+v, want B's delivered on attempt 2 still; A's log:\n%s", rc, a.logs)
		}
		if na, nb := len(a.rv.requests()), len(b.rv.requests()); na != 1 || nb != 1 {
			t.Errorf("the webhook was posted %d times by A and %d by B, want once each", na, nb)
		}
		if n := a.d.Pending(); n != 0 {
			t.Errorf("A's Pending() = %d, want 0", n)
		}
		a.stop()
	})
}
