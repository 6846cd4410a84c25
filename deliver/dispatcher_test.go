package deliver_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/vigil-run/vigil"
	"github.com/vigil-run/vigil/deliver"
	"github.com/vigil-run/vigil/deliver/webhook"
	"github.com/vigil-run/vigil/store/memstore"
)

const hookOpts = `{"webhook":{"url":"https://hooks.example/in"}}`

// TestRetryLadder: a receiver answering 503 twice and then 200 gets three
// attempts, 1 s and 5 s apart (each spread by up to a quarter), all under
// one webhook-id; the receipt ends
// delivered.
func TestRetryLadder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, func(n int) (int, bool, bool) {
			if n <= 2 {
				return http.StatusServiceUnavailable, false, false
			}
			return http.StatusOK, false, false
		}, nil)
		w, m := settled(t, r.st, "w1", hookOpts, vigil.StateFired)
		start := time.Now()
		r.d.Deliver(w, m)
		synctest.Wait()
		if got := r.receipt(t, "w1", "webhook"); got.Status != vigil.ReceiptRetrying || got.Attempts != 1 {
			t.Errorf("after the first 503: receipt = %+v, want retrying after 1 attempt", got)
		}
		time.Sleep(time.Hour)
		synctest.Wait()
		got := r.rv.requests()
		if len(got) != 3 {
			t.Fatalf("receiver got %d requests, want 3", len(got))
		}
		for i, g := range got {
			if g.id != m.ID {
				t.Errorf("request %d webhook-id = %q, want %q (the message id)", i+1, g.id, m.ID)
			}
			if string(g.body) != string(got[0].body) {
				t.Errorf("request %d body differs from the first", i+1)
			}
		}
		w1, w2 := deliver.Spread(time.Second, "w1/webhook", 1), deliver.Spread(5*time.Second, "w1/webhook", 2)
		if d1, d2 := got[1].at.Sub(got[0].at), got[2].at.Sub(got[1].at); d1 != w1 || d2 != w2 {
			t.Errorf("waits between attempts = %s, %s; want %s, %s (1s and 5s spread)", d1, d2, w1, w2)
		}
		if got[0].at != start {
			t.Errorf("first attempt at +%s, want at once", got[0].at.Sub(start))
		}
		rc := r.receipt(t, "w1", "webhook")
		if rc.Status != vigil.ReceiptDelivered || rc.Attempts != 3 {
			t.Errorf("receipt = %+v, want delivered after 3 attempts", rc)
		}
		if n := r.d.Pending(); n != 0 {
			t.Errorf("Pending() = %d after delivery, want 0", n)
		}
		r.stop()
	})
}

// TestLadderRunsOut: a receiver that always answers 503 gets six attempts
// (the first and five retries), then the receipt is undeliverable.
func TestLadderRunsOut(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, func(int) (int, bool, bool) { return http.StatusBadGateway, false, false }, nil)
		w, m := settled(t, r.st, "w1", hookOpts, vigil.StateFailed)
		r.d.Deliver(w, m)
		time.Sleep(24 * time.Hour)
		synctest.Wait()
		if n := len(r.rv.requests()); n != 6 {
			t.Errorf("receiver got %d requests, want 6", n)
		}
		rc := r.receipt(t, "w1", "webhook")
		if rc.Status != vigil.ReceiptUndeliverable || !strings.Contains(rc.Detail, "gave up after 6 attempts") {
			t.Errorf("receipt = %+v, want undeliverable, gave up after 6 attempts", rc)
		}
		r.stop()
	})
}

// TestConnectionRefusedIsRetried: nothing was sent, so it is safe to try again.
func TestConnectionRefusedIsRetried(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, func(n int) (int, bool, bool) { return http.StatusNoContent, false, n == 1 }, nil)
		w, m := settled(t, r.st, "w1", hookOpts, vigil.StateFired)
		r.d.Deliver(w, m)
		time.Sleep(time.Minute)
		synctest.Wait()
		if rc := r.receipt(t, "w1", "webhook"); rc.Status != vigil.ReceiptDelivered || rc.Attempts != 2 {
			t.Errorf("receipt = %+v, want delivered on the second attempt", rc)
		}
		r.stop()
	})
}

