package storetest

import (
	"cmp"
	"slices"
	"testing"
	"time"

	gocmp "github.com/google/go-cmp/cmp"
	"github.com/vigil-run/vigil"
)

// testCounts: what a watch's probes counted (polls, errors, errors in a
// row, the time of the latest probe) is written by observe, settle and
// cancel, survives a restart, and reaches the scheduler through
// WatchListPending; a cancel without live counts keeps the stored ones.
func testCounts(t *testing.T, newStore NewStoreFunc) {
	s, reopen := newStore(t)
	ctx := t.Context()
	w1 := create(t, s, httpWatch("w1", "r", 1, base))
	create(t, s, httpWatch("w2", "r", 2, base))
	w3 := create(t, s, httpWatch("w3", "r", 3, base))
	obs := &vigil.Observation{Verdict: vigil.VerdictUnavailable, At: base.Add(time.Second), Reason: "connection refused"}
	for _, id := range []string{"w1", "w2", "w3"} {
		p := vigil.WatchObserveParams{ID: id, Observation: obs, Polls: 3, Errors: 2, ConsecutiveErrors: 2, CheckedAt: base.Add(20 * time.Second)}
		if ok, err := s.WatchObserve(ctx, p); err != nil || !ok {
			t.Fatalf("WatchObserve(%s) = %v, %v", id, ok, err)
		}
	}
	s = reopen()
	want1 := *w1
	want1.LastObservation, want1.Polls, want1.Errors, want1.ConsecutiveErrors, want1.CheckedAt = obs, 3, 2, 2, base.Add(20*time.Second)
	if diff := gocmp.Diff(&want1, get(t, s, "w1"), opts); diff != "" {
		t.Errorf("WatchGet after observe (-want +got):\n%s", diff)
	}
	pending, err := s.WatchListPending(ctx)
	if err != nil {
		t.Fatal(err)
	}
	slices.SortFunc(pending, func(a, b vigil.ScheduleEntry) int { return cmp.Compare(a.ID, b.ID) })
	if len(pending) != 3 || pending[0].Polls != 3 || pending[0].Errors != 2 || pending[0].ConsecutiveErrors != 2 {
		t.Errorf("WatchListPending = %+v; want w1 with 3 polls, 2 errors, 2 in a row", pending)
	}

	// A cancel with the live counts records them.
	at := base.Add(time.Minute)
	got, won, err := s.WatchCancel(ctx, vigil.WatchCancelParams{ID: "w1", Outcome: outcome(vigil.StateCancelled, "cancelled"), SettledAt: at,
		CheckedAt: base.Add(50 * time.Second), Polls: 6, Errors: 3, ConsecutiveErrors: 0})
	if err != nil || !won {
		t.Fatalf("WatchCancel = %v, %v", won, err)
	}
	want1.State, want1.Outcome, want1.SettledAt = vigil.StateCancelled, outcome(vigil.StateCancelled, "cancelled"), at
	want1.Polls, want1.Errors, want1.ConsecutiveErrors, want1.CheckedAt = 6, 3, 0, base.Add(50*time.Second)
	if diff := gocmp.Diff(&want1, got, opts); diff != "" {
		t.Errorf("WatchCancel with live counts returned (-want +got):\n%s", diff)
	}
	// One without them keeps what is stored.
	got, _, err = s.WatchCancel(ctx, vigil.WatchCancelParams{ID: "w2", Outcome: outcome(vigil.StateCancelled, "cancelled"), SettledAt: at})
	if err != nil {
		t.Fatal(err)
	}
	if got.Polls != 3 || got.Errors != 2 || got.ConsecutiveErrors != 2 || !got.CheckedAt.Equal(base.Add(20*time.Second)) {
		t.Errorf("WatchCancel without counts: polls %d, errors %d/%d, checked %v; want the stored 3, 2/2, %v",
			got.Polls, got.Errors, got.ConsecutiveErrors, got.CheckedAt, base.Add(20*time.Second))
	}
	// Settling records its counts.
	settleAll(t, s, vigil.WatchSettleParams{ID: "w3", State: vigil.StateErrored, Outcome: outcome(vigil.StateErrored, "max_errors"), SettledAt: at,
		Polls: 9, Errors: 7, ConsecutiveErrors: 5, CheckedAt: at})
	want3 := *w3
	want3.State, want3.Outcome, want3.SettledAt, want3.LastObservation = vigil.StateErrored, outcome(vigil.StateErrored, "max_errors"), at, obs
	want3.Polls, want3.Errors, want3.ConsecutiveErrors, want3.CheckedAt = 9, 7, 5, at
	s = reopen()
	if diff := gocmp.Diff(&want3, get(t, s, "w3"), opts); diff != "" {
		t.Errorf("WatchGet after settle (-want +got):\n%s", diff)
	}
	if diff := gocmp.Diff(&want1, get(t, s, "w1"), opts); diff != "" {
		t.Errorf("WatchGet of the cancelled watch after reopen (-want +got):\n%s", diff)
	}
}

// testDeliverSet: a watch's delivery options can be replaced, pending or
// settled, durably; a missing watch is not_found.
func testDeliverSet(t *testing.T, newStore NewStoreFunc) {
	s, reopen := newStore(t)
	ctx := t.Context()
	w := httpWatch("w1", "r", 1, base)
	w.Deliver = []byte(`{"email":{"to":"ops@example.com"},"webhook":{"url":"https://hooks.example/x"}}`)
	create(t, s, w)
	settleAll(t, s, settle(w, vigil.StateFired, "m1", base.Add(time.Minute)))
	if err := s.WatchDeliverSet(ctx, vigil.WatchDeliverSetParams{ID: "w1", Deliver: []byte(`{"webhook":{"url":"https://hooks.example/x"}}`)}); err != nil {
		t.Fatalf("WatchDeliverSet = %v", err)
	}
	s = reopen()
	if got := get(t, s, "w1"); string(got.Deliver) != `{"webhook":{"url":"https://hooks.example/x"}}` || got.State != vigil.StateFired {
		t.Errorf("after WatchDeliverSet: deliver %s, state %s; want the new options on the settled watch", got.Deliver, got.State)
	}
	if err := s.WatchDeliverSet(ctx, vigil.WatchDeliverSetParams{ID: "w1"}); err != nil {
		t.Fatal(err)
	}
	if got := get(t, s, "w1"); len(got.Deliver) != 0 {
		t.Errorf("after clearing: deliver %s, want none", got.Deliver)
	}
	wantCode(t, "WatchDeliverSet(missing)", s.WatchDeliverSet(ctx, vigil.WatchDeliverSetParams{ID: "missing"}), vigil.CodeNotFound)
}
