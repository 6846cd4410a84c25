package daemon_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vigil-run/vigil"
	"github.com/vigil-run/vigil/store/postgres"
)

// TestPostgresCompleteOnAnotherReplica: a token watch's completion token
// used on a replica that does not hold the watch's shard (behind a load
// balancer, any replica may get the call) settles the watch fired, once,
// and its webhook is posted once, by the replica that holds the shard.
// Before, the completion went through the fenced settlement: refused on a
// replica that does not hold the shard, it answered 409 ("already used")
// and the watch stayed pending until its deadline expired it.
func TestPostgresCompleteOnAnotherReplica(t *testing.T) {
	t.Parallel()
	completeOnAnotherReplica(t, false)
}

// TestPostgresCompleteOnAnotherReplicaWordLost: the same when the holder
// of the watch's shard does not hear of the completion (its listener was
// reconnecting): the lease step after it reconnected finds the outcome
// settled on the other replica and not handed to a channel, and delivers
// it. Before, nothing did until the shard moved or the holder restarted.
func TestPostgresCompleteOnAnotherReplicaWordLost(t *testing.T) {
	t.Parallel()
	completeOnAnotherReplica(t, true)
}

// completeOnAnotherReplica completes, on replica A, a token watch in one
// of replica B's shards, with B deaf to the database's events meanwhile
// when lost (then told its listener connected again), and checks that the
// watch fired and its webhook was posted once, by B.
func completeOnAnotherReplica(t *testing.T, lost bool) {
	posted := make(chan string, 8)
	var hits atomic.Int32
	recv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		hits.Add(1)
		posted <- string(b)
		w.WriteHeader(http.StatusOK)
	}))
	defer recv.Close()

	store := pgStore(t)
	cfgA := testConfig(t.TempDir(), t.TempDir())
	cfgA.Store, cfgA.Replica, cfgA.Lease, cfgA.LeaseRenew = store, "replica-a", 3*time.Second, time.Second
	a := start(t, cfgA)
	ca := newClient(t, a)
	shardsOf(t, 64, ca)
	cfgB := cfgA
	cfgB.DataDir, cfgB.Replica = t.TempDir(), "replica-b"
	sameKeys(t, cfgA.DataDir, cfgB.DataDir)
	b := start(t, cfgB)
	cb := newClient(t, b)
	held := shardsOf(t, 32, ca, cb)

	// A token watch, registered on A, in one of B's shards.
	var w *vigil.Watch
	for range 200 {
		got, err := ca.Register(t.Context(), vigil.RegisterRequest{Kind: vigil.KindToken, Recipient: "r", Deadline: "1h",
			Deliver: json.RawMessage(`{"webhook":{"url":"` + recv.URL + `/hook"}}`)})
		if err != nil {
			t.Fatal(err)
		}
		if slices.Contains(held[1], postgres.ShardOf(got.ID)) {
			w = got
			break
		}
	}
	if w == nil || w.CompletionToken == "" {
		t.Fatalf("no token watch with a completion token in B's shards: %+v", w)
	}

	// Completed on A, which does not hold it.
	if lost {
		b.Deafen(true)
	}
	done, err := ca.Complete(t.Context(), vigil.CompleteRequest{Token: w.CompletionToken, Status: vigil.CompleteSuccess})
	if err != nil {
		t.Fatalf("completing on a replica that does not hold the watch's shard: %v", err)
	}
	if done.State != vigil.StateFired {
		t.Fatalf("the completed watch is %s, want fired", done.State)
	}
	if lost {
		b.Deafen(false)
		b.Resync()
	}
	select {
	case <-posted:
	case <-time.After(time.Minute): // a failure guard only
		t.Fatal("the completed watch's webhook was never posted")
	}
	got := settle(t, cb, w.ID)
	if got.State != vigil.StateFired {
		t.Fatalf("the watch is %s on B, want fired", got.State)
	}
	// A second completion changes nothing.
	if _, err := cb.Complete(t.Context(), vigil.CompleteRequest{Token: w.CompletionToken, Status: vigil.CompleteFailure}); vigil.ErrorCode(err) != vigil.CodeConflict {
		t.Fatalf("a second completion: %v, want conflict", err)
	}
	if n := hits.Load(); n != 1 {
		t.Fatalf("the webhook was posted %d times, want once", n)
	}
}