// TestHangIsUnknown: a receiver that takes the request and never answers
// leaves the receipt unknown after the 10 s timeout, and it is never
// resent; with retry_unknown it is resent under the same id.
func TestHangIsUnknown(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, func(n int) (int, bool, bool) { return http.StatusOK, n == 1, false }, nil)
		w, m := settled(t, r.st, "w1", hookOpts, vigil.StateFired)
		start := time.Now()
		r.d.Deliver(w, m)
		time.Sleep(9 * time.Second)
		synctest.Wait()
		if rc := r.receipt(t, "w1", "webhook"); rc.Status != vigil.ReceiptSending {
			t.Errorf("receipt while the receiver holds the request = %+v, want sending", rc)
		}
		time.Sleep(24 * time.Hour)
		synctest.Wait()
		rc := r.receipt(t, "w1", "webhook")
		if rc.Status != vigil.ReceiptUnknown || !strings.Contains(rc.Detail, "timed out after 10s after the request was sent") {
			t.Errorf("receipt = %+v, want unknown after a 10s timeout", rc)
		}
		if !rc.UpdatedAt.Equal(start.Add(10 * time.Second).UTC()) {
			t.Errorf("receipt updated at +%s, want +10s", rc.UpdatedAt.Sub(start))
		}
		if n := len(r.rv.requests()); n != 1 {
			t.Errorf("receiver got %d requests, want 1: unknown is never resent", n)
		}
		r.stop()
	})
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, func(n int) (int, bool, bool) { return http.StatusOK, n == 1, false }, nil)
		w, m := settled(t, r.st, "w1", `{"webhook":{"retry_unknown":true,"url":"https://hooks.example/in"}}`, vigil.StateFired)
		r.d.Deliver(w, m)
		time.Sleep(time.Hour)
		synctest.Wait()
		got := r.rv.requests()
		if len(got) != 2 || got[0].id != m.ID || got[1].id != m.ID {
			t.Fatalf("receiver got %d requests (%+v), want 2 under id %s", len(got), got, m.ID)
		}
		if d, want := got[1].at.Sub(got[0].at), 10*time.Second+deliver.Spread(time.Second, "w1/webhook", 1); d != want {
			t.Errorf("resent %s after the first, want %s (10s timeout + 1s spread)", d, want)
		}
		if rc := r.receipt(t, "w1", "webhook"); rc.Status != vigil.ReceiptDelivered || rc.Attempts != 2 {
			t.Errorf("receipt = %+v, want delivered after 2 attempts", rc)
		}
		r.stop()
	})
}

// TestRejected: 4xx answers settle the receipt undeliverable at once, and
// the watch itself is untouched.
func TestRejected(t *testing.T) {
	for _, code := range []int{http.StatusGone, http.StatusBadRequest} {
		t.Run(http.StatusText(code), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				r := newRig(t, func(int) (int, bool, bool) { return code, false, false }, nil)
				w, m := settled(t, r.st, "w1", hookOpts, vigil.StateFired)
				r.d.Deliver(w, m)
				time.Sleep(time.Hour)
				synctest.Wait()
				rc := r.receipt(t, "w1", "webhook")
				if rc.Status != vigil.ReceiptUndeliverable || rc.Attempts != 1 || !strings.Contains(rc.Detail, "HTTP ") {
					t.Errorf("receipt = %+v, want undeliverable after 1 attempt", rc)
				}
				got, _ := r.st.WatchGet(t.Context(), "w1")
				if got.State != vigil.StateFired {
					t.Errorf("watch state = %s, want fired (a rejection is not the watch's failure)", got.State)
				}
				r.stop()
			})
		})
	}
}

