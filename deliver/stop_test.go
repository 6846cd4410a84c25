package deliver_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptrace"
	"strconv"
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

// byPath is a receiver answering each webhook by its URL's path: 200 once
// its gate is closed, 503 for /busy, and a hang (until the request's
// context ends, after the request was written) for /hang.
type byPath struct {
	gate chan struct{}
	mu   sync.Mutex
	got  []string
}

func (rv *byPath) RoundTrip(req *http.Request) (*http.Response, error) {
	_, _ = io.ReadAll(req.Body)
	if tr := httptrace.ContextClientTrace(req.Context()); tr != nil && tr.WroteRequest != nil {
		tr.WroteRequest(httptrace.WroteRequestInfo{})
	}
	rv.mu.Lock()
	rv.got = append(rv.got, req.URL.Path)
	rv.mu.Unlock()
	status := http.StatusOK
	switch req.URL.Path {
	case "/gate":
		select {
		case <-rv.gate:
		case <-req.Context().Done():
			return nil, req.Context().Err()
		}
	case "/busy":
		status = http.StatusServiceUnavailable
	case "/hang":
		<-req.Context().Done()
		return nil, req.Context().Err()
	}
	return &http.Response{StatusCode: status, Header: http.Header{}, Body: io.NopCloser(strings.NewReader("")), Request: req}, nil
}

func (rv *byPath) requests() []string {
	rv.mu.Lock()
	defer rv.mu.Unlock()
	return append([]string(nil), rv.got...)
}

// TestStopGrace: when Run's context ends (a graceful shutdown) no attempt
// starts any more (neither a delivery handed over then nor a retry that
// comes due), and the attempts in flight go on for the grace: one answered
// then is recorded delivered, where it was cut short mid-send and left
// "sending" (unknown at the next start); one still going when the grace
// runs out is cut short then, and Run returns.
func TestStopGrace(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const grace = 5 * time.Second
		st := memstore.New()
		rv := &byPath{gate: make(chan struct{})}
		// The webhook's own timeout is past the grace: the grace ends the
		// hanging attempt.
		ch, err := webhook.New(webhook.Config{Client: &http.Client{Transport: rv}, Secrets: []string{testSecret}, Timeout: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		d := deliver.New(deliver.Config{Store: st, Channels: map[string]deliver.Channel{deliver.ChannelWebhook: ch}, StopGrace: grace})
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		done := make(chan struct{})
		go func() { _ = d.Run(ctx); close(done) }()
		hook := func(path string) string { return `{"webhook":{"url":"https://hooks.example` + path + `"}}` }
		deliverNow := func(id, path string) {
			w, m := settled(t, st, id, hook(path), vigil.StateFired)
			d.Deliver(w, m)
		}
		deliverNow("busy", "/busy") // 503: retrying, due a rung (1 s) on
		deliverNow("gate", "/gate") // in flight until the test opens the gate
		deliverNow("hang", "/hang") // in flight past the grace
		synctest.Wait()
		receipt := func(id string) vigil.Receipt {
			t.Helper()
			w, err := st.WatchGet(context.Background(), id)
			if err != nil || len(w.Receipts) != 1 {
				t.Fatalf("watch %s: receipts %+v, %v; want one", id, w, err)
			}
			return w.Receipts[0]
		}
		if rc := receipt("busy"); rc.Status != vigil.ReceiptRetrying {
			t.Fatalf("busy before the shutdown: %+v, want retrying", rc)
		}
		for _, id := range []string{"gate", "hang"} {
			if rc := receipt(id); rc.Status != vigil.ReceiptSending {
				t.Fatalf("%s before the shutdown: %+v, want sending", id, rc)
			}
		}

		stopped := time.Now()
		cancel() // graceful shutdown (SIGTERM)
		synctest.Wait()
		late, lm := settled(t, st, "late", hook("/late"), vigil.StateFired)
		d.Deliver(late, lm) // handed over after the shutdown began: not started
		synctest.Wait()
		select {
		case <-done:
			t.Fatal("Run returned with attempts in flight at once")
		default:
		}
		close(rv.gate) // the receiver answers within the grace
		synctest.Wait()
		if rc := receipt("gate"); rc.Status != vigil.ReceiptDelivered || rc.Attempts != 1 {
			t.Errorf("gate, answered 200 within the grace: %+v, want delivered on attempt 1", rc)
		}
		<-done // the fake clock runs to the end of the grace, past busy's retry
		if got := time.Since(stopped); got != grace {
			t.Errorf("Run returned %v after its context ended, want the grace %v", got, grace)
		}
		if rc := receipt("hang"); rc.Status != vigil.ReceiptSending {
			t.Errorf("hang, cut mid-send at the end of the grace: %+v, want sending (unknown at the next start)", rc)
		}
		if rc := receipt("busy"); rc.Status != vigil.ReceiptRetrying || rc.Attempts != 1 {
			t.Errorf("busy, due again during the grace: %+v, want still retrying after 1 attempt", rc)
		}
		if w, err := st.WatchGet(context.Background(), "late"); err != nil || len(w.Receipts) != 0 {
			t.Errorf("late, handed over after the shutdown began: receipts %+v, %v; want none", w.Receipts, err)
		}
		var gates, busies int
		for _, p := range rv.requests() {
			switch p {
			case "/gate":
				gates++
			case "/busy":
				busies++
			case "/late":
				t.Error("the delivery handed over after the shutdown began was sent")
			}
		}
		if gates != 1 || busies != 1 {
			t.Errorf("requests %v, want one each of /gate, /busy and /hang", rv.requests())
		}
	})
}

