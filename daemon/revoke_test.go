package daemon_test

import (
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
	var hits atomic.Int64
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
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
	before := hits.Load()
	time.Sleep(1500 * time.Millisecond) // a probe would have come due
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