// TestResume: a receipt left sending by a crash is unknown after Resume
// and not resent; a retrying one is resumed at its next attempt; a watch
// settled but never handed over is delivered.
func TestResume(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := build(t, memstore.New(), func(int) (int, bool, bool) { return http.StatusOK, false, false }, nil)
		now := time.Now().UTC()
		settled(t, r.st, "a", hookOpts, vigil.StateFired)
		settled(t, r.st, "b", hookOpts, vigil.StateFailed)
		settled(t, r.st, "c", hookOpts, vigil.StateExpired)
		put := func(id, status string, next time.Time) {
			err := r.st.ReceiptUpsert(t.Context(), vigil.ReceiptUpsertParams{ReceiptRecord: vigil.ReceiptRecord{WatchID: id, MessageID: "msg-" + id, NextAt: next,
				Receipt: vigil.Receipt{Channel: "webhook", Status: status, Attempts: 1, UpdatedAt: now}}})
			if err != nil {
				t.Fatal(err)
			}
		}
		put("a", vigil.ReceiptSending, time.Time{})
		put("b", vigil.ReceiptRetrying, now.Add(30*time.Second))
		r2 := newRigOn(t, r)
		synctest.Wait()
		if rc := r2.receipt(t, "a", "webhook"); rc.Status != vigil.ReceiptUnknown {
			t.Errorf("a: receipt = %+v, want unknown", rc)
		}
		if rc := r2.receipt(t, "c", "webhook"); rc.Status != vigil.ReceiptDelivered {
			t.Errorf("c (never handed over): receipt = %+v, want delivered", rc)
		}
		if rc := r2.receipt(t, "b", "webhook"); rc.Status != vigil.ReceiptRetrying {
			t.Errorf("b before its next attempt: receipt = %+v, want retrying", rc)
		}
		time.Sleep(31 * time.Second)
		synctest.Wait()
		if rc := r2.receipt(t, "b", "webhook"); rc.Status != vigil.ReceiptDelivered || rc.Attempts != 2 {
			t.Errorf("b: receipt = %+v, want delivered on attempt 2", rc)
		}
		ids := map[string]int{}
		for _, g := range r2.rv.requests() {
			ids[g.id]++
		}
		if want := map[string]int{"msg-b": 1, "msg-c": 1}; !equalCounts(ids, want) {
			t.Errorf("requests by webhook-id = %v, want %v (a is never resent)", ids, want)
		}
		r2.stop()
	})
}

func equalCounts(a, b map[string]int) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// newRigOn is a second dispatcher (a restarted daemon) on r's store,
// resumed before it runs.
func newRigOn(t *testing.T, r *rig) *rig {
	r2 := build(t, r.st, r.rv.answer, nil)
	if err := r2.d.Resume(t.Context()); err != nil {
		t.Fatal(err)
	}
	startRun(t, r2)
	return r2
}

// TestSignedBody: the request carries the outcome, signed with the
// daemon's secret, and the helper verifies it.
func TestSignedBody(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, func(int) (int, bool, bool) { return http.StatusOK, false, false }, nil)
		w, m := settled(t, r.st, "w1", hookOpts, vigil.StateFired)
		r.d.Deliver(w, m)
		synctest.Wait()
		got := r.rv.requests()
		if len(got) != 1 {
			t.Fatalf("receiver got %d requests, want 1", len(got))
		}
		h := http.Header{}
		h.Set(webhook.HeaderID, got[0].id)
		h.Set(webhook.HeaderTimestamp, got[0].ts)
		h.Set(webhook.HeaderSignature, got[0].sig)
		if err := webhook.Verify(testSecret, h, got[0].body, time.Now(), 0); err != nil {
			t.Errorf("Verify = %v, want nil", err)
		}
		var p deliver.Payload
		if err := json.Unmarshal(got[0].body, &p); err != nil {
			t.Fatal(err)
		}
		if p.WatchID != "w1" || p.State != vigil.StateFired || p.Sentence == "" || p.Note != "merge PR 41 when green" ||
			p.Labels["task"] != "T-19" || p.Observation == nil || p.Observation.Summary != "HTTP 200" || p.MessageID != m.ID {
			t.Errorf("payload = %+v, want the watch id, state, sentence, observation, note and labels", p)
		}
		r.stop()
	})
}

