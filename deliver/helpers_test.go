package deliver_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptrace"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vigil-run/vigil"
	"github.com/vigil-run/vigil/deliver"
	"github.com/vigil-run/vigil/deliver/webhook"
	"github.com/vigil-run/vigil/store/memstore"
)

// testSecret is a valid "whsec_" secret (32 bytes of key).
const testSecret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"

// received is one request a fake receiver got.
type received struct {
	id, ts, sig string
	body        []byte
	at          time.Time
}

// receiver is an http.RoundTripper answering from a script, in memory so
// it runs inside a synctest bubble. answer gets the 1-based request
// number: a status, or hang to wait for the request's context, or refuse
// to fail before anything is written.
type receiver struct {
	mu     sync.Mutex
	calls  int
	got    []received
	answer func(n int) (status int, hang, refuse bool)
	// header, when set, gives the n-th answer's headers.
	header func(n int) http.Header
}

func (rv *receiver) RoundTrip(req *http.Request) (*http.Response, error) {
	rv.mu.Lock()
	rv.calls++
	n := rv.calls
	rv.mu.Unlock()
	status, hang, refuse := rv.answer(n)
	if refuse {
		return nil, &refusedError{}
	}
	body, _ := io.ReadAll(req.Body)
	if tr := httptrace.ContextClientTrace(req.Context()); tr != nil && tr.WroteRequest != nil {
		tr.WroteRequest(httptrace.WroteRequestInfo{})
	}
	rv.mu.Lock()
	rv.got = append(rv.got, received{id: req.Header.Get(webhook.HeaderID), ts: req.Header.Get(webhook.HeaderTimestamp),
		sig: req.Header.Get(webhook.HeaderSignature), body: body, at: time.Now()})
	rv.mu.Unlock()
	if hang {
		<-req.Context().Done()
		return nil, req.Context().Err()
	}
	h := http.Header{}
	if rv.header != nil {
		h = rv.header(n)
	}
	return &http.Response{StatusCode: status, Header: h, Body: io.NopCloser(strings.NewReader("")), Request: req}, nil
}

type refusedError struct{}

func (*refusedError) Error() string { return "dial tcp 127.0.0.1:9: connect: connection refused" }

func (rv *receiver) requests() []received {
	rv.mu.Lock()
	defer rv.mu.Unlock()
	return append([]received(nil), rv.got...)
}

// settled stores a watch with the delivery options and settles it in
// state, returning it as the scheduler hands it to DeliverFunc.
func settled(t testing.TB, st vigil.Store, id, deliverJSON string, state vigil.State) (*vigil.Watch, *vigil.Message) {
	t.Helper()
	return settledFor(t, st, id, "agent-7", deliverJSON, state)
}

// settledFor is settled for a watch of recipient.
func settledFor(t testing.TB, st vigil.Store, id, recipient, deliverJSON string, state vigil.State) (*vigil.Watch, *vigil.Message) {
	t.Helper()
	now := time.Now().UTC().Truncate(time.Millisecond)
	w := &vigil.Watch{ID: id, Kind: vigil.KindHTTP, Predicate: json.RawMessage(`{"url":"https://example.com/` + id + `"}`), Recipient: recipient,
		State: vigil.StatePending, Mode: vigil.ModeUntil, Every: 10 * time.Second, Deadline: now.Add(time.Hour), CreatedAt: now,
		Note: "merge PR 41 when green", Labels: map[string]string{"task": "T-19"}}
	if deliverJSON != "" {
		w.Deliver = json.RawMessage(deliverJSON)
	}
	w.Identity = vigil.Identity(w.Recipient, w.Kind, w.Mode, w.Predicate)
	if _, err := st.WatchCreate(t.Context(), vigil.WatchCreateParams{Watch: w}); err != nil {
		t.Fatal(err)
	}
	obs := &vigil.Observation{Verdict: vigil.VerdictSatisfied, At: now, Summary: "HTTP 200", Facts: map[string]any{"status": 200.0}}
	out := &vigil.Outcome{State: state, Sentence: "https://example.com/" + id + " answered 200.", Reason: "satisfied", Observation: obs}
	m := &vigil.Message{ID: "msg-" + id, Recipient: w.Recipient, WatchID: id, Type: vigil.MessageTypeFor(state), Text: out.Sentence, CreatedAt: now}
	if _, err := st.WatchSettle(t.Context(), []vigil.WatchSettleParams{{ID: id, State: state, Outcome: out, SettledAt: now, Polls: 1, Message: m}}); err != nil {
		t.Fatal(err)
	}
	got, err := st.WatchGet(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	return got, m
}

// rig is a dispatcher with a webhook channel over a fake receiver and an
// in-memory store, running until the test ends.
type rig struct {
	st   *memstore.Store
	rv   *receiver
	d    *deliver.Dispatcher
	logs *bytes.Buffer
	stop func()
}

func newRig(t *testing.T, answer func(n int) (int, bool, bool), extra map[string]deliver.Channel) *rig {
	t.Helper()
	r := build(t, memstore.New(), answer, extra)
	startRun(t, r)
	return r
}

// build makes a rig on st without running its dispatcher.
func build(t *testing.T, st *memstore.Store, answer func(n int) (int, bool, bool), extra map[string]deliver.Channel) *rig {
	t.Helper()
	r := &rig{st: st, rv: &receiver{answer: answer}, logs: &bytes.Buffer{}, stop: func() {}}
	ch, err := webhook.New(webhook.Config{Client: &http.Client{Transport: r.rv}, Secrets: []string{testSecret}})
	if err != nil {
		t.Fatal(err)
	}
	chans := map[string]deliver.Channel{deliver.ChannelWebhook: ch}
	for k, v := range extra {
		chans[k] = v
	}
	r.d = deliver.New(deliver.Config{Store: r.st, Channels: chans, Logger: slog.New(slog.NewTextHandler(r.logs, nil))})
	return r
}

// startRun runs r's dispatcher until r.stop or the end of the test.
func startRun(t *testing.T, r *rig) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		_ = r.d.Run(ctx)
		close(done)
	}()
	r.stop = func() {
		cancel()
		<-done
	}
	t.Cleanup(r.stop)
}

func (r *rig) receipt(t *testing.T, id, channel string) vigil.Receipt {
	t.Helper()
	w, err := r.st.WatchGet(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	for _, rc := range w.Receipts {
		if rc.Channel == channel {
			return rc
		}
	}
	t.Fatalf("watch %s has no %s receipt; receipts = %+v", id, channel, w.Receipts)
	return vigil.Receipt{}
}