// slowBody is a receiver that answers its status at once and then holds
// its body until the request's context ends.
type slowBody struct{ status int }

func (rv slowBody) RoundTrip(req *http.Request) (*http.Response, error) {
	_, _ = io.ReadAll(req.Body)
	if tr := httptrace.ContextClientTrace(req.Context()); tr != nil && tr.WroteRequest != nil {
		tr.WroteRequest(httptrace.WroteRequestInfo{})
	}
	body := io.NopCloser(readerFunc(func([]byte) (int, error) {
		<-req.Context().Done()
		return 0, req.Context().Err()
	}))
	return &http.Response{StatusCode: rv.status, Header: http.Header{}, Body: body, Request: req}, nil
}

type readerFunc func([]byte) (int, error)

func (f readerFunc) Read(p []byte) (int, error) { return f(p) }

// TestAnswerCutByGraceIsRecorded: a webhook whose receiver answered (its
// status came) while the grace cut the reading of its body ended as it
// answered: a 410 is undeliverable and a 503 retrying, not left sending
// (unknown at the next start).
func TestAnswerCutByGraceIsRecorded(t *testing.T) {
	for _, tt := range []struct {
		status int
		want   string
	}{
		{http.StatusGone, vigil.ReceiptUndeliverable},
		{http.StatusServiceUnavailable, vigil.ReceiptRetrying},
	} {
		t.Run(http.StatusText(tt.status), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				st := memstore.New()
				ch, err := webhook.New(webhook.Config{Client: &http.Client{Transport: slowBody{tt.status}}, Secrets: []string{testSecret}, Timeout: time.Minute})
				if err != nil {
					t.Fatal(err)
				}
				d := deliver.New(deliver.Config{Store: st, Channels: map[string]deliver.Channel{deliver.ChannelWebhook: ch}, StopGrace: 5 * time.Second})
				ctx, cancel := context.WithCancel(context.Background())
				done := make(chan struct{})
				go func() { _ = d.Run(ctx); close(done) }()
				w, m := settled(t, st, "w", `{"webhook":{"url":"https://hooks.example/h"}}`, vigil.StateFired)
				d.Deliver(w, m)
				synctest.Wait()
				cancel()
				<-done
				w, err = st.WatchGet(context.Background(), "w")
				if err != nil || len(w.Receipts) != 1 {
					t.Fatalf("receipts %+v, %v; want one", w, err)
				}
				rc := w.Receipts[0]
				if rc.Status != tt.want || rc.Attempts != 1 || !strings.Contains(rc.Detail, strconv.Itoa(tt.status)) {
					t.Errorf("answered %d, its body cut by the grace: %+v, want %s after 1 attempt", tt.status, rc, tt.want)
				}
			})
		})
	}
}