// TestSecretsNeverShown: a watch's secret and a URL's credentials never
// reach receipts, logs or the options as shown.
func TestSecretsNeverShown(t *testing.T) {
	const secret = "whsec_c2VjcmV0LXNlY3JldC1zZWNyZXQtc2VjcmV0LXh5eg=="
	opts := `{"webhook":{"secret":"` + secret + `","url":"https://user:hunter2pass@hooks.example/in"}}`
	synctest.Test(t, func(t *testing.T) {
		for _, code := range []int{http.StatusForbidden, http.StatusServiceUnavailable} {
			r := newRig(t, func(n int) (int, bool, bool) { return code, false, n == 1 }, nil)
			w, m := settled(t, r.st, "w1", opts, vigil.StateFired)
			r.d.Deliver(w, m)
			time.Sleep(time.Hour)
			synctest.Wait()
			got, _ := r.st.WatchGet(t.Context(), "w1")
			rs, _ := json.Marshal(got.Receipts)
			shown := string(deliver.Redact(got.Deliver))
			for what, s := range map[string]string{"receipts": string(rs), "logs": r.logs.String(), "redacted options": shown} {
				for _, leak := range []string{secret, strings.TrimPrefix(secret, "whsec_"), "hunter2pass"} {
					if strings.Contains(s, leak) {
						t.Errorf("%s hold a secret %q: %s", what, leak, s)
					}
				}
			}
			if !strings.Contains(shown, deliver.Redacted) {
				t.Errorf("Redact(options) = %s, want the secret shown as %s", shown, deliver.Redacted)
			}
			r.stop()
		}
	})
}

// TestSecretOrder: a watch's own secret signs; else its recipient's; else
// the daemon's. A recipient's default webhook serves watches naming none.
func TestSecretOrder(t *testing.T) {
	const recipientSecret = "whsec_c2VjcmV0LXNlY3JldC1zZWNyZXQtc2VjcmV0LXh5eg=="
	const watchSecret = "whsec_d2F0Y2gtd2F0Y2gtd2F0Y2gtd2F0Y2gtd2F0Y2g="
	synctest.Test(t, func(t *testing.T) {
		r := build(t, memstore.New(), func(int) (int, bool, bool) { return http.StatusOK, false, false }, nil)
		ch, _ := webhook.New(webhook.Config{Client: &http.Client{Transport: r.rv}, Secrets: []string{testSecret}})
		r.d = deliver.New(deliver.Config{Store: r.st, Channels: map[string]deliver.Channel{deliver.ChannelWebhook: ch},
			RecipientSecrets:  map[string]string{"agent-7": recipientSecret},
			RecipientWebhooks: map[string]deliver.WebhookOptions{"agent-7": {URL: "https://default.example/in"}}})
		startRun(t, r)
		for _, c := range []struct{ id, opts, secret string }{
			{"own", `{"webhook":{"secret":"` + watchSecret + `","url":"https://hooks.example/in"}}`, watchSecret},
			{"recipients", hookOpts, recipientSecret},
			{"default", "", recipientSecret},
		} {
			w, m := settled(t, r.st, c.id, c.opts, vigil.StateFired)
			r.d.Deliver(w, m)
			synctest.Wait()
			got := r.rv.requests()
			last := got[len(got)-1]
			h := http.Header{}
			h.Set(webhook.HeaderID, last.id)
			h.Set(webhook.HeaderTimestamp, last.ts)
			h.Set(webhook.HeaderSignature, last.sig)
			if last.id != m.ID {
				t.Fatalf("%s: no request for it", c.id)
			}
			if err := webhook.Verify(c.secret, h, last.body, time.Now(), 0); err != nil {
				t.Errorf("%s: signed with the wrong secret: %v", c.id, err)
			}
		}
		r.stop()
	})
}

