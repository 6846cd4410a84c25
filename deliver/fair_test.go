package deliver_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptrace"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/vigil-run/vigil"
	"github.com/vigil-run/vigil/deliver"
	"github.com/vigil-run/vigil/deliver/webhook"
	"github.com/vigil-run/vigil/store/memstore"
)

// hostReceiver is an in-memory webhook receiver whose answer depends on
// the request's host: a host in slow answers 200 after its delay, a host
// in hang holds the request until the sender gives up, any other host
// answers 200 at once. It records when each request arrived and how many
// were in flight at once, by host and by recipient (the watch ids of these
// tests start with their recipient's name and a dash).
type hostReceiver struct {
	slow map[string]time.Duration
	hang func(host string) bool

	mu         sync.Mutex
	at         map[string]time.Time // by webhook-id
	order      []string             // webhook-ids in arrival order
	inflight   map[string]int       // by host and by "recipient:" + name
	maxInfl    map[string]int
	totalInfl  int
	maxTotal   int
	doneByHost map[string][]time.Time
}

func newHostReceiver(slow map[string]time.Duration, hang func(string) bool) *hostReceiver {
	if hang == nil {
		hang = func(string) bool { return false }
	}
	return &hostReceiver{slow: slow, hang: hang, at: map[string]time.Time{}, inflight: map[string]int{}, maxInfl: map[string]int{},
		doneByHost: map[string][]time.Time{}}
}

func (rv *hostReceiver) RoundTrip(req *http.Request) (*http.Response, error) {
	_, _ = io.ReadAll(req.Body)
	if tr := httptrace.ContextClientTrace(req.Context()); tr != nil && tr.WroteRequest != nil {
		tr.WroteRequest(httptrace.WroteRequestInfo{})
	}
	id, host := req.Header.Get(webhook.HeaderID), req.URL.Host
	rcpt := "recipient:" + strings.SplitN(strings.TrimPrefix(id, "msg-"), "-", 2)[0]
	rv.mu.Lock()
	rv.at[id] = time.Now()
	rv.order = append(rv.order, id)
	for _, k := range []string{host, rcpt} {
		rv.inflight[k]++
		rv.maxInfl[k] = max(rv.maxInfl[k], rv.inflight[k])
	}
	rv.totalInfl++
	rv.maxTotal = max(rv.maxTotal, rv.totalInfl)
	rv.mu.Unlock()
	defer func() {
		rv.mu.Lock()
		rv.inflight[host]--
		rv.inflight[rcpt]--
		rv.totalInfl--
		rv.doneByHost[host] = append(rv.doneByHost[host], time.Now())
		rv.mu.Unlock()
	}()
	var wait <-chan time.Time
	switch d, ok := rv.slow[host]; {
	case rv.hang(host):
	case ok:
		wait = time.After(d)
	default:
		wait = time.After(0)
	}
	select {
	case <-wait:
		return &http.Response{StatusCode: http.StatusOK, Header: http.Header{}, Body: io.NopCloser(strings.NewReader("")), Request: req}, nil
	case <-req.Context().Done():
		return nil, req.Context().Err()
	}
}

func (rv *hostReceiver) sentAt(id string) (time.Time, bool) {
	rv.mu.Lock()
	defer rv.mu.Unlock()
	t, ok := rv.at[id]
	return t, ok
}

func (rv *hostReceiver) most(key string) int {
	rv.mu.Lock()
	defer rv.mu.Unlock()
	return rv.maxInfl[key]
}

// fairRig is a dispatcher with default settings over a hostReceiver,
// running until the test ends.
func fairRig(t *testing.T, rv *hostReceiver) (*memstore.Store, *deliver.Dispatcher) {
	t.Helper()
	st := memstore.New()
	ch, err := webhook.New(webhook.Config{Client: &http.Client{Transport: rv}, Secrets: []string{testSecret}})
	if err != nil {
		t.Fatal(err)
	}
	d := deliver.New(deliver.Config{Store: st, Channels: map[string]deliver.Channel{deliver.ChannelWebhook: ch}})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		_ = d.Run(ctx)
		close(done)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	return st, d
}

// checkSoon fails unless webhook id was sent within 1 s of settledAt.
func checkSoon(t *testing.T, rv *hostReceiver, id string, settledAt time.Time) {
	t.Helper()
	at, ok := rv.sentAt(id)
	switch {
	case !ok:
		t.Fatalf("webhook %s not sent yet, want it sent within 1s of its settlement", id)
	case at.Sub(settledAt) > time.Second:
		t.Fatalf("webhook %s sent %v after its settlement, want within 1s", id, at.Sub(settledAt))
	}
}

func hookTo(url string) string { return `{"webhook":{"url":"` + url + `"}}` }

