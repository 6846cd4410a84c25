package daemon_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vigil-run/vigil"
)

// TestRevokeCancelsWatches: end to end through the daemon's wiring, a
// token revoked while its http watch is pending stops it before its next
// probe: the target sees no request after the revocation, the watch is
// cancelled with reason revoked, nothing is mailed, and the token is
// refused at once.
func TestRevokeCancelsWatches(t *testing.T) {
	t.Parallel()
	// hits counts requests by path: the revoked watch probes /health, the
	// witness /witness.
	var hits, witnessHits atomic.Int64
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/witness" {
			witnessHits.Add(1)
			w.WriteHeader(http.StatusNotFound) // pending: no backoff
			return
		}
		hits.Add(1)
		w.WriteHeader(http.StatusServiceUnavailable) // never satisfied
	}))
	t.Cleanup(target.Close)
	d := start(t, testConfig(t.TempDir(), t.TempDir()))
	admin := newClient(t, d)
	tn := newTenant(t, d, admin, "agent-r", false)
	ctx := t.Context()
	w, err := tn.c.Register(ctx, vigil.RegisterRequest{Kind: vigil.KindHTTP, Recipient: tn.recipient,
		Predicate: json.RawMessage(`{"url":"` + target.URL + `/health"}`), Every: "1s", Observe: true})
	if err != nil {
		t.Fatal(err)
	}
	if hits.Load() == 0 {
		t.Fatal("the first probe did not run")
	}
	if _, err := admin.RevokeToken(ctx, tn.tokenID); err != nil {
		t.Fatal(err)
	}
	if _, err := tn.c.Watch(ctx, w.ID); vigil.ErrorCode(err) != vigil.CodeUnauthorized {
		t.Errorf("a request with the revoked token = %v, want unauthorized at once", err)
	}
	got := settle(t, admin, w.ID)
	if got.State != vigil.StateCancelled || got.Outcome == nil || got.Outcome.Reason != "revoked" {
		t.Fatalf("after revocation the watch is %s %+v, want cancelled, reason revoked", got.State, got.Outcome)
	}
	// A witness every second, registered now (pending, so never backed
	// off): by its third probe the scheduler has run two whole intervals
	// since the cancellation, in which a probe of the revoked watch would
	// have come due. An explicit wait on the scheduler's own turns, not a
	// sleep.
	before := hits.Load()
	witness, err := admin.Register(ctx, vigil.RegisterRequest{Kind: vigil.KindHTTP, Recipient: "witness",
		Predicate: json.RawMessage(`{"url":"` + target.URL + `/witness"}`), Every: "1s",
		Deliver: json.RawMessage(`{"progress":true}`)})
	if err != nil {
		t.Fatal(err)
	}
	sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	events, err := admin.Subscribe(sctx, vigil.EventFilter{WatchID: witness.ID})
	if err != nil {
		t.Fatal(err)
	}
	for probes := 0; probes < 3; {
		select {
		case ev, ok := <-events:
			if !ok {
				t.Fatalf("the event stream ended after %d probes of the witness", probes)
			}
			if ev.Type == vigil.EventWatchProgress {
				probes = ev.Polls
			}
		case <-sctx.Done():
			t.Fatal("the witness was not probed three times")
		}
	}
	if witnessHits.Load() < 3 {
		t.Fatalf("the witness's target saw %d requests, want 3", witnessHits.Load())
	}
	if n := hits.Load(); n != before {
		t.Errorf("the target saw %d requests after the watch was cancelled, want none", n-before)
	}
	page, err := admin.Messages(ctx, vigil.MessagesRequest{Recipient: tn.recipient, Reader: "r"})
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range page.Messages {
		if m.WatchID == w.ID {
			t.Errorf("the revoked watch mailed %+v, want nothing", m)
		}
	}
}