// TestResumeRetryUnknown: with retry_unknown, a receipt left sending by a
// crash is resent at the next start under the same id.
func TestResumeRetryUnknown(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := build(t, memstore.New(), func(int) (int, bool, bool) { return http.StatusOK, false, false }, nil)
		settled(t, r.st, "a", `{"webhook":{"retry_unknown":true,"url":"https://hooks.example/in"}}`, vigil.StateFired)
		err := r.st.ReceiptUpsert(t.Context(), vigil.ReceiptUpsertParams{ReceiptRecord: vigil.ReceiptRecord{WatchID: "a", MessageID: "msg-a",
			Receipt: vigil.Receipt{Channel: "webhook", Status: vigil.ReceiptSending, Attempts: 1, UpdatedAt: time.Now()}}})
		if err != nil {
			t.Fatal(err)
		}
		r2 := newRigOn(t, r)
		synctest.Wait()
		got := r2.rv.requests()
		if len(got) != 1 || got[0].id != "msg-a" {
			t.Fatalf("requests after the restart = %+v, want one under msg-a", got)
		}
		if rc := r2.receipt(t, "a", "webhook"); rc.Status != vigil.ReceiptDelivered || rc.Attempts != 2 {
			t.Errorf("receipt = %+v, want delivered on attempt 2", rc)
		}
		r2.stop()
	})
}

// TestResumeRetryUnknownLadderRunOut: with retry_unknown, a receipt left
// sending on the ladder's last attempt is not resent at the next start:
// the ladder bounds the attempts, as it does for an unknown answer while
// the daemon runs.
func TestResumeRetryUnknownLadderRunOut(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := build(t, memstore.New(), func(int) (int, bool, bool) { return http.StatusOK, false, false }, nil)
		settled(t, r.st, "a", `{"webhook":{"retry_unknown":true,"url":"https://hooks.example/in"}}`, vigil.StateFired)
		last := len(deliver.Ladder()) + 1
		err := r.st.ReceiptUpsert(t.Context(), vigil.ReceiptUpsertParams{ReceiptRecord: vigil.ReceiptRecord{WatchID: "a", MessageID: "msg-a",
			Receipt: vigil.Receipt{Channel: "webhook", Status: vigil.ReceiptSending, Attempts: last, UpdatedAt: time.Now()}}})
		if err != nil {
			t.Fatal(err)
		}
		r2 := newRigOn(t, r)
		synctest.Wait()
		if got := r2.rv.requests(); len(got) != 0 {
			t.Fatalf("requests after the restart = %+v, want none: attempt %d was the ladder's last", got, last)
		}
		if rc := r2.receipt(t, "a", "webhook"); rc.Status != vigil.ReceiptUnknown || rc.Attempts != last {
			t.Errorf("receipt = %+v, want unknown after %d attempts", rc, last)
		}
		r2.stop()
	})
}

// fakeChannel is a push channel that counts its sends and, while blocked,
// holds each one until its context ends (a slow SMTP server).
type fakeChannel struct {
	mu      sync.Mutex
	sends   int
	blocked bool
}

func (c *fakeChannel) Send(ctx context.Context, _ *deliver.Delivery) (bool, error) {
	c.mu.Lock()
	c.sends++
	blocked := c.blocked
	c.mu.Unlock()
	if blocked {
		<-ctx.Done()
		return false, ctx.Err()
	}
	return false, nil
}

func (c *fakeChannel) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.sends
}