// TestSlowEndpointCostsOnlyItsRecipient: alice's 50 webhooks go to an
// endpoint that answers in 9 s; bob's webhook, settled while they are in
// flight, is sent within 1 s of its settlement, and alice's are all
// delivered in the end, never more than the per-destination bound at once.
func TestSlowEndpointCostsOnlyItsRecipient(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rv := newHostReceiver(map[string]time.Duration{"slow.example": 9 * time.Second}, nil)
		st, d := fairRig(t, rv)
		for i := range 50 {
			d.Deliver(settledFor(t, st, fmt.Sprintf("alice-%02d", i), "alice", hookTo("https://slow.example/in"), vigil.StateFired))
		}
		time.Sleep(2 * time.Second)
		w, m := settledFor(t, st, "bob-1", "bob", hookTo("https://hooks.example/in"), vigil.StateFired)
		settledAt := time.Now()
		d.Deliver(w, m)
		synctest.Wait()
		checkSoon(t, rv, m.ID, settledAt)
		time.Sleep(time.Hour)
		synctest.Wait()
		for i := range 50 {
			id := fmt.Sprintf("alice-%02d", i)
			got, err := st.WatchGet(t.Context(), id)
			if err != nil {
				t.Fatal(err)
			}
			if len(got.Receipts) != 1 || got.Receipts[0].Status != vigil.ReceiptDelivered || got.Receipts[0].Attempts != 1 {
				t.Errorf("%s: receipts = %+v, want delivered on the first attempt", id, got.Receipts)
			}
		}
		if n := rv.most("slow.example"); n != deliver.DefaultPerDestination {
			t.Errorf("at most %d requests at once to the slow endpoint, want the per-destination bound %d", n, deliver.DefaultPerDestination)
		}
		if n := d.Pending(); n != 0 {
			t.Errorf("Pending() = %d after everything was delivered, want 0", n)
		}
	})
}

// TestSlowDestinationOfManyRecipients: twenty recipients' webhooks go to
// one slow endpoint; it holds no more workers than the per-destination
// bound, so bob's webhook elsewhere is still sent at once.
func TestSlowDestinationOfManyRecipients(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rv := newHostReceiver(map[string]time.Duration{"slow.example": 9 * time.Second}, nil)
		st, d := fairRig(t, rv)
		for r := range 20 {
			for i := range 3 {
				d.Deliver(settledFor(t, st, fmt.Sprintf("r%02d-%d", r, i), fmt.Sprintf("r%02d", r), hookTo("https://slow.example/in"), vigil.StateFired))
			}
		}
		time.Sleep(time.Second)
		w, m := settledFor(t, st, "bob-1", "bob", hookTo("https://hooks.example/in"), vigil.StateFired)
		settledAt := time.Now()
		d.Deliver(w, m)
		synctest.Wait()
		checkSoon(t, rv, m.ID, settledAt)
		time.Sleep(time.Hour)
		synctest.Wait()
		if n := rv.most("slow.example"); n != deliver.DefaultPerDestination {
			t.Errorf("at most %d requests at once to the slow endpoint, want the per-destination bound %d", n, deliver.DefaultPerDestination)
		}
		if n := d.Pending(); n != 0 {
			t.Errorf("Pending() = %d after everything was delivered, want 0", n)
		}
	})
}

// TestHangingRecipientHoldsFewWorkers: alice's 50 webhooks each go to a
// different endpoint that never answers; she holds at most the
// per-recipient bound of workers, so bob's webhook is still sent at once.
func TestHangingRecipientHoldsFewWorkers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rv := newHostReceiver(nil, func(host string) bool { return strings.HasPrefix(host, "hang") })
		st, d := fairRig(t, rv)
		for i := range 50 {
			d.Deliver(settledFor(t, st, fmt.Sprintf("alice-%02d", i), "alice", hookTo(fmt.Sprintf("https://hang%02d.example/in", i)), vigil.StateFired))
		}
		time.Sleep(time.Second)
		w, m := settledFor(t, st, "bob-1", "bob", hookTo("https://hooks.example/in"), vigil.StateFired)
		settledAt := time.Now()
		d.Deliver(w, m)
		synctest.Wait()
		checkSoon(t, rv, m.ID, settledAt)
		time.Sleep(time.Hour)
		synctest.Wait()
		for i := range 50 {
			id := fmt.Sprintf("alice-%02d", i)
			got, err := st.WatchGet(t.Context(), id)
			if err != nil {
				t.Fatal(err)
			}
			if len(got.Receipts) != 1 || got.Receipts[0].Status != vigil.ReceiptUnknown {
				t.Errorf("%s: receipts = %+v, want unknown (the endpoint took it and never answered)", id, got.Receipts)
			}
		}
		if n := rv.most("recipient:alice"); n != deliver.DefaultPerRecipient {
			t.Errorf("alice had at most %d requests in flight, want the per-recipient bound %d", n, deliver.DefaultPerRecipient)
		}
	})
}

// TestSharedDestinationTakesTurns: bob's webhook goes to the same slow
// endpoint as alice's 50; it waits for one of the requests in flight, not
// for alice's queue: it starts at the first slot freed after its
// settlement.
func TestSharedDestinationTakesTurns(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rv := newHostReceiver(map[string]time.Duration{"slow.example": 9 * time.Second}, nil)
		st, d := fairRig(t, rv)
		for i := range 50 {
			d.Deliver(settledFor(t, st, fmt.Sprintf("alice-%02d", i), "alice", hookTo("https://slow.example/in"), vigil.StateFired))
		}
		time.Sleep(2 * time.Second)
		w, m := settledFor(t, st, "bob-1", "bob", hookTo("https://slow.example/b"), vigil.StateFired)
		settledAt := time.Now()
		d.Deliver(w, m)
		time.Sleep(time.Hour)
		synctest.Wait()
		rv.mu.Lock()
		defer rv.mu.Unlock()
		bob, ok := rv.at[m.ID]
		if !ok {
			t.Fatal("bob's webhook was never sent")
		}
		for _, id := range rv.order {
			if at := rv.at[id]; at.After(settledAt) && at.Before(bob) {
				t.Errorf("%s started %v after bob's settlement, before bob's webhook (%v after): want bob's at the first slot freed", id, at.Sub(settledAt), bob.Sub(settledAt))
			}
		}
		if d := bob.Sub(settledAt); d > 9*time.Second {
			t.Errorf("bob's webhook sent %v after its settlement, want within one slow answer (9s)", d)
		}
	})
}