// TestResumeSecondChannel: a watch with a webhook and an email, on one
// worker that both block: the daemon stops while the first channel is in
// flight and the second still queued (no receipt yet). At the next start
// the first is unknown and not resent, and the second, never attempted, is
// sent then: no channel is lost.
func TestResumeSecondChannel(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := memstore.New()
		rv := &receiver{answer: func(n int) (int, bool, bool) { return http.StatusOK, n == 1, false }}
		mail := &fakeChannel{blocked: true}
		dispatcher := func() *deliver.Dispatcher {
			wh, err := webhook.New(webhook.Config{Client: &http.Client{Transport: rv}, Secrets: []string{testSecret}})
			if err != nil {
				t.Fatal(err)
			}
			return deliver.New(deliver.Config{Store: st, Workers: 1,
				Channels: map[string]deliver.Channel{deliver.ChannelWebhook: wh, deliver.ChannelEmail: mail}})
		}
		w, m := settled(t, st, "w1", `{"webhook":{"url":"https://hooks.example/in"},"email":{"to":"ops@example.com"}}`, vigil.StateFired)
		first := &rig{st: st, rv: rv, d: dispatcher()}
		startRun(t, first)
		first.d.Deliver(w, m)
		synctest.Wait()
		got, _ := st.WatchGet(t.Context(), "w1")
		if len(got.Receipts) != 1 || got.Receipts[0].Status != vigil.ReceiptSending {
			t.Fatalf("receipts while one worker holds the first channel = %+v, want one sending", got.Receipts)
		}
		inFlight := got.Receipts[0].Channel
		first.stop()

		mail.mu.Lock()
		mail.blocked = false
		mail.mu.Unlock()
		second := &rig{st: st, rv: rv, d: dispatcher()}
		if err := second.d.Resume(t.Context()); err != nil {
			t.Fatal(err)
		}
		startRun(t, second)
		synctest.Wait()
		for _, ch := range []string{deliver.ChannelWebhook, deliver.ChannelEmail} {
			want := vigil.ReceiptDelivered
			if ch == inFlight {
				want = vigil.ReceiptUnknown
			}
			if rc := second.receipt(t, "w1", ch); rc.Status != want || rc.Attempts != 1 {
				t.Errorf("%s receipt after the restart = %+v, want %s after 1 attempt", ch, rc, want)
			}
		}
		if hooks, mails := len(rv.requests()), mail.count(); hooks != 1 || mails != 1 {
			t.Errorf("sent %d webhooks and %d emails, want 1 and 1", hooks, mails)
		}
		if n := second.d.Pending(); n != 0 {
			t.Errorf("Pending() = %d after the restart, want 0", n)
		}
		second.stop()
	})
}

// TestResumeAfterDelivery: a delivery made while a resume reads the
// receipts (a shard's new holder expires an overdue watch and delivers it
// at once, while resuming the shard's deliveries) is not made again by the
// resume, which found the watch owing it a first attempt.
func TestResumeAfterDelivery(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, func(int) (int, bool, bool) { return http.StatusOK, false, false }, nil)
		w, m := settled(t, r.st, "a", hookOpts, vigil.StateExpired)
		err := r.d.ResumeWith(t.Context(), func(ctx context.Context, p vigil.ReceiptsResumeParams) (vigil.ReceiptsResumeResult, error) {
			res, err := r.st.ReceiptsResume(ctx, p)
			if err == nil && len(res.Undispatched) != 1 {
				t.Errorf("the resume found %+v, want the watch owing its webhook", res)
			}
			// Meanwhile the settlement's own delivery goes out, and
			// lands.
			r.d.Deliver(w, m)
			synctest.Wait()
			return res, err
		})
		if err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		if n := len(r.rv.requests()); n != 1 {
			t.Fatalf("the webhook was called %d times, want once", n)
		}
		if rc := r.receipt(t, "a", "webhook"); rc.Status != vigil.ReceiptDelivered || rc.Attempts != 1 {
			t.Errorf("receipt = %+v, want delivered on attempt 1", rc)
		}
	})
}

// TestTwoDispatchersOneRetry: two dispatchers holding a job for the same
// retry (the replica a watch's shard moved from still had it queued when
// the shard came back, and the one it moved to resumed it) make the retry
// once: the first to claim the receipt sends, the other sends nothing.
func TestTwoDispatchersOneRetry(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var calls atomic.Int32 // over both receivers
		r := newRig(t, func(int) (int, bool, bool) {
			if calls.Add(1) == 1 {
				return http.StatusServiceUnavailable, false, false
			}
			return http.StatusOK, false, false
		}, nil)
		w, m := settled(t, r.st, "w1", hookOpts, vigil.StateFired)
		r.d.Deliver(w, m)
		synctest.Wait()
		if got := r.receipt(t, "w1", "webhook"); got.Status != vigil.ReceiptRetrying || got.Attempts != 1 {
			t.Fatalf("after the first 503: receipt = %+v, want retrying after 1 attempt", got)
		}
		// A second dispatcher on the same store resumes the retry too.
		r2 := newRigOn(t, r)
		time.Sleep(time.Minute)
		synctest.Wait()
		if n := len(r.rv.requests()) + len(r2.rv.requests()); n != 2 || calls.Load() != 2 {
			t.Fatalf("the webhook was called %d times, want twice (the failed attempt and one retry)", n)
		}
		if rc := r.receipt(t, "w1", "webhook"); rc.Status != vigil.ReceiptDelivered || rc.Attempts != 2 {
			t.Errorf("receipt = %+v, want delivered on attempt 2", rc)
		}
	})
}

// TestRetryAfterHonoured: a receiver answering 429 with Retry-After is
// left alone that long (Standard Webhooks: a Retry-After is to be taken
// into account), never less than the ladder's rung and never more than
// its last (10 min); the receipt's detail says what it asked. It was
// tried again at the rung, 1 s on, whatever the receiver asked.
func TestRetryAfterHonoured(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := build(t, memstore.New(), func(n int) (int, bool, bool) {
			if n <= 3 {
				return http.StatusTooManyRequests, false, false
			}
			return http.StatusOK, false, false
		}, nil)
		start := time.Now()
		r.rv.header = func(n int) http.Header {
			switch n {
			case 1:
				return http.Header{"Retry-After": {"120"}}
			case 2:
				// An HTTP date, far beyond the bound.
				return http.Header{"Retry-After": {start.Add(5 * time.Hour).UTC().Format(http.TimeFormat)}}
			default:
				return http.Header{"Retry-After": {"1"}} // less than the rung (30 s)
			}
		}
		startRun(t, r)
		w, m := settled(t, r.st, "w1", hookOpts, vigil.StateFired)
		r.d.Deliver(w, m)
		synctest.Wait()
		if rc := r.receipt(t, "w1", "webhook"); rc.Status != vigil.ReceiptRetrying || !strings.Contains(rc.Detail, "Retry-After 2m") {
			t.Errorf("after the first 429: receipt = %+v, want retrying with a detail naming the Retry-After", rc)
		}
		time.Sleep(2 * time.Hour)
		synctest.Wait()
		got := r.rv.requests()
		if len(got) != 4 {
			t.Fatalf("receiver got %d requests, want 4", len(got))
		}
		want := []time.Duration{2 * time.Minute, 10 * time.Minute, deliver.Spread(30*time.Second, "w1/webhook", 3)}
		for i, w := range want {
			if d := got[i+1].at.Sub(got[i].at); d != w {
				t.Errorf("wait before attempt %d = %s, want %s", i+2, d, w)
			}
		}
		if rc := r.receipt(t, "w1", "webhook"); rc.Status != vigil.ReceiptDelivered || rc.Attempts != 4 {
			t.Errorf("receipt = %+v, want delivered after 4 attempts", rc)
		}
	})
}

// TestRetryAfterValues: what a Retry-After header's value asks, bounded.
func TestRetryAfterValues(t *testing.T) {
	now := time.Date(2026, 12, 7, 6, 0, 0, 0, time.UTC)
	for v, want := range map[string]time.Duration{
		"":                    0,
		"0":                   0,
		"-5":                  0,
		"soon":                0,
		"90":                  90 * time.Second,
		" 90 ":                90 * time.Second,
		"3600":                deliver.MaxRetryAfter,
		"9999999999999999999": deliver.MaxRetryAfter,
		now.Add(3 * time.Minute).Format(http.TimeFormat):  3 * time.Minute,
		now.Add(-3 * time.Minute).Format(http.TimeFormat): 0,
		now.Add(48 * time.Hour).Format(http.TimeFormat):   deliver.MaxRetryAfter,
	} {
		if got := deliver.RetryAfter(v, now); got != want {
			t.Errorf("RetryAfter(%q) = %s, want %s", v, got, want)
		}
	}
}

// TestRetriesSpread: fifty webhooks to one receiver, settled together and
// refused together (503), are tried again spread over a quarter of their
// rung, not all at one instant; each delivery's second attempt comes at
// the time Spread gives it, never before its rung. They all came at the
// same nanosecond, a second on.
func TestRetriesSpread(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const n = 50
		r := newRig(t, func(i int) (int, bool, bool) {
			if i <= n {
				return http.StatusServiceUnavailable, false, false
			}
			return http.StatusOK, false, false
		}, nil)
		ids := map[string]string{} // message id → watch id
		for i := range n {
			w, m := settled(t, r.st, fmt.Sprintf("w%02d", i), hookOpts, vigil.StateFired)
			ids[m.ID] = w.ID
			r.d.Deliver(w, m)
		}
		time.Sleep(time.Hour)
		synctest.Wait()
		first, second := map[string]time.Time{}, map[string]time.Time{}
		for _, g := range r.rv.requests() {
			if _, ok := first[g.id]; !ok {
				first[g.id] = g.at
			} else {
				second[g.id] = g.at
			}
		}
		if len(first) != n || len(second) != n {
			t.Fatalf("receiver got first attempts of %d and second of %d deliveries, want %d each", len(first), len(second), n)
		}
		at := map[time.Time]bool{}
		for mid, id := range ids {
			wait := second[mid].Sub(first[mid])
			if want := deliver.Spread(time.Second, id+"/webhook", 1); wait != want {
				t.Errorf("%s: tried again after %s, want %s", id, wait, want)
			}
			if wait < time.Second || wait >= time.Second*5/4 {
				t.Errorf("%s: tried again after %s, want within [1s, 1.25s)", id, wait)
			}
			at[second[mid]] = true
		}
		if len(at) < n*9/10 {
			t.Errorf("%d deliveries tried again at %d distinct instants, want them spread", n, len(at))
		}
		r.stop()
	})
}

// TestSpread: a rung is lengthened by less than a quarter, never
// shortened, the same for the same delivery and attempt, and differently
// for different ones.
func TestSpread(t *testing.T) {
	for _, rung := range deliver.Ladder() {
		seen := map[time.Duration]bool{}
		for i := range 100 {
			key := fmt.Sprintf("01J%05d/webhook", i)
			d := deliver.Spread(rung, key, 2)
			if d < rung || d >= rung*5/4 {
				t.Errorf("Spread(%s, %s) = %s, want within [%s, %s)", rung, key, d, rung, rung*5/4)
			}
			if again := deliver.Spread(rung, key, 2); again != d {
				t.Errorf("Spread(%s, %s) = %s then %s", rung, key, d, again)
			}
			seen[d] = true
		}
		if len(seen) < 90 {
			t.Errorf("rung %s: 100 deliveries spread over %d waits", rung, len(seen))
		}
		if a, b := deliver.Spread(rung, "x/webhook", 1), deliver.Spread(rung, "x/webhook", 2); a == b {
			t.Errorf("rung %s: attempts 1 and 2 of one delivery both wait %s", rung, a)
		}
	}
	if d := deliver.Spread(0, "x", 1); d != 0 {
		t.Errorf("Spread(0) = %s", d)
	}
}
