// Package storetest is the one conformance suite every vigil.Store passes
// (SPEC §8: "both stores pass ONE conformance test suite"). A store's own
// tests call Run with a constructor; the suite knows nothing of any
// database, so the SQLite and the PostgreSQL stores run it unchanged.
package storetest

import (
	"cmp"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	gocmp "github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/vigil-run/vigil"
)

// NewStoreFunc returns an empty store for one test, and reopen, which closes
// that store and returns a new one over the same data (a restart). The
// constructor registers its own cleanup with t.
type NewStoreFunc func(t *testing.T) (s vigil.Store, reopen func() vigil.Store)

// Run runs the conformance suite against the stores newStore makes. Every
// subtest gets its own store and runs in parallel with the others.
func Run(t *testing.T, newStore func(t *testing.T) (s vigil.Store, reopen func() vigil.Store)) {
	tests := []struct {
		name string
		fn   func(t *testing.T, newStore NewStoreFunc)
	}{
		{"CreateGetRoundTrip", testCreateGetRoundTrip},
		{"CreateMinimal", testCreateMinimal},
		{"RefusesIncomplete", testRefusesIncomplete},
		{"IdentityDedup", testIdentityDedup},
		{"IdentityOfTheCallersOwn", testIdentityOfTheCallersOwn},
		{"TwoRecipientsSameThing", testTwoRecipients},
		{"DedupOnlyAmongPending", testDedupOnlyAmongPending},
		{"Idempotency", testIdempotency},
		{"IdempotencyConcurrent", testIdempotencyConcurrent},
		{"IdempotencyReplay", testIdempotencyReplay},
		{"CreateMany", testCreateMany},
		{"CreateManyLarge", testCreateManyLarge},
		{"CapPerRecipientConcurrent", testCapPerRecipient},
		{"CapGlobalConcurrent", testCapGlobal},
		{"CapsFreedBySettleCancelClose", testCapsFreed},
		{"CapsFreedByOneBatch", testCapsFreedByOneBatch},
		{"CapsConcurrentBatches", testCapsConcurrentBatches},
		{"CreateRaceSingleBatch", testCreateRaceSingleBatch},
		{"SettleCAS", testSettleCAS},
		{"SettleRollsBack", testSettleRollsBack},
		{"CancelRollsBack", testCancelRollsBack},
		{"SettleManyMessages", testSettleManyMessages},
		{"CancelBeforeSettle", testCancelBeforeSettle},
		{"CancelScoped", testCancelScoped},
		{"SettleMessageDefaults", testSettleMessageDefaults},
		{"SettleRefusesIncomplete", testSettleRefusesIncomplete},
		{"SettleCancelRace", testSettleCancelRace},
		{"ExactlyOneOutcomeMessage", testExactlyOnce},
		{"AnsweredAtCreation", testAnsweredAtCreation},
		{"JoinedAnswerIsMailed", testJoinedAnswerIsMailed},
		{"JoinSettleRace", testJoinSettleRace},
		{"Observe", testObserve},
		{"ObserveWithMessage", testObserveWithMessage},
		{"FactNumbersExact", testFactNumbersExact},
		{"Counts", testCounts},
		{"DeliverSet", testDeliverSet},
		{"GetMany", testGetMany},
		{"Mailbox", testMailbox},
		{"MailboxReadersSeeEachMessageOnce", testMailboxReaders},
		{"MessagesOfWatch", testMessagesOfWatch},
		{"RecipientCloseSilent", testRecipientClose},
		{"ListFiltersAndPages", testList},
		{"ListDefaultLimit", testListDefaultLimit},
		{"ListText", testListText},
		{"WatchCounts", testWatchCounts},
		{"WatchCountsEveryPath", testWatchCountsEveryPath},
		{"ListPending", testListPending},
		{"Delete", testDelete},
		{"DeleteForgetsKeys", testDeleteForgetsKeys},
		{"Prune", testPrune},
		{"CutoffsInWholeMilliseconds", testCutoffsInWholeMilliseconds},
		{"Close", testClose},
		{"Receipts", testReceipts},
		{"ReceiptClaim", testReceiptClaim},
		{"ReceiptsResume", testReceiptsResume},
		{"ReceiptsResumeRetryUnknown", testReceiptsResumeRetryUnknown},
		{"ReceiptsResumePartial", testReceiptsResumePartial},
		{"ReceiptsResumeDefaults", testReceiptsResumeDefaults},
		{"Tokens", testTokens},
		{"TokenConflict", testTokenConflict},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			tt.fn(t, newStore)
		})
	}
}

// base is the suite's fixed clock: every time is derived from it, at
// millisecond precision in UTC, as the store returns times.
var base = time.Date(2026, 3, 4, 5, 6, 7, 8_000_000, time.UTC)

// opts compares watches and messages: empty and nil are the same, and
// facts are the same when they are the same JSON (a store gives their
// numbers back as json.Number, whatever type they were written with).
var opts = gocmp.Options{cmpopts.EquateEmpty(), gocmp.FilterValues(func(a, b map[string]any) bool { return len(a) > 0 || len(b) > 0 },
	gocmp.Comparer(func(a, b map[string]any) bool {
		ja, erra := json.Marshal(a)
		jb, errb := json.Marshal(b)
		return erra == nil && errb == nil && string(ja) == string(jb)
	}))}

func newWatch(id, recipient string, kind vigil.Kind, predicate string, at time.Time) *vigil.Watch {
	w := &vigil.Watch{
		ID:        id,
		Kind:      kind,
		Predicate: json.RawMessage(predicate),
		Recipient: recipient,
		State:     vigil.StatePending,
		Mode:      vigil.ModeUntil,
		Every:     10 * time.Second,
		Deadline:  at.Add(30 * time.Minute),
		CreatedAt: at,
	}
	w.Identity = vigil.Identity(recipient, kind, w.Mode, w.Predicate)
	return w
}

// httpWatch is a watch on a URL named after n.
func httpWatch(id, recipient string, n int, at time.Time) *vigil.Watch {
	return newWatch(id, recipient, vigil.KindHTTP, fmt.Sprintf(`{"url":"https://example.com/%d"}`, n), at)
}

func create(t *testing.T, s vigil.Store, w *vigil.Watch) *vigil.Watch {
	t.Helper()
	got, err := s.WatchCreate(t.Context(), vigil.WatchCreateParams{Watch: w})
	if err != nil {
		t.Fatalf("WatchCreate(%s) error = %v", w.ID, err)
	}
	return got
}

func get(t *testing.T, s vigil.Store, id string) *vigil.Watch {
	t.Helper()
	w, err := s.WatchGet(t.Context(), id)
	if err != nil {
		t.Fatalf("WatchGet(%s) error = %v", id, err)
	}
	return w
}

func wantCode(t *testing.T, what string, err error, code vigil.Code) {
	t.Helper()
	if got := vigil.ErrorCode(err); got != code {
		t.Fatalf("%s error = %v (code %q), want code %q", what, err, got, code)
	}
}

func outcome(state vigil.State, reason string) *vigil.Outcome {
	return &vigil.Outcome{State: state, Sentence: "it " + string(state), Reason: reason}
}

func message(id, recipient, watchID string, typ vigil.MessageType, at time.Time) *vigil.Message {
	return &vigil.Message{ID: id, Recipient: recipient, WatchID: watchID, Type: typ, Text: "text of " + id, CreatedAt: at}
}

// settle returns params that settle w as state at at, with its outcome message.
func settle(w *vigil.Watch, state vigil.State, msgID string, at time.Time) vigil.WatchSettleParams {
	return vigil.WatchSettleParams{
		ID: w.ID, State: state, Outcome: outcome(state, "satisfied"), SettledAt: at, Polls: 1,
		Message: message(msgID, w.Recipient, w.ID, vigil.MessageTypeFor(state), at),
	}
}

func settleAll(t *testing.T, s vigil.Store, ps ...vigil.WatchSettleParams) []bool {
	t.Helper()
	won, err := s.WatchSettle(t.Context(), ps)
	if err != nil {
		t.Fatalf("WatchSettle error = %v", err)
	}
	if len(won) != len(ps) {
		t.Fatalf("WatchSettle returned %d results for %d entries", len(won), len(ps))
	}
	return won
}

// mailbox returns every message of recipient, read without a reader.
func mailbox(t *testing.T, s vigil.Store, recipient string) []*vigil.Message {
	t.Helper()
	var out []*vigil.Message
	var after int64
	for {
		page, err := s.MessagesRead(t.Context(), vigil.MessagesReadParams{Recipient: recipient, After: &after, Limit: 1000})
		if err != nil {
			t.Fatalf("MessagesRead(%s) error = %v", recipient, err)
		}
		if len(page.Messages) == 0 {
			return out
		}
		out = append(out, page.Messages...)
		after = page.Messages[len(page.Messages)-1].Seq
	}
}

func ids[T any](xs []T, id func(T) string) []string {
	out := make([]string, len(xs))
	for i, x := range xs {
		out[i] = id(x)
	}
	return out
}

func watchIDs(ws []*vigil.Watch) []string {
	return ids(ws, func(w *vigil.Watch) string { return w.ID })
}

func messageIDs(ms []*vigil.Message) []string {
	return ids(ms, func(m *vigil.Message) string { return m.ID })
}

func sorted(s []string) []string {
	s = slices.Clone(s)
	slices.Sort(s)
	return s
}

func testCreateGetRoundTrip(t *testing.T, newStore NewStoreFunc) {
	s, reopen := newStore(t)
	zone := time.FixedZone("UTC+2", 2*60*60)
	sub := func(d time.Duration) time.Time { return base.Add(d).Add(123_456 * time.Nanosecond).In(zone) }
	in := &vigil.Watch{
		ID:        "01J00000000000000000000001",
		Kind:      vigil.KindHTTP,
		Predicate: json.RawMessage(`{"method":"GET","url":"https://example.com/health"}`),
		Recipient: "agent-7",
		State:     vigil.StatePending,
		Mode:      vigil.ModeUnless,
		Every:     30 * time.Second,
		Deadline:  sub(2 * time.Hour),
		StartAt:   sub(time.Minute),
		CreatedAt: sub(0),
		NextDue:   sub(time.Second), // never stored
		Polls:     2,
		LastObservation: &vigil.Observation{
			Verdict: vigil.VerdictPending, At: base.Add(time.Second), Summary: "HTTP 503",
			Facts:  map[string]any{"status": 503.0, "phase": "Starting", "checks": []any{"a", "b"}, "nested": map[string]any{"ok": false}},
			Reason: "", Permanent: false,
		},
		Receipts:   []vigil.Receipt{{Channel: "webhook", Status: "sending", Attempts: 1, Detail: "first try", UpdatedAt: base}},
		Note:       "merge PR 41 when green",
		Labels:     map[string]string{"task": "T-19", "team": "infra"},
		Stable:     3,
		StableFor:  90 * time.Second,
		MaxPolls:   100,
		MaxErrors:  5,
		Deliver:    json.RawMessage(`{"progress":true,"webhook":{"url":"https://hooks.example/x"}}`),
		ChainDepth: 2,
		TokenID:    "tok-1",
		Identity:   "f00dfeedf00dfeedf00dfeedf00dfeed",
	}
	want := *in
	want.Deadline, want.StartAt, want.CreatedAt = base.Add(2*time.Hour), base.Add(time.Minute), base
	want.NextDue = time.Time{}

	got, err := s.WatchCreate(t.Context(), vigil.WatchCreateParams{Watch: in, MaxActive: 10, MaxActivePerRecipient: 10})
	if err != nil {
		t.Fatalf("WatchCreate error = %v", err)
	}
	if diff := gocmp.Diff(&want, got, opts); diff != "" {
		t.Errorf("WatchCreate returned a watch unlike the one stored (-want +got):\n%s", diff)
	}
	check := func(s vigil.Store, when string) {
		t.Helper()
		got := get(t, s, in.ID)
		if diff := gocmp.Diff(&want, got, opts); diff != "" {
			t.Errorf("WatchGet %s (-want +got):\n%s", when, diff)
		}
		for name, tm := range map[string]time.Time{"CreatedAt": got.CreatedAt, "Deadline": got.Deadline, "StartAt": got.StartAt, "SettledAt": got.SettledAt} {
			if !tm.IsZero() && tm.Location() != time.UTC {
				t.Errorf("WatchGet %s: %s in %v, want UTC", when, name, tm.Location())
			}
		}
	}
	check(s, "after create")

	// Settling fills in the outcome, the settlement time, the polls, and
	// the last observation from the outcome.
	obs := &vigil.Observation{Verdict: vigil.VerdictSatisfied, At: base.Add(time.Minute), Summary: "HTTP 200",
		Facts: map[string]any{"status": 200.0, "body": map[string]any{"phase": "Ready"}}}
	out := &vigil.Outcome{State: vigil.StateFired, Sentence: "example.com answered 200.", Attention: true, Reason: "satisfied", Observation: obs}
	settleAll(t, s, vigil.WatchSettleParams{ID: in.ID, State: vigil.StateFired, Outcome: out, SettledAt: sub(time.Minute), Polls: 7})
	want.State, want.Outcome, want.SettledAt, want.Polls, want.LastObservation = vigil.StateFired, out, base.Add(time.Minute), 7, obs
	check(s, "after settle")
	check(reopen(), "after reopen")
}

func testCreateMinimal(t *testing.T, newStore NewStoreFunc) {
	s, _ := newStore(t)
	// A token watch: no predicate, no interval; a standing watch: no deadline.
	in := &vigil.Watch{ID: "w1", Kind: vigil.KindToken, Recipient: "r", CreatedAt: base, Deadline: base.Add(24 * time.Hour)}
	in.Identity = vigil.Identity("r", vigil.KindToken, "", []byte("w1"))
	standing := &vigil.Watch{ID: "w2", Kind: vigil.KindTicket, Recipient: "r", CreatedAt: base, Standing: true,
		Predicate: json.RawMessage(`{"number":7,"provider":"github","repo":"acme/api"}`), Every: time.Minute}
	standing.Identity = vigil.Identity("r", vigil.KindTicket, "", standing.Predicate)
	for _, w := range []*vigil.Watch{in, standing} {
		create(t, s, w)
		want := *w
		want.State = vigil.StatePending
		if diff := gocmp.Diff(&want, get(t, s, w.ID), opts); diff != "" {
			t.Errorf("WatchGet(%s) (-want +got):\n%s", w.ID, diff)
		}
	}
	if _, err := s.WatchGet(t.Context(), "missing"); !errorsIs(err, vigil.ErrNotFound) {
		t.Errorf("WatchGet(missing) error = %v, want not_found", err)
	}
}

// testRefusesIncomplete: a watch or message missing what every row needs
// is refused as invalid_request, alone or in a batch, and nothing of it
// is written.
func testRefusesIncomplete(t *testing.T, newStore NewStoreFunc) {
	s, _ := newStore(t)
	ctx := t.Context()
	bad := map[string]func(w *vigil.Watch){
		"no kind":      func(w *vigil.Watch) { w.Kind = "" },
		"no identity":  func(w *vigil.Watch) { w.Identity = "" },
		"no time":      func(w *vigil.Watch) { w.CreatedAt = time.Time{} },
		"settled":      func(w *vigil.Watch) { w.State = vigil.StateFired },
		"deliver":      func(w *vigil.Watch) { w.Deliver = json.RawMessage(`{"webhook":`) },
		"no recipient": func(w *vigil.Watch) { w.Recipient = "" },
		"no id":        func(w *vigil.Watch) { w.ID = "" },
	}
	for name, spoil := range bad {
		w := httpWatch("bad", "r", 1, base)
		spoil(w)
		_, err := s.WatchCreate(ctx, vigil.WatchCreateParams{Watch: w})
		wantCode(t, "WatchCreate ("+name+")", err, vigil.CodeInvalidRequest)
		res, err := s.WatchCreateMany(ctx, []vigil.WatchCreateParams{{Watch: w}})
		if err == nil && len(res) == 1 {
			err = res[0].Err
		}
		wantCode(t, "WatchCreateMany ("+name+")", err, vigil.CodeInvalidRequest)
	}
	_, err := s.WatchCreate(ctx, vigil.WatchCreateParams{Watch: httpWatch("k", "r", 2, base), IdempotencyKey: "k"})
	wantCode(t, "WatchCreate (a key without its request hash)", err, vigil.CodeInvalidRequest)
	m := message("m1", "r", "", vigil.MessageNote, base)
	m.Type = ""
	_, err = s.MessageCreate(ctx, m)
	wantCode(t, "MessageCreate (no type)", err, vigil.CodeInvalidRequest)
	if got := mailbox(t, s, "r"); len(got) != 0 {
		t.Errorf("refused input left %d messages", len(got))
	}
	if _, err := s.WatchGet(ctx, "bad"); !errorsIs(err, vigil.ErrNotFound) {
		t.Errorf("WatchGet(bad) after refusals error = %v, want not_found", err)
	}
}

func errorsIs(err, target error) bool { return vigil.ErrorCode(err) == vigil.ErrorCode(target) }

func testIdentityDedup(t *testing.T, newStore NewStoreFunc) {
	s, _ := newStore(t)
	first := create(t, s, httpWatch("w1", "r", 1, base))
	again := httpWatch("w2", "r", 1, base.Add(time.Minute))
	again.Note, again.Deadline, again.Labels = "other note", base.Add(time.Hour), map[string]string{"a": "b"}
	got := create(t, s, again)
	want := *first
	want.Existing = true
	if diff := gocmp.Diff(&want, got, opts); diff != "" {
		t.Errorf("second WatchCreate of the same identity (-want +got):\n%s", diff)
	}
	if _, err := s.WatchGet(t.Context(), "w2"); !errorsIs(err, vigil.ErrNotFound) {
		t.Errorf("WatchGet(w2) error = %v, want not_found: a duplicate must not be stored", err)
	}
	// Mode is part of identity.
	unless := httpWatch("w3", "r", 1, base)
	unless.Mode = vigil.ModeUnless
	unless.Identity = vigil.Identity("r", unless.Kind, unless.Mode, unless.Predicate)
	if got := create(t, s, unless); got.Existing || got.ID != "w3" {
		t.Errorf("WatchCreate(unless) = %s existing %v, want a new watch w3", got.ID, got.Existing)
	}
}

// testIdentityOfTheCallersOwn: an identity that is not vigil.Identity's is
// kept as given, even one that reads as a number, and two that read as the
// same number are two identities.
func testIdentityOfTheCallersOwn(t *testing.T, newStore NewStoreFunc) {
	s, reopen := newStore(t)
	idents := []string{"007", "7", " 7", "1.50", "1.5", "a caller's own"}
	for i, ident := range idents {
		w := httpWatch(fmt.Sprintf("w%d", i), "r", 1, base)
		w.Identity = ident
		if got := create(t, s, w); got.Existing || got.Identity != ident {
			t.Errorf("WatchCreate(identity %q) = %s existing %v identity %q, want a new watch of that identity", ident, got.ID, got.Existing, got.Identity)
		}
	}
	s = reopen()
	for i, ident := range idents {
		w := httpWatch(fmt.Sprintf("again%d", i), "r", 1, base)
		w.Identity = ident
		if got := create(t, s, w); !got.Existing || got.ID != fmt.Sprintf("w%d", i) {
			t.Errorf("WatchCreate(identity %q) again = %s existing %v, want w%d", ident, got.ID, got.Existing, i)
		}
		if got, err := s.WatchGet(t.Context(), fmt.Sprintf("w%d", i)); err != nil || got.Identity != ident {
			t.Errorf("WatchGet(w%d).Identity = %q, %v; want %q", i, got.Identity, err, ident)
		}
	}
}

func testTwoRecipients(t *testing.T, newStore NewStoreFunc) {
	s, _ := newStore(t)
	a := create(t, s, httpWatch("w1", "alice", 1, base))
	b := create(t, s, httpWatch("w2", "bob", 1, base))
	if a.Existing || b.Existing || a.ID == b.ID {
		t.Errorf("two recipients watching the same thing: got %s (existing %v) and %s (existing %v), want two new watches", a.ID, a.Existing, b.ID, b.Existing)
	}
}

func testDedupOnlyAmongPending(t *testing.T, newStore NewStoreFunc) {
	s, _ := newStore(t)
	w1 := create(t, s, httpWatch("w1", "r", 1, base))
	settleAll(t, s, settle(w1, vigil.StateFired, "m1", base.Add(time.Minute)))
	w2 := create(t, s, httpWatch("w2", "r", 1, base.Add(2*time.Minute)))
	if w2.ID != "w2" || w2.Existing {
		t.Fatalf("WatchCreate after the first settled = %s existing %v, want new watch w2", w2.ID, w2.Existing)
	}
	if w3 := create(t, s, httpWatch("w3", "r", 1, base.Add(3*time.Minute))); w3.ID != "w2" || !w3.Existing {
		t.Errorf("WatchCreate while w2 pending = %s existing %v, want w2 existing", w3.ID, w3.Existing)
	}
}

func testIdempotency(t *testing.T, newStore NewStoreFunc) {
	s, _ := newStore(t)
	ctx := t.Context()
	since := base.Add(-24 * time.Hour)
	call := func(w *vigil.Watch, key, hash string, since time.Time) (*vigil.Watch, error) {
		return s.WatchCreate(ctx, vigil.WatchCreateParams{Watch: w, IdempotencyKey: key, RequestHash: hash, IdempotencySince: since})
	}
	first, err := call(httpWatch("w1", "r", 1, base), "k1", "h1", since)
	if err != nil || first.Replayed || first.Existing {
		t.Fatalf("first call = %+v, %v; want a new watch", first, err)
	}
	// A retry (the engine minted a new id) replays the first answer.
	got, err := call(httpWatch("w1-retry", "r", 1, base.Add(time.Second)), "k1", "h1", since)
	if err != nil {
		t.Fatalf("retry error = %v", err)
	}
	want := *first
	want.Replayed = true
	if diff := gocmp.Diff(&want, got, opts); diff != "" {
		t.Errorf("retry (-want +got):\n%s", diff)
	}
	if _, err := s.WatchGet(ctx, "w1-retry"); !errorsIs(err, vigil.ErrNotFound) {
		t.Errorf("WatchGet(w1-retry) error = %v, want not_found", err)
	}
	// The same key with another request is a conflict.
	_, err = call(httpWatch("w2", "r", 2, base.Add(time.Second)), "k1", "h2", since)
	wantCode(t, "same key, other request", err, vigil.CodeIdempotencyConflict)
	if vigil.ErrorMessage(err) == "internal error" {
		t.Errorf("idempotency conflict has no message a user can read")
	}
	// A replay returns the watch as it is now.
	settleAll(t, s, settle(first, vigil.StateFired, "m1", base.Add(time.Minute)))
	got, err = call(httpWatch("w1-retry2", "r", 1, base.Add(2*time.Minute)), "k1", "h1", since)
	if err != nil || got.ID != "w1" || !got.Replayed || got.State != vigil.StateFired {
		t.Errorf("replay after settle = %+v, %v; want w1 replayed, fired", got, err)
	}
	// Keys belong to a recipient.
	if other, err := call(httpWatch("w3", "other", 1, base), "k1", "h9", since); err != nil || other.ID != "w3" || other.Replayed {
		t.Errorf("same key for another recipient = %+v, %v; want a new watch w3", other, err)
	}
	// An entry older than IdempotencySince is forgotten: the key may serve a
	// new request.
	later := base.Add(25 * time.Hour)
	got, err = call(httpWatch("w4", "r", 4, later), "k1", "h4", later.Add(-24*time.Hour))
	if err != nil || got.ID != "w4" || got.Replayed {
		t.Errorf("expired key reused = %+v, %v; want a new watch w4", got, err)
	}
	got, err = call(httpWatch("w4-retry", "r", 4, later), "k1", "h4", later.Add(-24*time.Hour))
	if err != nil || got.ID != "w4" || !got.Replayed {
		t.Errorf("retry of the reused key = %+v, %v; want w4 replayed", got, err)
	}
	// A key whose request matched a pending watch replays that, Existing.
	create(t, s, httpWatch("w5", "r", 5, base))
	got, err = call(httpWatch("w6", "r", 5, base), "k5", "h5", since)
	if err != nil || got.ID != "w5" || !got.Existing || got.Replayed {
		t.Errorf("keyed call matching a pending watch = %+v, %v; want w5 existing", got, err)
	}
	got, err = call(httpWatch("w6-retry", "r", 5, base), "k5", "h5", since)
	if err != nil || got.ID != "w5" || !got.Existing || !got.Replayed {
		t.Errorf("retry of it = %+v, %v; want w5 existing and replayed", got, err)
	}
}

// testIdempotencyReplay: IdempotencyReplay answers what WatchCreate would
// replay, writing nothing: the watch a live entry of that request names,
// Replayed (and Existing for a join), as it is now; nil for no entry, an
// expired one, another request's, another recipient's, or a watch gone.
func testIdempotencyReplay(t *testing.T, newStore NewStoreFunc) {
	s, _ := newStore(t)
	ctx := t.Context()
	since := base.Add(-24 * time.Hour)
	replay := func(recipient, key, hash string, since time.Time) *vigil.Watch {
		t.Helper()
		w, err := s.IdempotencyReplay(ctx, vigil.IdempotencyReplayParams{Recipient: recipient, Key: key, RequestHash: hash, Since: since})
		if err != nil {
			t.Fatalf("IdempotencyReplay(%s, %s, %s) error = %v", recipient, key, hash, err)
		}
		return w
	}
	if w := replay("r", "k1", "h1", since); w != nil {
		t.Fatalf("no entry: %+v, want nil", w)
	}
	first, err := s.WatchCreate(ctx, vigil.WatchCreateParams{Watch: httpWatch("w1", "r", 1, base), IdempotencyKey: "k1", RequestHash: "h1", IdempotencySince: since})
	if err != nil {
		t.Fatal(err)
	}
	want := *first
	want.Replayed = true
	if diff := gocmp.Diff(&want, replay("r", "k1", "h1", since), opts); diff != "" {
		t.Errorf("replay (-want +got):\n%s", diff)
	}
	settleAll(t, s, settle(first, vigil.StateFired, "m1", base.Add(time.Minute)))
	if got := replay("r", "k1", "h1", since); got == nil || got.ID != "w1" || !got.Replayed || got.Existing || got.State != vigil.StateFired {
		t.Errorf("replay after settle = %+v; want w1 replayed, fired", got)
	}
	for _, c := range []struct{ what, recipient, key, hash string }{
		{"another request", "r", "k1", "h2"}, {"another recipient", "other", "k1", "h1"}, {"another key", "r", "k2", "h1"},
	} {
		if got := replay(c.recipient, c.key, c.hash, since); got != nil {
			t.Errorf("%s: %+v, want nil", c.what, got)
		}
	}
	if got := replay("r", "k1", "h1", base.Add(time.Second)); got != nil {
		t.Errorf("an entry older than Since: %+v, want nil", got)
	}
	// A key whose request matched a pending watch replays it, Existing.
	create(t, s, httpWatch("w5", "r", 5, base))
	if _, err := s.WatchCreate(ctx, vigil.WatchCreateParams{Watch: httpWatch("w6", "r", 5, base), IdempotencyKey: "k5", RequestHash: "h5", IdempotencySince: since}); err != nil {
		t.Fatal(err)
	}
	if got := replay("r", "k5", "h5", since); got == nil || got.ID != "w5" || !got.Existing || !got.Replayed {
		t.Errorf("replay of a join = %+v; want w5 existing and replayed", got)
	}
	// Nothing was written: the key still replays w1 through WatchCreate.
	got, err := s.WatchCreate(ctx, vigil.WatchCreateParams{Watch: httpWatch("w1-retry", "r", 1, base), IdempotencyKey: "k1", RequestHash: "h1", IdempotencySince: since})
	if err != nil || got.ID != "w1" || !got.Replayed {
		t.Errorf("WatchCreate after the reads = %+v, %v; want w1 replayed", got, err)
	}
	// Its watch deleted, an entry goes with it.
	if err := s.WatchDelete(ctx, "w1"); err != nil {
		t.Fatal(err)
	}
	if got := replay("r", "k1", "h1", since); got != nil {
		t.Errorf("after its watch was deleted: %+v, want nil", got)
	}
}

// testIdempotencyConcurrent: concurrent registrations of one request under
// one key, through WatchCreate and WatchCreateMany, make one watch: every
// caller gets it, one of them as new.
func testIdempotencyConcurrent(t *testing.T, newStore NewStoreFunc) {
	s, _ := newStore(t)
	ctx := t.Context()
	var (
		mu   sync.Mutex
		wg   sync.WaitGroup
		got  = map[string]int{}
		made int
	)
	start := make(chan struct{})
	for i := range 16 {
		wg.Go(func() {
			<-start
			p := vigil.WatchCreateParams{Watch: httpWatch(fmt.Sprintf("w%02d", i), "r", 1, base), IdempotencyKey: "k", RequestHash: "h",
				IdempotencySince: base.Add(-time.Hour), MaxActive: 100, MaxActivePerRecipient: 2}
			var w *vigil.Watch
			var err error
			if i%3 == 0 {
				var res []vigil.WatchCreateResult
				if res, err = s.WatchCreateMany(ctx, []vigil.WatchCreateParams{p}); err == nil {
					w, err = res[0].Watch, res[0].Err
				}
			} else {
				w, err = s.WatchCreate(ctx, p)
			}
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				t.Errorf("registration %d error = %v", i, err)
				return
			}
			got[w.ID]++
			if !w.Replayed && !w.Existing {
				made++
			}
		})
	}
	close(start)
	wg.Wait()
	if len(got) != 1 || made != 1 {
		t.Errorf("16 concurrent registrations under one key: watches %v, %d of them new; want one watch, new once", got, made)
	}
	if pending, err := s.WatchListPending(ctx); err != nil || len(pending) != 1 {
		t.Errorf("WatchListPending = %d watches, %v; want 1", len(pending), err)
	}
}

// register runs n concurrent registrations and counts what they got.
func register(t *testing.T, s vigil.Store, n int, mk func(i int) vigil.WatchCreateParams) (ok, quota int) {
	t.Helper()
	var (
		mu   sync.Mutex
		wg   sync.WaitGroup
		errs []error
	)
	start := make(chan struct{})
	for i := range n {
		wg.Go(func() {
			<-start
			_, err := s.WatchCreate(t.Context(), mk(i))
			mu.Lock()
			defer mu.Unlock()
			switch vigil.ErrorCode(err) {
			case "":
				ok++
			case vigil.CodeQuotaExceeded:
				quota++
			default:
				errs = append(errs, err)
			}
		})
	}
	close(start)
	wg.Wait()
	for _, err := range errs {
		t.Errorf("WatchCreate error = %v, want nil or quota_exceeded", err)
	}
	return ok, quota
}

func testCapPerRecipient(t *testing.T, newStore NewStoreFunc) {
	s, _ := newStore(t)
	const cap = 5
	ok, quota := register(t, s, 20, func(i int) vigil.WatchCreateParams {
		return vigil.WatchCreateParams{Watch: httpWatch(fmt.Sprintf("w%02d", i), "r", i, base), MaxActive: 1000, MaxActivePerRecipient: cap}
	})
	if ok != cap || quota != 20-cap {
		t.Errorf("20 concurrent registrations under a per-recipient cap of %d: %d made, %d quota_exceeded; want %d and %d", cap, ok, quota, cap, 20-cap)
	}
	// Another recipient is not affected.
	if _, err := s.WatchCreate(t.Context(), vigil.WatchCreateParams{Watch: httpWatch("x", "other", 1, base), MaxActivePerRecipient: cap}); err != nil {
		t.Errorf("WatchCreate for another recipient error = %v", err)
	}
	// At the cap, the same condition still answers with the existing watch.
	page, err := s.WatchList(t.Context(), vigil.WatchListParams{Recipient: "r"})
	if err != nil || len(page.Watches) != cap {
		t.Fatalf("WatchList(r) = %d watches, %v; want %d", len(page.Watches), err, cap)
	}
	dup := *page.Watches[0]
	dup.ID = "dup"
	got, err := s.WatchCreate(t.Context(), vigil.WatchCreateParams{Watch: &dup, MaxActivePerRecipient: cap})
	if err != nil || !got.Existing {
		t.Errorf("WatchCreate of a pending identity at the cap = %v, %v; want the existing watch", got, err)
	}
	// The refusal says which cap and its number.
	_, err = s.WatchCreate(t.Context(), vigil.WatchCreateParams{Watch: httpWatch("y", "r", 99, base), MaxActivePerRecipient: cap})
	wantCode(t, "WatchCreate over the cap", err, vigil.CodeQuotaExceeded)
	if msg := vigil.ErrorMessage(err); !containsAll(msg, "max_active_per_recipient", fmt.Sprint(cap)) {
		t.Errorf("quota message %q should name max_active_per_recipient and %d", msg, cap)
	}
}

func containsAll(s string, subs ...string) bool {
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			return false
		}
	}
	return true
}

func testCapGlobal(t *testing.T, newStore NewStoreFunc) {
	s, _ := newStore(t)
	const cap = 7
	ok, quota := register(t, s, 20, func(i int) vigil.WatchCreateParams {
		r := fmt.Sprintf("r%02d", i)
		return vigil.WatchCreateParams{Watch: httpWatch("w"+r, r, i, base), MaxActive: cap, MaxActivePerRecipient: 1000}
	})
	if ok != cap || quota != 20-cap {
		t.Errorf("20 concurrent registrations under a global cap of %d: %d made, %d quota_exceeded; want %d and %d", cap, ok, quota, cap, 20-cap)
	}
	_, err := s.WatchCreate(t.Context(), vigil.WatchCreateParams{Watch: httpWatch("y", "y", 99, base), MaxActive: cap})
	wantCode(t, "WatchCreate over the cap", err, vigil.CodeQuotaExceeded)
	if msg := vigil.ErrorMessage(err); !containsAll(msg, "max_active", fmt.Sprint(cap)) {
		t.Errorf("quota message %q should name max_active and %d", msg, cap)
	}
}

func testCapsFreed(t *testing.T, newStore NewStoreFunc) {
	s, reopen := newStore(t)
	ctx := t.Context()
	p := func(w *vigil.Watch) vigil.WatchCreateParams {
		return vigil.WatchCreateParams{Watch: w, MaxActive: 3, MaxActivePerRecipient: 2}
	}
	mustCreate := func(s vigil.Store, w *vigil.Watch) {
		t.Helper()
		if _, err := s.WatchCreate(ctx, p(w)); err != nil {
			t.Fatalf("WatchCreate(%s) error = %v", w.ID, err)
		}
	}
	refused := func(s vigil.Store, w *vigil.Watch) {
		t.Helper()
		_, err := s.WatchCreate(ctx, p(w))
		wantCode(t, "WatchCreate("+w.ID+")", err, vigil.CodeQuotaExceeded)
	}
	w1, w2 := httpWatch("w1", "a", 1, base), httpWatch("w2", "a", 2, base)
	mustCreate(s, w1)
	mustCreate(s, w2)
	refused(s, httpWatch("w3", "a", 3, base))
	settleAll(t, s, settle(w1, vigil.StateFired, "m1", base))
	mustCreate(s, httpWatch("w3", "a", 3, base))
	refused(s, httpWatch("w4", "a", 4, base))
	if _, won, err := s.WatchCancel(ctx, vigil.WatchCancelParams{ID: "w2", SettledAt: base}); err != nil || !won {
		t.Fatalf("WatchCancel(w2) = %v, %v", won, err)
	}
	mustCreate(s, httpWatch("w4", "a", 4, base))
	mustCreate(s, httpWatch("w5", "b", 5, base))
	refused(s, httpWatch("w6", "c", 6, base)) // global cap: w3, w4, w5
	if _, err := s.RecipientClose(ctx, vigil.RecipientCloseParams{Recipient: "a", SettledAt: base}); err != nil {
		t.Fatal(err)
	}
	s = reopen() // the counts survive a restart
	mustCreate(s, httpWatch("w6", "c", 6, base))
	mustCreate(s, httpWatch("w7", "a", 7, base))
	refused(s, httpWatch("w8", "d", 8, base))
	if err := s.WatchDelete(ctx, "w1"); err != nil {
		t.Fatal(err)
	}
	refused(s, httpWatch("w8", "d", 8, base)) // deleting a settled watch frees nothing
}

func testSettleCAS(t *testing.T, newStore NewStoreFunc) {
	s, _ := newStore(t)
	ctx := t.Context()
	w := create(t, s, httpWatch("w1", "r", 1, base))
	first := settle(w, vigil.StateFired, "m1", base.Add(time.Minute))
	if won := settleAll(t, s, first); !won[0] {
		t.Fatalf("first WatchSettle lost")
	}
	if first.Message.Seq == 0 {
		t.Errorf("WatchSettle did not set the outcome message's Seq")
	}
	before := get(t, s, "w1")
	second := settle(w, vigil.StateFailed, "m2", base.Add(2*time.Minute))
	second.Polls = 99
	if won := settleAll(t, s, second); won[0] {
		t.Errorf("second WatchSettle won, want lost")
	}
	got, won, err := s.WatchCancel(ctx, vigil.WatchCancelParams{ID: "w1", Outcome: outcome(vigil.StateCancelled, "cancelled"),
		SettledAt: base.Add(3 * time.Minute), Message: message("m3", "r", "w1", vigil.MessageCancelled, base.Add(3*time.Minute))})
	if err != nil || won {
		t.Errorf("WatchCancel after settle = %v, %v; want lost, no error", won, err)
	}
	if diff := gocmp.Diff(before, got, opts); diff != "" {
		t.Errorf("WatchCancel after settle returned (-want +got):\n%s", diff)
	}
	if diff := gocmp.Diff(before, get(t, s, "w1"), opts); diff != "" {
		t.Errorf("the losers wrote something (-want +got):\n%s", diff)
	}
	if diff := gocmp.Diff([]string{"m1"}, messageIDs(mailbox(t, s, "r"))); diff != "" {
		t.Errorf("mailbox (-want +got):\n%s", diff)
	}
	if _, err := s.WatchSettle(ctx, []vigil.WatchSettleParams{{ID: "w1", State: vigil.StatePending, SettledAt: base}}); err == nil {
		t.Errorf("WatchSettle to pending: no error")
	}
}

// testSettleManyMessages settles a storm's batch in one call, some
// entries losing and some without a message: every winner's message is in
// the mailbox once, in the order of the call, with the Seq WatchSettle set
// on it.
func testSettleManyMessages(t *testing.T, newStore NewStoreFunc) {
	s, _ := newStore(t)
	const n = 300 // more than one of any batched insert a store makes
	var ps []vigil.WatchSettleParams
	var want []string
	lost := make([]bool, n+1)
	for i := range n {
		w := create(t, s, httpWatch(fmt.Sprintf("w%03d", i), "r", i, base))
		p := settle(w, vigil.StateFired, fmt.Sprintf("m%03d", i), base.Add(time.Minute))
		switch {
		case i%7 == 3:
			p.Message = nil
		case i%11 == 5:
			settleAll(t, s, settle(w, vigil.StateFailed, fmt.Sprintf("early%03d", i), base))
			want = append(want, fmt.Sprintf("early%03d", i))
			lost[i] = true
		}
		ps = append(ps, p)
	}
	ps = append(ps, settle(httpWatch("nope", "r", n, base), vigil.StateFired, "nope", base)) // no such watch
	lost[n] = true
	won := settleAll(t, s, ps...)
	var seqs []int64
	for i, p := range ps {
		if won[i] == lost[i] {
			t.Fatalf("entry %d (%s) won = %v, want %v", i, p.ID, won[i], !lost[i])
		}
		if won[i] && p.Message != nil {
			want = append(want, p.Message.ID)
			seqs = append(seqs, p.Message.Seq)
		}
	}
	got := mailbox(t, s, "r")
	if diff := gocmp.Diff(want, messageIDs(got)); diff != "" {
		t.Fatalf("mailbox (-want +got):\n%s", diff)
	}
	var stored []int64
	for _, m := range got[len(want)-len(seqs):] {
		stored = append(stored, m.Seq)
	}
	if diff := gocmp.Diff(seqs, stored); diff != "" {
		t.Errorf("the seqs WatchSettle set are not the stored ones (-set +stored):\n%s", diff)
	}
}

func testCancelBeforeSettle(t *testing.T, newStore NewStoreFunc) {
	s, _ := newStore(t)
	ctx := t.Context()
	w := create(t, s, httpWatch("w1", "r", 1, base))
	at := base.Add(time.Minute)
	cancel := vigil.WatchCancelParams{ID: "w1", Outcome: outcome(vigil.StateCancelled, "cancelled"), SettledAt: at,
		Message: message("m1", "r", "w1", vigil.MessageCancelled, at)}
	got, won, err := s.WatchCancel(ctx, cancel)
	if err != nil || !won {
		t.Fatalf("WatchCancel = %v, %v; want won", won, err)
	}
	want := *w
	want.State, want.Outcome, want.SettledAt = vigil.StateCancelled, cancel.Outcome, at
	if diff := gocmp.Diff(&want, got, opts); diff != "" {
		t.Errorf("WatchCancel returned (-want +got):\n%s", diff)
	}
	if won := settleAll(t, s, settle(w, vigil.StateFired, "m2", base.Add(2*time.Minute))); won[0] {
		t.Errorf("WatchSettle after cancel won, want lost")
	}
	cancel.Message = message("m3", "r", "w1", vigil.MessageCancelled, at)
	if _, won, err := s.WatchCancel(ctx, cancel); err != nil || won {
		t.Errorf("second WatchCancel = %v, %v; want lost, no error", won, err)
	}
	if diff := gocmp.Diff(&want, get(t, s, "w1"), opts); diff != "" {
		t.Errorf("WatchGet (-want +got):\n%s", diff)
	}
	msgs := mailbox(t, s, "r")
	if diff := gocmp.Diff([]string{"m1"}, messageIDs(msgs)); diff != "" {
		t.Fatalf("mailbox (-want +got):\n%s", diff)
	}
	if msgs[0].Type != vigil.MessageCancelled {
		t.Errorf("cancel message type = %q, want cancelled", msgs[0].Type)
	}
	if _, _, err := s.WatchCancel(ctx, vigil.WatchCancelParams{ID: "missing", SettledAt: at}); !errorsIs(err, vigil.ErrNotFound) {
		t.Errorf("WatchCancel(missing) error = %v, want not_found", err)
	}
}

func testCancelScoped(t *testing.T, newStore NewStoreFunc) {
	s, _ := newStore(t)
	ctx := t.Context()
	create(t, s, httpWatch("w1", "alice", 1, base))
	_, _, err := s.WatchCancel(ctx, vigil.WatchCancelParams{ID: "w1", Recipients: []string{"bob", "carol"}, SettledAt: base})
	if !errorsIs(err, vigil.ErrNotFound) {
		t.Errorf("WatchCancel of another recipient's watch error = %v, want not_found", err)
	}
	if got := get(t, s, "w1"); got.State != vigil.StatePending {
		t.Errorf("state after a refused cancel = %s, want pending", got.State)
	}
	if _, won, err := s.WatchCancel(ctx, vigil.WatchCancelParams{ID: "w1", Recipients: []string{"bob", "alice"}, SettledAt: base}); err != nil || !won {
		t.Errorf("WatchCancel in scope = %v, %v; want won", won, err)
	}
	if n := len(mailbox(t, s, "alice")); n != 0 {
		t.Errorf("a silent cancel left %d messages", n)
	}
}

// testSettleMessageDefaults: the message of a settlement or of a cancel
// needs no more than its id and text: its WatchID, Type and CreatedAt
// default to the watch's id, the outcome's type (cancelled) and
// SettledAt, and its Recipient to the watch's, so it reaches the
// recipient's mailbox as the watch's outcome message, with the Seq set on
// the caller's message.
func testSettleMessageDefaults(t *testing.T, newStore NewStoreFunc) {
	s, _ := newStore(t)
	ctx := t.Context()
	create(t, s, httpWatch("w1", "r", 1, base))
	create(t, s, httpWatch("w2", "r", 2, base))
	at := base.Add(time.Minute)
	m1, m2 := &vigil.Message{ID: "m1", Text: "it fired"}, &vigil.Message{ID: "m2", Text: "it was cancelled"}
	if won := settleAll(t, s, vigil.WatchSettleParams{ID: "w1", State: vigil.StateFired, Outcome: outcome(vigil.StateFired, "satisfied"),
		SettledAt: at, Message: m1}); !won[0] {
		t.Fatalf("WatchSettle lost")
	}
	if _, won, err := s.WatchCancel(ctx, vigil.WatchCancelParams{ID: "w2", SettledAt: at.Add(time.Second), Message: m2}); err != nil || !won {
		t.Fatalf("WatchCancel = %v, %v; want won", won, err)
	}
	want := []*vigil.Message{
		{ID: "m1", Recipient: "r", WatchID: "w1", Type: vigil.MessageFired, Text: "it fired", CreatedAt: at, Seq: m1.Seq},
		{ID: "m2", Recipient: "r", WatchID: "w2", Type: vigil.MessageCancelled, Text: "it was cancelled", CreatedAt: at.Add(time.Second), Seq: m2.Seq},
	}
	if diff := gocmp.Diff(want, mailbox(t, s, "r"), opts); diff != "" || m1.Seq == 0 || m2.Seq == 0 {
		t.Errorf("mailbox of r, seqs set %d and %d (-want +got):\n%s", m1.Seq, m2.Seq, diff)
	}
	// They are the watches' outcome messages: another is refused.
	for _, id := range []string{"w1", "w2"} {
		_, err := s.MessageCreate(ctx, message("again-"+id, "r", id, vigil.MessageFired, at))
		wantCode(t, "MessageCreate of a second outcome message for "+id, err, vigil.CodeConflict)
	}
}

// testSettleRefusesIncomplete: a settlement without the time it settled,
// or whose message has no id, and a cancel without its time, are refused
// (invalid_request), a batch whole: nothing settles, nothing is written.
func testSettleRefusesIncomplete(t *testing.T, newStore NewStoreFunc) {
	s, _ := newStore(t)
	ctx := t.Context()
	w1, w2 := create(t, s, httpWatch("w1", "r", 1, base)), create(t, s, httpWatch("w2", "r", 2, base))
	at := base.Add(time.Minute)
	noTime := settle(w2, vigil.StateFired, "m2", at)
	noTime.SettledAt = time.Time{}
	_, err := s.WatchSettle(ctx, []vigil.WatchSettleParams{settle(w1, vigil.StateFired, "m1", at), noTime})
	wantCode(t, "WatchSettle without SettledAt", err, vigil.CodeInvalidRequest)
	noID := settle(w2, vigil.StateFired, "", at)
	_, err = s.WatchSettle(ctx, []vigil.WatchSettleParams{settle(w1, vigil.StateFired, "m1", at), noID})
	wantCode(t, "WatchSettle of a message without id", err, vigil.CodeInvalidRequest)
	_, _, err = s.WatchCancel(ctx, vigil.WatchCancelParams{ID: "w1", Outcome: outcome(vigil.StateCancelled, "cancelled")})
	wantCode(t, "WatchCancel without SettledAt", err, vigil.CodeInvalidRequest)
	for _, id := range []string{"w1", "w2"} {
		if got := get(t, s, id); got.State != vigil.StatePending {
			t.Errorf("%s = %s after refused settlements, want pending", id, got.State)
		}
	}
	if got := mailbox(t, s, "r"); len(got) != 0 {
		t.Errorf("refused settlements wrote %v", messageIDs(got))
	}
}

func testSettleCancelRace(t *testing.T, newStore NewStoreFunc) {
	s, _ := newStore(t)
	ctx := t.Context()
	const watches, racers = 10, 8
	for i := range watches {
		create(t, s, httpWatch(fmt.Sprintf("w%d", i), "r", i, base))
	}
	var (
		mu   sync.Mutex
		wins = map[string]int{}
		wg   sync.WaitGroup
	)
	for i := range watches {
		id := fmt.Sprintf("w%d", i)
		w := &vigil.Watch{ID: id, Recipient: "r"}
		for j := range racers {
			wg.Go(func() {
				at := base.Add(time.Duration(j) * time.Second)
				msgID := fmt.Sprintf("%s-m%d", id, j)
				var won bool
				var err error
				if j%2 == 0 {
					var r []bool
					r, err = s.WatchSettle(ctx, []vigil.WatchSettleParams{settle(w, vigil.StateFired, msgID, at)})
					won = err == nil && r[0]
				} else {
					_, won, err = s.WatchCancel(ctx, vigil.WatchCancelParams{ID: id, SettledAt: at,
						Message: message(msgID, "r", id, vigil.MessageCancelled, at)})
				}
				if err != nil {
					t.Errorf("racer %s/%d error = %v", id, j, err)
				}
				if won {
					mu.Lock()
					wins[id]++
					mu.Unlock()
				}
			})
		}
	}
	wg.Wait()
	perWatch := map[string]int{}
	for _, m := range mailbox(t, s, "r") {
		perWatch[m.WatchID]++
	}
	for i := range watches {
		id := fmt.Sprintf("w%d", i)
		if wins[id] != 1 || perWatch[id] != 1 {
			t.Errorf("%s: %d winners and %d outcome messages, want 1 and 1", id, wins[id], perWatch[id])
		}
	}
}

func testExactlyOnce(t *testing.T, newStore NewStoreFunc) {
	s, reopen := newStore(t)
	ctx := t.Context()
	var ws []*vigil.Watch
	for i := range 10 {
		ws = append(ws, create(t, s, httpWatch(fmt.Sprintf("w%d", i), "r", i, base)))
	}
	var batch []vigil.WatchSettleParams
	for _, w := range ws[:6] {
		batch = append(batch, settle(w, vigil.StateFired, "first-"+w.ID, base.Add(time.Minute)))
	}
	for i, won := range settleAll(t, s, batch...) {
		if !won {
			t.Errorf("first settle of %s lost", ws[i].ID)
		}
	}
	// A batch where most entries already settled: only the new ones win,
	// and the losers write nothing.
	batch = batch[:0]
	for _, w := range ws[:7] {
		batch = append(batch, settle(w, vigil.StateExpired, "again-"+w.ID, base.Add(2*time.Minute)))
	}
	batch = append(batch, vigil.WatchSettleParams{ID: "missing", State: vigil.StateFired, SettledAt: base})
	got := settleAll(t, s, batch...)
	want := []bool{false, false, false, false, false, false, true, false}
	if diff := gocmp.Diff(want, got); diff != "" {
		t.Errorf("WatchSettle of a partly settled batch (-want +got):\n%s", diff)
	}
	check := func(s vigil.Store, when string) {
		t.Helper()
		count := map[string]int{}
		for _, m := range mailbox(t, s, "r") {
			if m.Type != vigil.MessageNote && m.Type != vigil.MessageChanged {
				count[m.WatchID]++
			}
		}
		for _, w := range ws {
			got := get(t, s, w.ID)
			want := 0
			if got.State.Terminal() {
				want = 1
			}
			if count[w.ID] != want {
				t.Errorf("%s: %s is %s with %d outcome messages, want %d", when, w.ID, got.State, count[w.ID], want)
			}
		}
		for _, w := range ws[:6] {
			if got := get(t, s, w.ID); got.State != vigil.StateFired {
				t.Errorf("%s: %s state = %s, want fired (the first settlement)", when, w.ID, got.State)
			}
		}
	}
	check(s, "after settling")
	s = reopen()
	check(s, "after reopen")
	// The mailbox itself refuses a second outcome message for a watch.
	_, err := s.MessageCreate(ctx, message("dup", "r", "w0", vigil.MessageFired, base))
	wantCode(t, "MessageCreate of a second outcome message", err, vigil.CodeConflict)
	if _, err := s.MessageCreate(ctx, message("note", "r", "w0", vigil.MessageNote, base)); err != nil {
		t.Errorf("MessageCreate of a note for a settled watch error = %v", err)
	}
	check(s, "after a refused duplicate")
}

func testAnsweredAtCreation(t *testing.T, newStore NewStoreFunc) {
	s, _ := newStore(t)
	w := create(t, s, httpWatch("w1", "r", 1, base))
	obs := &vigil.Observation{Verdict: vigil.VerdictSatisfied, At: base, Summary: "already green"}
	out := &vigil.Outcome{State: vigil.StateFired, Sentence: "It was already green.", Reason: "satisfied", Observation: obs}
	settleAll(t, s, vigil.WatchSettleParams{ID: w.ID, State: vigil.StateFired, Outcome: out, SettledAt: base, Polls: 1, AnsweredAtCreation: true})
	want := *w
	want.State, want.Outcome, want.SettledAt, want.Polls, want.LastObservation, want.AnsweredAtCreation = vigil.StateFired, out, base, 1, obs, true
	if diff := gocmp.Diff(&want, get(t, s, "w1"), opts); diff != "" {
		t.Errorf("WatchGet (-want +got):\n%s", diff)
	}
	if n := len(mailbox(t, s, "r")); n != 0 {
		t.Errorf("a watch answered at creation mailed %d messages, want 0", n)
	}
}

// A settlement answered at creation writes its message all the same when
// a registration joined the watch (WatchJoin), and then is not answered at
// creation; one not joined writes none and leaves the message's Seq 0. A
// join of a watch no longer pending, or of none, reports false.
func testJoinedAnswerIsMailed(t *testing.T, newStore NewStoreFunc) {
	s, reopen := newStore(t)
	ctx := t.Context()
	joined := create(t, s, httpWatch("w1", "r", 1, base))
	alone := create(t, s, httpWatch("w2", "r", 2, base))
	done := create(t, s, httpWatch("w3", "r", 3, base))
	if ok, err := s.WatchJoin(ctx, joined.ID); err != nil || !ok {
		t.Fatalf("WatchJoin of a pending watch = %v, %v; want true", ok, err)
	}
	if ok, err := s.WatchJoin(ctx, joined.ID); err != nil || !ok {
		t.Fatalf("WatchJoin of a pending watch joined already = %v, %v; want true", ok, err)
	}
	settleAll(t, s, settle(done, vigil.StateFired, "m3", base))
	if ok, err := s.WatchJoin(ctx, done.ID); err != nil || ok {
		t.Fatalf("WatchJoin of a settled watch = %v, %v; want false", ok, err)
	}
	if ok, err := s.WatchJoin(ctx, "nope"); err != nil || ok {
		t.Fatalf("WatchJoin of no watch = %v, %v; want false, no error", ok, err)
	}
	s = reopen() // the join is the store's, not the caller's memory

	quiet := func(w *vigil.Watch, msgID string) vigil.WatchSettleParams {
		p := settle(w, vigil.StateFired, msgID, base.Add(time.Second))
		p.AnsweredAtCreation = true
		return p
	}
	ps := []vigil.WatchSettleParams{quiet(alone, "m2"), quiet(joined, "m1")}
	if won := settleAll(t, s, ps...); !won[0] || !won[1] {
		t.Fatalf("WatchSettle won %v, want both", won)
	}
	if ps[0].Message.Seq != 0 {
		t.Errorf("the watch no registration joined: its message has seq %d, want 0 (not written)", ps[0].Message.Seq)
	}
	if ps[1].Message.Seq == 0 {
		t.Error("the joined watch: its message has seq 0, want the seq it was written with")
	}
	if w := get(t, s, joined.ID); w.State != vigil.StateFired || w.AnsweredAtCreation {
		t.Errorf("the joined watch is %s, answered at creation %v; want fired, not answered at creation", w.State, w.AnsweredAtCreation)
	}
	if w := get(t, s, alone.ID); w.State != vigil.StateFired || !w.AnsweredAtCreation {
		t.Errorf("the watch no registration joined is %s, answered at creation %v; want fired, answered at creation", w.State, w.AnsweredAtCreation)
	}
	var got []string
	for _, m := range mailbox(t, s, "r") {
		got = append(got, m.ID+"/"+m.WatchID)
	}
	if want := []string{"m3/w3", "m1/w1"}; !slices.Equal(got, want) {
		t.Errorf("the mailbox holds %v, want %v", got, want)
	}
	if ok, err := s.WatchJoin(ctx, joined.ID); err != nil || ok {
		t.Fatalf("WatchJoin after the settlement = %v, %v; want false", ok, err)
	}
}

// A join and a settlement answered at creation of one watch, at once: the
// join wins (true) exactly when the settlement mails its message, and a
// join that lost finds the watch answered at creation.
func testJoinSettleRace(t *testing.T, newStore NewStoreFunc) {
	s, _ := newStore(t)
	ctx := t.Context()
	const n = 40
	ws := make([]*vigil.Watch, n)
	for i := range ws {
		ws[i] = create(t, s, httpWatch(fmt.Sprintf("w%02d", i), "r", i, base))
	}
	joined := make([]bool, n)
	ps := make([]vigil.WatchSettleParams, n)
	var wg sync.WaitGroup
	for i, w := range ws {
		ps[i] = settle(w, vigil.StateFired, fmt.Sprintf("m%02d", i), base)
		ps[i].AnsweredAtCreation = true
		wg.Add(2)
		go func() {
			defer wg.Done()
			ok, err := s.WatchJoin(ctx, w.ID)
			if err != nil {
				t.Errorf("WatchJoin(%s) error = %v", w.ID, err)
			}
			joined[i] = ok
		}()
		go func() {
			defer wg.Done()
			if won, err := s.WatchSettle(ctx, ps[i:i+1]); err != nil || !won[0] {
				t.Errorf("WatchSettle(%s) = %v, %v; want won", w.ID, won, err)
			}
		}()
	}
	wg.Wait()
	mailed := map[string]bool{}
	for _, m := range mailbox(t, s, "r") {
		mailed[m.WatchID] = true
	}
	for i, w := range ws {
		got := get(t, s, w.ID)
		if joined[i] != mailed[w.ID] || joined[i] != (ps[i].Message.Seq != 0) || joined[i] == got.AnsweredAtCreation {
			t.Errorf("%s: joined %v, mailed %v (seq %d), answered at creation %v; want the join to win exactly when the outcome is mailed",
				w.ID, joined[i], mailed[w.ID], ps[i].Message.Seq, got.AnsweredAtCreation)
		}
	}
}

func testObserve(t *testing.T, newStore NewStoreFunc) {
	s, reopen := newStore(t)
	ctx := t.Context()
	w := create(t, s, httpWatch("w1", "r", 1, base))
	obs := &vigil.Observation{
		Verdict: vigil.VerdictUnavailable, At: base.Add(10 * time.Second), Summary: "connection refused",
		Facts:  map[string]any{"attempt": 3.0, "addr": "10.0.0.1:443", "tags": []any{"x", 1.5, true, nil}, "deep": map[string]any{"a": map[string]any{"b": "c"}}},
		Reason: "dial tcp: connection refused", Permanent: true,
	}
	if ok, err := s.WatchObserve(ctx, vigil.WatchObserveParams{ID: "w1", Observation: obs, Polls: 3}); err != nil || !ok {
		t.Fatalf("WatchObserve = %v, %v; want true", ok, err)
	}
	want := *w
	want.LastObservation, want.Polls = obs, 3
	s = reopen()
	if diff := gocmp.Diff(&want, get(t, s, "w1"), opts); diff != "" {
		t.Errorf("WatchGet after observe (-want +got):\n%s", diff)
	}
	// Settling without an observation keeps the last one.
	settleAll(t, s, vigil.WatchSettleParams{ID: "w1", State: vigil.StateExpired, Outcome: outcome(vigil.StateExpired, "deadline"), SettledAt: base.Add(time.Hour), Polls: 4})
	want.State, want.Outcome, want.SettledAt, want.Polls = vigil.StateExpired, outcome(vigil.StateExpired, "deadline"), base.Add(time.Hour), 4
	if ok, err := s.WatchObserve(ctx, vigil.WatchObserveParams{ID: "w1", Observation: &vigil.Observation{Verdict: vigil.VerdictSatisfied, At: base}, Polls: 9}); err != nil || ok {
		t.Errorf("WatchObserve of a settled watch = %v, %v; want false", ok, err)
	}
	if diff := gocmp.Diff(&want, get(t, s, "w1"), opts); diff != "" {
		t.Errorf("WatchGet after settle (-want +got):\n%s", diff)
	}
	if ok, err := s.WatchObserve(ctx, vigil.WatchObserveParams{ID: "missing", Polls: 1}); err != nil || ok {
		t.Errorf("WatchObserve(missing) = %v, %v; want false, nil", ok, err)
	}
	if ok, err := s.WatchObserve(ctx, vigil.WatchObserveParams{ID: "w1", Polls: 10, Message: message("late", "r", "w1", vigil.MessageChanged, base)}); err != nil || ok {
		t.Errorf("WatchObserve with a message on a settled watch = %v, %v; want false", ok, err)
	}
	if diff := gocmp.Diff([]string{}, messageIDs(mailbox(t, s, "r"))); diff != "" {
		t.Errorf("a losing observation left a message (-want +got):\n%s", diff)
	}
}

// testFactNumbersExact: the numbers of an observation's and an outcome's
// facts come back as the JSON they were written as, every digit of an
// integer past 2^53 kept, as json.Number (what a probe reads a body's
// numbers as): a delivery retried after a restart, whose body is built
// from the stored watch, carries the first attempt's bytes.
func testFactNumbersExact(t *testing.T, newStore NewStoreFunc) {
	s, reopen := newStore(t)
	ctx := t.Context()
	create(t, s, httpWatch("w1", "r", 1, base))
	facts := func() map[string]any {
		return map[string]any{"big": int64(1234567890123456789), "body": map[string]any{"id": json.Number("-9007199254740993"), "list": []any{json.Number("12345678901234567890123")}},
			"f": 0.1, "e": json.Number("1e400"), "n": 3, "s": "<&>"}
	}
	const want = `{"big":1234567890123456789,"body":{"id":-9007199254740993,"list":[12345678901234567890123]},"e":1e400,"f":0.1,"n":3,"s":"\u003c\u0026\u003e"}`
	obs := &vigil.Observation{Verdict: vigil.VerdictPending, At: base.Add(time.Second), Summary: "HTTP 202", Facts: facts()}
	if ok, err := s.WatchObserve(ctx, vigil.WatchObserveParams{ID: "w1", Observation: obs, Polls: 1}); err != nil || !ok {
		t.Fatalf("WatchObserve = %v, %v; want true", ok, err)
	}
	out := &vigil.Outcome{State: vigil.StateFired, Sentence: "done", Reason: "satisfied",
		Observation: &vigil.Observation{Verdict: vigil.VerdictSatisfied, At: base.Add(time.Minute), Facts: facts()}}
	outJSON, err := json.Marshal(out)
	if err != nil {
		t.Fatal(err)
	}
	check := func(w *vigil.Watch, when string, settled bool) {
		t.Helper()
		o := w.LastObservation
		if settled {
			if w.Outcome == nil {
				t.Fatalf("%s: no outcome", when)
			}
			if got, err := json.Marshal(w.Outcome); err != nil || string(got) != string(outJSON) {
				t.Errorf("%s: outcome reads back as\n%s (%v), want\n%s", when, got, err, outJSON)
			}
			o = w.Outcome.Observation
		}
		if o == nil {
			t.Fatalf("%s: no observation", when)
		}
		if got, err := json.Marshal(o.Facts); err != nil || string(got) != want {
			t.Errorf("%s: facts read back as %s (%v), want %s", when, got, err, want)
		}
		if n, ok := o.Facts["big"].(json.Number); !ok || n != "1234567890123456789" {
			t.Errorf("%s: facts.big is %T %v, want json.Number 1234567890123456789", when, o.Facts["big"], o.Facts["big"])
		}
	}
	check(get(t, s, "w1"), "after observe", false)
	s = reopen()
	check(get(t, s, "w1"), "after observe and reopen", false)
	settleAll(t, s, vigil.WatchSettleParams{ID: "w1", State: vigil.StateFired, Outcome: out, SettledAt: base.Add(time.Minute), Polls: 2})
	check(get(t, s, "w1"), "after settle", true)
	s = reopen()
	check(get(t, s, "w1"), "after settle and reopen", true)
	ws, err := s.WatchGetMany(ctx, []string{"w1"})
	if err != nil || len(ws) != 1 {
		t.Fatalf("WatchGetMany = %v, %v", ws, err)
	}
	check(ws[0], "from WatchGetMany", true)
}

// testObserveWithMessage: a standing watch's change and its new baseline
// commit together; many changes each leave one message; a change found
// against a baseline that is no longer the stored one (another probe
// recorded a change first) writes nothing and says so.
func testObserveWithMessage(t *testing.T, newStore NewStoreFunc) {
	s, reopen := newStore(t)
	ctx := t.Context()
	w := httpWatch("w1", "r", 1, base)
	w.Standing, w.Deadline = true, time.Time{}
	create(t, s, w)
	var prior *vigil.Observation
	for i := range 3 {
		obs := &vigil.Observation{Verdict: vigil.VerdictSatisfied, At: base.Add(time.Duration(i) * time.Minute), Summary: fmt.Sprintf("title is v%d", i)}
		m := message(fmt.Sprintf("c%d", i), "r", "w1", vigil.MessageChanged, obs.At)
		if ok, err := s.WatchObserve(ctx, vigil.WatchObserveParams{ID: "w1", Observation: obs, Polls: i + 1, Message: m, Baseline: prior}); err != nil || !ok {
			t.Fatalf("WatchObserve with a change message = %v, %v", ok, err)
		}
		if m.Seq == 0 {
			t.Errorf("WatchObserve did not set the change message's Seq")
		}
		// As a probe reads it back: the stored baseline, not the caller's.
		prior = get(t, s, "w1").LastObservation
	}
	s = reopen()
	if diff := gocmp.Diff([]string{"c0", "c1", "c2"}, messageIDs(mailbox(t, s, "r"))); diff != "" {
		t.Errorf("change messages (-want +got):\n%s", diff)
	}
	got := get(t, s, "w1")
	if got.LastObservation == nil || got.LastObservation.Summary != "title is v2" || got.State != vigil.StatePending {
		t.Errorf("after three changes: state %s, last %+v; want pending with the newest baseline", got.State, got.LastObservation)
	}
	// Two probes read the baseline v2; the first records its change, the
	// second's, found against v2 too (or against none), is refused whole.
	v2 := got.LastObservation
	first := &vigil.Observation{Verdict: vigil.VerdictSatisfied, At: base.Add(10 * time.Minute), Summary: "title is v3"}
	if ok, err := s.WatchObserve(ctx, vigil.WatchObserveParams{ID: "w1", Observation: first, Polls: 4,
		Message: message("c3", "r", "w1", vigil.MessageChanged, first.At), Baseline: v2}); err != nil || !ok {
		t.Fatalf("WatchObserve over the stored baseline = %v, %v; want true", ok, err)
	}
	second := &vigil.Observation{Verdict: vigil.VerdictSatisfied, At: base.Add(11 * time.Minute), Summary: "title is v3, again"}
	for _, stale := range []*vigil.Observation{v2, nil} {
		ok, err := s.WatchObserve(ctx, vigil.WatchObserveParams{ID: "w1", Observation: second, Polls: 5,
			Message: message("c3-again", "r", "w1", vigil.MessageChanged, second.At), Baseline: stale})
		if ok || !errors.Is(err, vigil.ErrBaselineMoved) {
			t.Errorf("WatchObserve over baseline %+v after another change = %v, %v; want false, ErrBaselineMoved", stale, ok, err)
		}
	}
	s = reopen()
	if diff := gocmp.Diff([]string{"c0", "c1", "c2", "c3"}, messageIDs(mailbox(t, s, "r"))); diff != "" {
		t.Errorf("change messages after a refused one (-want +got):\n%s", diff)
	}
	got = get(t, s, "w1")
	if got.LastObservation == nil || got.LastObservation.Summary != "title is v3" || got.Polls != 4 {
		t.Errorf("after a refused change: last %+v, polls %d; want the first change's baseline and counts", got.LastObservation, got.Polls)
	}
	// CheckBaseline makes the same check without a message (a run's start).
	start := &vigil.Observation{Verdict: vigil.VerdictPending, At: base.Add(12 * time.Minute), Summary: "starting"}
	if ok, err := s.WatchObserve(ctx, vigil.WatchObserveParams{ID: "w1", Observation: start, Polls: 6, Baseline: v2, CheckBaseline: true}); ok || !errors.Is(err, vigil.ErrBaselineMoved) {
		t.Errorf("WatchObserve with CheckBaseline over an old baseline = %v, %v; want false, ErrBaselineMoved", ok, err)
	}
	if ok, err := s.WatchObserve(ctx, vigil.WatchObserveParams{ID: "w1", Observation: start, Polls: 6, Baseline: got.LastObservation, CheckBaseline: true}); err != nil || !ok {
		t.Errorf("WatchObserve with CheckBaseline over the stored baseline = %v, %v; want true", ok, err)
	}
	if got := get(t, s, "w1"); got.LastObservation == nil || got.LastObservation.Summary != "starting" {
		t.Errorf("after a checked write: last %+v; want it written", got.LastObservation)
	}
}

func testGetMany(t *testing.T, newStore NewStoreFunc) {
	s, _ := newStore(t)
	want := []*vigil.Watch{create(t, s, httpWatch("w1", "r", 1, base)), create(t, s, httpWatch("w3", "r", 3, base))}
	create(t, s, httpWatch("w2", "r", 2, base))
	got, err := s.WatchGetMany(t.Context(), []string{"w3", "missing", "w1"})
	if err != nil {
		t.Fatal(err)
	}
	slices.SortFunc(got, func(a, b *vigil.Watch) int { return cmp.Compare(a.ID, b.ID) })
	if diff := gocmp.Diff(want, got, opts); diff != "" {
		t.Errorf("WatchGetMany (-want +got):\n%s", diff)
	}
	if got, err := s.WatchGetMany(t.Context(), nil); err != nil || len(got) != 0 {
		t.Errorf("WatchGetMany(nil) = %v, %v", got, err)
	}
}

func testMailbox(t *testing.T, newStore NewStoreFunc) {
	s, reopen := newStore(t)
	ctx := t.Context()
	// MessagesLastSeq is where a live event stream starts: 0 with no
	// message, then the newest seq of any mailbox.
	lastSeq := func(s vigil.Store, want int64) {
		t.Helper()
		if got, err := s.MessagesLastSeq(ctx); err != nil || got != want {
			t.Errorf("MessagesLastSeq = %d, %v; want %d", got, err, want)
		}
	}
	lastSeq(s, 0)
	var all []*vigil.Message
	add := func(s vigil.Store, id string, at time.Time) {
		t.Helper()
		in := &vigil.Message{ID: id, Recipient: "r", WatchID: "w-" + id, Type: vigil.MessageChanged, Text: "changed " + id,
			Data: json.RawMessage(`{"n":1}`), CreatedAt: at}
		got, err := s.MessageCreate(ctx, in)
		if err != nil {
			t.Fatalf("MessageCreate(%s) error = %v", id, err)
		}
		if len(all) > 0 && got.Seq <= all[len(all)-1].Seq {
			t.Errorf("MessageCreate(%s) seq %d not after %d", id, got.Seq, all[len(all)-1].Seq)
		}
		want := *in
		want.Seq = got.Seq
		if diff := gocmp.Diff(&want, got, opts); diff != "" {
			t.Errorf("MessageCreate(%s) (-want +got):\n%s", id, diff)
		}
		all = append(all, got)
	}
	read := func(s vigil.Store, p vigil.MessagesReadParams) vigil.MessagesPage {
		t.Helper()
		p.Recipient = "r"
		page, err := s.MessagesRead(ctx, p)
		if err != nil {
			t.Fatalf("MessagesRead(%+v) error = %v", p, err)
		}
		return page
	}
	ack := func(s vigil.Store, reader string, seq int64) {
		t.Helper()
		if err := s.MessagesAck(ctx, vigil.MessagesAckParams{Recipient: "r", Reader: reader, Seq: seq}); err != nil {
			t.Fatalf("MessagesAck(%s, %d) error = %v", reader, seq, err)
		}
	}
	for i := range 5 {
		add(s, fmt.Sprintf("m%d", i), base.Add(time.Duration(i)*time.Second))
	}
	other, err := s.MessageCreate(ctx, message("other", "someone-else", "", vigil.MessageNote, base))
	if err != nil {
		t.Fatal(err)
	}
	lastSeq(s, other.Seq)
	// A new reader sees the backlog, from cursor 0.
	page := read(s, vigil.MessagesReadParams{Reader: "a"})
	if diff := gocmp.Diff(all, page.Messages, opts); diff != "" || page.Cursor != 0 {
		t.Errorf("first read of reader a: cursor %d (-want +got):\n%s", page.Cursor, diff)
	}
	// Reading does not move the cursor; acking does.
	if page := read(s, vigil.MessagesReadParams{Reader: "a"}); len(page.Messages) != 5 {
		t.Errorf("second read before ack: %d messages, want 5", len(page.Messages))
	}
	ack(s, "a", all[4].Seq)
	page = read(s, vigil.MessagesReadParams{Reader: "a"})
	if len(page.Messages) != 0 || page.Cursor != all[4].Seq {
		t.Errorf("read after ack: %d messages, cursor %d; want 0 and %d", len(page.Messages), page.Cursor, all[4].Seq)
	}
	// An ack never moves a cursor back.
	ack(s, "a", all[1].Seq)
	if page := read(s, vigil.MessagesReadParams{Reader: "a"}); page.Cursor != all[4].Seq {
		t.Errorf("cursor after an older ack = %d, want %d", page.Cursor, all[4].Seq)
	}
	// An ack names its cursor: a recipient and a reader.
	for _, p := range []vigil.MessagesAckParams{{Recipient: "r", Seq: all[4].Seq}, {Reader: "a", Seq: all[4].Seq}} {
		wantCode(t, fmt.Sprintf("MessagesAck(%+v)", p), s.MessagesAck(ctx, p), vigil.CodeInvalidRequest)
	}
	s = reopen()
	lastSeq(s, other.Seq)
	add(s, "m5", base.Add(time.Minute))
	add(s, "m6", base.Add(time.Minute))
	lastSeq(s, all[6].Seq)
	if diff := gocmp.Diff(all[5:], read(s, vigil.MessagesReadParams{Reader: "a"}).Messages, opts); diff != "" {
		t.Errorf("reader a after reopen (-want +got):\n%s", diff)
	}
	if diff := gocmp.Diff(all, read(s, vigil.MessagesReadParams{Reader: "b"}).Messages, opts); diff != "" {
		t.Errorf("new reader b (-want +got):\n%s", diff)
	}
	// After overrides the stored cursor, both ways.
	after := all[2].Seq
	page = read(s, vigil.MessagesReadParams{Reader: "a", After: &after})
	if diff := gocmp.Diff(all[3:], page.Messages, opts); diff != "" || page.Cursor != all[4].Seq {
		t.Errorf("read with After: cursor %d (-want +got):\n%s", page.Cursor, diff)
	}
	// No reader: from the start. Limit bounds the page; none, or one below
	// 1, is the default (100).
	if diff := gocmp.Diff(messageIDs(all[:3]), messageIDs(read(s, vigil.MessagesReadParams{Limit: 3}).Messages)); diff != "" {
		t.Errorf("read with Limit 3 (-want +got):\n%s", diff)
	}
	if diff := gocmp.Diff(messageIDs(all), messageIDs(read(s, vigil.MessagesReadParams{Limit: -1}).Messages)); diff != "" {
		t.Errorf("read with Limit -1 (-want +got):\n%s", diff)
	}
	if page := read(s, vigil.MessagesReadParams{Reader: "c"}); len(page.Messages) != len(all) {
		t.Errorf("read of reader c: %d messages, want %d (no other recipient's)", len(page.Messages), len(all))
	}
	// AllRecipients reads every recipient's messages in one seq order
	// (resuming the admin's event stream), after After, Limit at a time.
	every := slices.Concat(all[:5], []*vigil.Message{other}, all[5:])
	readAll := func(after int64, limit int) []string {
		t.Helper()
		page, err := s.MessagesRead(ctx, vigil.MessagesReadParams{AllRecipients: true, After: &after, Limit: limit})
		if err != nil {
			t.Fatalf("MessagesRead(AllRecipients, after %d) error = %v", after, err)
		}
		return messageIDs(page.Messages)
	}
	if diff := gocmp.Diff(messageIDs(every), readAll(0, 1000)); diff != "" {
		t.Errorf("read of every recipient (-want +got):\n%s", diff)
	}
	if diff := gocmp.Diff(messageIDs(every[4:7]), readAll(every[3].Seq, 3)); diff != "" {
		t.Errorf("read of every recipient after %d, limit 3 (-want +got):\n%s", every[3].Seq, diff)
	}
}

// testMessagesOfWatch: MessagesOfWatch returns the newest messages of one
// watch, oldest first, at most vigil.MaxWatchMessages: its changes, its
// outcome and a note after it, none of another watch's or of a note
// without a watch in the same mailbox.
func testMessagesOfWatch(t *testing.T, newStore NewStoreFunc) {
	s, reopen := newStore(t)
	ctx := t.Context()
	w := create(t, s, httpWatch("mw-1", "r", 1, base))
	w2 := create(t, s, httpWatch("mw-2", "r", 2, base))
	var want, want2 []string // the ids of each watch's messages, in seq order
	add := func(m *vigil.Message) {
		t.Helper()
		if _, err := s.MessageCreate(ctx, m); err != nil {
			t.Fatalf("MessageCreate(%s) error = %v", m.ID, err)
		}
	}
	n := vigil.MaxWatchMessages + 5
	for i := range n {
		at := base.Add(time.Duration(i) * time.Second)
		add(message(fmt.Sprintf("c%03d", i), "r", w.ID, vigil.MessageChanged, at))
		want = append(want, fmt.Sprintf("c%03d", i))
		add(message(fmt.Sprintf("d%03d", i), "r", w2.ID, vigil.MessageChanged, at))
		want2 = append(want2, fmt.Sprintf("d%03d", i))
		if i%10 == 0 {
			add(message(fmt.Sprintf("n%03d", i), "r", "", vigil.MessageNote, at))
		}
	}
	settleAll(t, s, settle(w, vigil.StateFired, "out", base.Add(time.Hour)))
	add(message("late", "r", w.ID, vigil.MessageNote, base.Add(2*time.Hour)))
	want = append(want, "out", "late")
	of := func(s vigil.Store, id string, limit int, wantIDs []string) {
		t.Helper()
		ms, err := s.MessagesOfWatch(ctx, id, limit)
		if err != nil {
			t.Fatalf("MessagesOfWatch(%q, %d) error = %v", id, limit, err)
		}
		if got := messageIDs(ms); !slices.Equal(got, wantIDs) {
			t.Errorf("MessagesOfWatch(%q, %d) = %v, want %v", id, limit, got, wantIDs)
		}
		for i, m := range ms {
			if m.WatchID != id || m.Recipient != "r" || (i > 0 && m.Seq <= ms[i-1].Seq) {
				t.Errorf("MessagesOfWatch(%q, %d)[%d] = %+v: not this watch's, or not in seq order", id, limit, i, m)
			}
		}
	}
	newest := func(ids []string, k int) []string { return ids[len(ids)-k:] }
	of(s, w.ID, 0, newest(want, vigil.MaxWatchMessages))
	of(s, w.ID, vigil.MaxWatchMessages+100, newest(want, vigil.MaxWatchMessages))
	of(s, w.ID, 1, []string{"late"})
	of(s, w.ID, 2, []string{"out", "late"})
	of(s, w.ID, 3, []string{fmt.Sprintf("c%03d", n-1), "out", "late"})
	of(s, w2.ID, 5, newest(want2, 5))
	of(s, w2.ID, 0, newest(want2, vigil.MaxWatchMessages))
	of(s, "no-such-watch", 0, nil)
	of(s, "", 0, nil)
	// The outcome message comes back as the mailbox has it.
	ms, err := s.MessagesOfWatch(ctx, w.ID, 2)
	if err != nil {
		t.Fatal(err)
	}
	if box := mailbox(t, s, "r"); len(ms) != 2 || len(box) < 2 || gocmp.Diff(box[len(box)-2:], ms, opts) != "" {
		t.Errorf("MessagesOfWatch(%q, 2) differs from the mailbox's last two (-mailbox +got):\n%s", w.ID, gocmp.Diff(box[max(len(box)-2, 0):], ms, opts))
	}
	s = reopen()
	of(s, w.ID, 0, newest(want, vigil.MaxWatchMessages))
}

func testMailboxReaders(t *testing.T, newStore NewStoreFunc) {
	s, _ := newStore(t)
	ctx := t.Context()
	var want []string
	var mu sync.Mutex
	var wg sync.WaitGroup
	// Writers and readers run at once: each reader must still see each
	// message exactly once.
	wg.Go(func() {
		for i := range 40 {
			id := fmt.Sprintf("m%02d", i)
			if _, err := s.MessageCreate(ctx, message(id, "r", "", vigil.MessageNote, base)); err != nil {
				t.Errorf("MessageCreate error = %v", err)
				return
			}
			mu.Lock()
			want = append(want, id)
			mu.Unlock()
		}
	})
	seen := map[string][]string{}
	drain := func(reader string) {
		for {
			page, err := s.MessagesRead(ctx, vigil.MessagesReadParams{Recipient: "r", Reader: reader, Limit: 3})
			if err != nil {
				t.Errorf("MessagesRead(%s) error = %v", reader, err)
				return
			}
			if len(page.Messages) == 0 {
				return
			}
			mu.Lock()
			seen[reader] = append(seen[reader], messageIDs(page.Messages)...)
			mu.Unlock()
			if err := s.MessagesAck(ctx, vigil.MessagesAckParams{Recipient: "r", Reader: reader, Seq: page.Messages[len(page.Messages)-1].Seq}); err != nil {
				t.Errorf("MessagesAck(%s) error = %v", reader, err)
				return
			}
		}
	}
	for _, reader := range []string{"a", "b"} {
		wg.Go(func() {
			for range 10 {
				drain(reader)
			}
		})
	}
	wg.Wait()
	for _, reader := range []string{"a", "b"} {
		drain(reader)
		if diff := gocmp.Diff(want, seen[reader]); diff != "" {
			t.Errorf("reader %s saw (-want +got):\n%s", reader, diff)
		}
	}
}

func testRecipientClose(t *testing.T, newStore NewStoreFunc) {
	s, _ := newStore(t)
	ctx := t.Context()
	for i := range 3 {
		create(t, s, httpWatch(fmt.Sprintf("a%d", i), "alice", i, base))
	}
	standing := newWatch("a-standing", "alice", vigil.KindTicket, `{"number":1,"provider":"github","repo":"acme/api"}`, base)
	standing.Standing, standing.Deadline = true, time.Time{}
	create(t, s, standing)
	done := create(t, s, httpWatch("a-done", "alice", 9, base))
	settleAll(t, s, settle(done, vigil.StateFired, "m-done", base))
	create(t, s, httpWatch("b0", "bob", 0, base))

	out := outcome(vigil.StateCancelled, "recipient_closed")
	got, err := s.RecipientClose(ctx, vigil.RecipientCloseParams{Recipient: "alice", Outcome: out, SettledAt: base.Add(time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	if diff := gocmp.Diff([]string{"a-standing", "a0", "a1", "a2"}, sorted(got)); diff != "" {
		t.Errorf("RecipientClose ids (-want +got):\n%s", diff)
	}
	for _, id := range got {
		w := get(t, s, id)
		if w.State != vigil.StateCancelled || !w.SettledAt.Equal(base.Add(time.Hour)) || gocmp.Diff(out, w.Outcome) != "" {
			t.Errorf("%s after close: state %s, settled %v, outcome %+v", id, w.State, w.SettledAt, w.Outcome)
		}
	}
	if diff := gocmp.Diff([]string{"m-done"}, messageIDs(mailbox(t, s, "alice"))); diff != "" {
		t.Errorf("closing must be silent; mailbox (-want +got):\n%s", diff)
	}
	if w := get(t, s, "b0"); w.State != vigil.StatePending {
		t.Errorf("bob's watch after closing alice: %s, want pending", w.State)
	}
	if got, err := s.RecipientClose(ctx, vigil.RecipientCloseParams{Recipient: "alice", SettledAt: base}); err != nil || len(got) != 0 {
		t.Errorf("second RecipientClose = %v, %v; want none", got, err)
	}
	if got, err := s.RecipientClose(ctx, vigil.RecipientCloseParams{Recipient: "nobody", SettledAt: base}); err != nil || len(got) != 0 {
		t.Errorf("RecipientClose of an unknown recipient = %v, %v; want none", got, err)
	}
}

// listModel is what the list test created, to compute expected pages.
type listModel struct {
	ws []*vigil.Watch
}

func (m listModel) want(keep func(*vigil.Watch) bool) []string {
	var out []*vigil.Watch
	for _, w := range m.ws {
		if keep(w) {
			out = append(out, w)
		}
	}
	slices.SortFunc(out, func(a, b *vigil.Watch) int {
		if c := b.CreatedAt.Compare(a.CreatedAt); c != 0 {
			return c
		}
		return cmp.Compare(b.ID, a.ID)
	})
	return watchIDs(out)
}

func testList(t *testing.T, newStore NewStoreFunc) {
	s, _ := newStore(t)
	ctx := t.Context()
	var m listModel
	recipients := []string{"r1", "r2", "r3"}
	for i := range 30 {
		// Triples share a creation time, so ties are broken by id; ids are
		// not in creation order.
		at := base.Add(time.Duration(i/3) * time.Second)
		id := fmt.Sprintf("w%02d", (i*7)%30)
		w := httpWatch(id, recipients[i%3], i, at)
		if i%4 == 0 {
			w = newWatch(id, recipients[i%3], vigil.KindTCP, fmt.Sprintf(`{"address":"db:%d"}`, i), at)
		}
		w.Labels = map[string]string{"team": []string{"a", "b"}[i%2]}
		if i%5 == 0 {
			w.Labels["env"] = "prod"
		}
		if i%6 == 0 {
			w.Labels["odd key.\"with\" [chars]"] = "yes"
		}
		w = create(t, s, w)
		if i%3 == 1 {
			settleAll(t, s, settle(w, vigil.StateFired, "m-"+id, at.Add(time.Minute)))
			w = get(t, s, id)
		}
		m.ws = append(m.ws, w)
	}
	has := func(w *vigil.Watch, k, v string) bool { x, ok := w.Labels[k]; return ok && x == v }
	for _, tc := range []struct {
		name string
		p    vigil.WatchListParams
		keep func(*vigil.Watch) bool
	}{
		{"all", vigil.WatchListParams{}, func(*vigil.Watch) bool { return true }},
		{"recipient", vigil.WatchListParams{Recipient: "r2"}, func(w *vigil.Watch) bool { return w.Recipient == "r2" }},
		{"recipients", vigil.WatchListParams{Recipients: []string{"r1", "r3"}}, func(w *vigil.Watch) bool { return w.Recipient != "r2" }},
		{"recipient within recipients", vigil.WatchListParams{Recipient: "r1", Recipients: []string{"r2", "r3"}}, func(*vigil.Watch) bool { return false }},
		{"state", vigil.WatchListParams{State: vigil.StateFired}, func(w *vigil.Watch) bool { return w.State == vigil.StateFired }},
		{"pending", vigil.WatchListParams{State: vigil.StatePending}, func(w *vigil.Watch) bool { return w.State == vigil.StatePending }},
		{"kind", vigil.WatchListParams{Kind: vigil.KindTCP}, func(w *vigil.Watch) bool { return w.Kind == vigil.KindTCP }},
		{"label", vigil.WatchListParams{Labels: map[string]string{"team": "a"}}, func(w *vigil.Watch) bool { return has(w, "team", "a") }},
		{"labels all match", vigil.WatchListParams{Labels: map[string]string{"team": "a", "env": "prod"}}, func(w *vigil.Watch) bool {
			return has(w, "team", "a") && has(w, "env", "prod")
		}},
		{"odd label key", vigil.WatchListParams{Labels: map[string]string{"odd key.\"with\" [chars]": "yes"}}, func(w *vigil.Watch) bool {
			return has(w, "odd key.\"with\" [chars]", "yes")
		}},
		{"no such label", vigil.WatchListParams{Labels: map[string]string{"team": "c"}}, func(*vigil.Watch) bool { return false }},
		{"combined", vigil.WatchListParams{Recipients: []string{"r1", "r2"}, State: vigil.StatePending, Kind: vigil.KindHTTP, Labels: map[string]string{"team": "b"}},
			func(w *vigil.Watch) bool {
				return w.Recipient != "r3" && w.State == vigil.StatePending && w.Kind == vigil.KindHTTP && has(w, "team", "b")
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			want := m.want(tc.keep)
			for _, limit := range []int{1, 4, 7, 1000} {
				p := tc.p
				p.Limit = limit
				var got []string
				for pages := 0; ; pages++ {
					if pages > len(want)+1 {
						t.Fatalf("limit %d: pagination does not end", limit)
					}
					page, err := s.WatchList(ctx, p)
					if err != nil {
						t.Fatalf("WatchList(%+v) error = %v", p, err)
					}
					if len(page.Watches) > limit {
						t.Fatalf("limit %d: page of %d", limit, len(page.Watches))
					}
					got = append(got, watchIDs(page.Watches)...)
					if page.Next == "" {
						break
					}
					p.After = page.Next
				}
				if diff := gocmp.Diff(want, got, opts); diff != "" {
					t.Errorf("limit %d (-want +got):\n%s", limit, diff)
				}
			}
		})
	}
	// Pages hold whole watches.
	page, err := s.WatchList(ctx, vigil.WatchListParams{Limit: 1})
	if err != nil || len(page.Watches) != 1 {
		t.Fatalf("WatchList(limit 1) = %v, %v", page, err)
	}
	if diff := gocmp.Diff(get(t, s, page.Watches[0].ID), page.Watches[0], opts); diff != "" {
		t.Errorf("listed watch differs from WatchGet (-get +list):\n%s", diff)
	}
	// A cursor the store did not make is refused.
	_, err = s.WatchList(ctx, vigil.WatchListParams{After: "not a cursor!"})
	wantCode(t, "WatchList with a bad cursor", err, vigil.CodeInvalidRequest)
	// So is a tampered one, whatever its bytes: a cursor whose id is not
	// UTF-8 or holds a NUL was answered internal by PostgreSQL, which
	// refuses such a text.
	for _, c := range []string{"12:\xff", "12:a\x00b", "12:", "x:y", "\xff\xfe"} {
		_, err = s.WatchList(ctx, vigil.WatchListParams{After: base64.RawURLEncoding.EncodeToString([]byte(c))})
		wantCode(t, fmt.Sprintf("WatchList with the cursor of %q", c), err, vigil.CodeInvalidRequest)
	}
}

func testListDefaultLimit(t *testing.T, newStore NewStoreFunc) {
	s, _ := newStore(t)
	var wg sync.WaitGroup
	for i := range 105 {
		wg.Go(func() {
			if _, err := s.WatchCreate(t.Context(), vigil.WatchCreateParams{Watch: httpWatch(fmt.Sprintf("w%03d", i), "r", i, base)}); err != nil {
				t.Errorf("WatchCreate error = %v", err)
			}
		})
	}
	wg.Wait()
	page, err := s.WatchList(t.Context(), vigil.WatchListParams{})
	if err != nil || len(page.Watches) != 100 || page.Next == "" {
		t.Fatalf("WatchList with no limit = %d watches, next %q, %v; want 100 and a next page", len(page.Watches), page.Next, err)
	}
	page, err = s.WatchList(t.Context(), vigil.WatchListParams{After: page.Next})
	if err != nil || len(page.Watches) != 5 || page.Next != "" {
		t.Errorf("second page = %d watches, next %q, %v; want 5 and no next page", len(page.Watches), page.Next, err)
	}
}

func testListPending(t *testing.T, newStore NewStoreFunc) {
	s, reopen := newStore(t)
	if got, err := s.WatchListPending(t.Context()); err != nil || len(got) != 0 {
		t.Fatalf("WatchListPending of an empty store = %v, %v", got, err)
	}
	w1 := httpWatch("w1", "r", 1, base)
	w1.StartAt = base.Add(time.Minute)
	w1.Polls = 4
	create(t, s, w1)
	w2 := create(t, s, httpWatch("w2", "r", 2, base))
	// A kind no build knows, written by some newer build.
	holo := newWatch("w3", "r", "hologram", `{"shape":"cube"}`, base.Add(time.Second))
	holo.Every = 42 * time.Second
	holo = create(t, s, holo)
	ticket := newWatch("w4", "r", vigil.KindTicket, `{"number":7,"provider":"github","repo":"acme/api"}`, base.Add(2*time.Second))
	ticket.Standing, ticket.Deadline, ticket.Every = true, time.Time{}, time.Minute
	create(t, s, ticket)
	w5 := create(t, s, httpWatch("w5", "r", 5, base))
	settleAll(t, s, settle(w2, vigil.StateFired, "m2", base.Add(time.Minute)))

	want := []vigil.ScheduleEntry{
		{ID: "w1", Kind: vigil.KindHTTP, Every: 10 * time.Second, Deadline: base.Add(30 * time.Minute), StartAt: base.Add(time.Minute), CreatedAt: base, Polls: 4},
		{ID: "w3", Kind: "hologram", Every: 42 * time.Second, Deadline: base.Add(time.Second + 30*time.Minute), CreatedAt: base.Add(time.Second)},
		{ID: "w4", Kind: vigil.KindTicket, Every: time.Minute, CreatedAt: base.Add(2 * time.Second), Standing: true},
		{ID: "w5", Kind: vigil.KindHTTP, Every: 10 * time.Second, Deadline: base.Add(30 * time.Minute), CreatedAt: base},
	}
	check := func(s vigil.Store, want []vigil.ScheduleEntry, when string) {
		t.Helper()
		got, err := s.WatchListPending(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		slices.SortFunc(got, func(a, b vigil.ScheduleEntry) int { return cmp.Compare(a.ID, b.ID) })
		if diff := gocmp.Diff(want, got); diff != "" {
			t.Errorf("WatchListPending %s (-want +got):\n%s", when, diff)
		}
	}
	check(s, want, "")
	// The unknown kind never blocks settling the others, and is left as it is.
	won := settleAll(t, s, settle(w5, vigil.StateExpired, "m5", base.Add(time.Hour)), settle(&vigil.Watch{ID: "w1", Recipient: "r"}, vigil.StateFired, "m1", base.Add(time.Hour)))
	if !won[0] || !won[1] {
		t.Errorf("settling beside a hologram watch = %v, want both won", won)
	}
	s = reopen()
	check(s, []vigil.ScheduleEntry{want[1], want[2]}, "after settling the others")
	if diff := gocmp.Diff(holo, get(t, s, "w3"), opts); diff != "" {
		t.Errorf("the hologram watch changed (-want +got):\n%s", diff)
	}
}

func testDelete(t *testing.T, newStore NewStoreFunc) {
	s, _ := newStore(t)
	ctx := t.Context()
	w := create(t, s, httpWatch("w1", "r", 1, base))
	err := s.WatchDelete(ctx, "w1")
	wantCode(t, "WatchDelete of a pending watch", err, vigil.CodeConflict)
	if got := get(t, s, "w1"); got.State != vigil.StatePending {
		t.Errorf("state after a refused delete = %s", got.State)
	}
	wantCode(t, "WatchDelete(missing)", s.WatchDelete(ctx, "missing"), vigil.CodeNotFound)
	settleAll(t, s, settle(w, vigil.StateFired, "m1", base))
	if err := s.WatchDelete(ctx, "w1"); err != nil {
		t.Fatalf("WatchDelete of a settled watch error = %v", err)
	}
	if _, err := s.WatchGet(ctx, "w1"); !errorsIs(err, vigil.ErrNotFound) {
		t.Errorf("WatchGet after delete error = %v, want not_found", err)
	}
	if diff := gocmp.Diff([]string{"m1"}, messageIDs(mailbox(t, s, "r"))); diff != "" {
		t.Errorf("messages must outlive their watch (-want +got):\n%s", diff)
	}
	wantCode(t, "second WatchDelete", s.WatchDelete(ctx, "w1"), vigil.CodeNotFound)
}

// testDeleteForgetsKeys: a deleted watch's idempotency entries go with it,
// as a pruned watch's do: its key may serve a new request, whatever its
// hash, through WatchCreate and WatchCreateMany alike; so may a key whose
// request matched it while it was pending (Existing); and a watch made
// later under the same id inherits none of them.
func testDeleteForgetsKeys(t *testing.T, newStore NewStoreFunc) {
	s, _ := newStore(t)
	ctx := t.Context()
	keyed := func(w *vigil.Watch, key, hash string) vigil.WatchCreateParams {
		return vigil.WatchCreateParams{Watch: w, IdempotencyKey: key, RequestHash: hash, IdempotencySince: base.Add(-time.Hour)}
	}
	isNew := func(what string, got *vigil.Watch, err error, id string) {
		t.Helper()
		if err != nil || got.ID != id || got.Replayed || got.Existing {
			t.Errorf("%s = %+v, %v; want a new watch %s", what, got, err, id)
		}
	}
	w1, err := s.WatchCreate(ctx, keyed(httpWatch("w1", "r", 1, base), "k1", "h1"))
	isNew("WatchCreate under k1", w1, err, "w1")
	if got, err := s.WatchCreate(ctx, keyed(httpWatch("w1-dup", "r", 1, base), "k2", "h2")); err != nil || got.ID != "w1" || !got.Existing {
		t.Fatalf("WatchCreate of w1's condition under k2 = %+v, %v; want w1, existing", got, err)
	}
	settleAll(t, s, settle(w1, vigil.StateFired, "m1", base.Add(time.Second)))
	if err := s.WatchDelete(ctx, "w1"); err != nil {
		t.Fatal(err)
	}
	got, err := s.WatchCreate(ctx, keyed(httpWatch("w2", "r", 2, base.Add(time.Minute)), "k1", "h-other"))
	isNew("WatchCreate under the deleted watch's key, another request", got, err, "w2")
	res, err := s.WatchCreateMany(ctx, []vigil.WatchCreateParams{keyed(httpWatch("w3", "r", 3, base.Add(time.Minute)), "k2", "h-other")})
	if err != nil {
		t.Fatal(err)
	}
	isNew("WatchCreateMany under the key that matched the deleted watch, another request", res[0].Watch, res[0].Err, "w3")
	// The keys now answer for their new watches.
	got, err = s.WatchCreate(ctx, keyed(httpWatch("w2-retry", "r", 2, base.Add(time.Minute)), "k1", "h-other"))
	if err != nil || got.ID != "w2" || !got.Replayed {
		t.Errorf("retry under k1 = %+v, %v; want w2 replayed", got, err)
	}
	// A new watch that takes the deleted one's id is not what its keys
	// got: a key used only by the deleted watch makes a new watch.
	w4, err := s.WatchCreate(ctx, keyed(httpWatch("w4", "r", 4, base), "k4", "h4"))
	isNew("WatchCreate under k4", w4, err, "w4")
	settleAll(t, s, settle(w4, vigil.StateFired, "m4", base.Add(time.Second)))
	if err := s.WatchDelete(ctx, "w4"); err != nil {
		t.Fatal(err)
	}
	create(t, s, httpWatch("w4", "r", 40, base.Add(time.Minute)))
	got, err = s.WatchCreate(ctx, keyed(httpWatch("w5", "r", 4, base.Add(time.Minute)), "k4", "h4"))
	isNew("WatchCreate under the deleted w4's key, with w4's id taken again", got, err, "w5")
}

func testPrune(t *testing.T, newStore NewStoreFunc) {
	s, _ := newStore(t)
	ctx := t.Context()
	h := time.Hour
	keyed := func(w *vigil.Watch, key string) {
		t.Helper()
		if _, err := s.WatchCreate(ctx, vigil.WatchCreateParams{Watch: w, IdempotencyKey: key, RequestHash: "hash-" + key}); err != nil {
			t.Fatal(err)
		}
	}
	// Settled at 1h, 2h, 3h, each with its outcome message.
	for i := 1; i <= 3; i++ {
		w := create(t, s, httpWatch(fmt.Sprintf("s%d", i), "r", i, base))
		settleAll(t, s, settle(w, vigil.StateFired, fmt.Sprintf("m%d", i), base.Add(time.Duration(i)*h)))
	}
	// Pending watches are never pruned, however old; their keys expire.
	old := httpWatch("p-old", "r", 10, base.Add(-100*h))
	keyed(old, "k-old")
	keyed(httpWatch("p-new", "r", 11, base.Add(2*h)), "k-new")
	// A settled watch pruned with its key, which had not expired yet.
	ks := httpWatch("ks", "r", 12, base.Add(100*time.Minute))
	keyed(ks, "k-ks")
	settleAll(t, s, vigil.WatchSettleParams{ID: "ks", State: vigil.StateFired, SettledAt: base.Add(110 * time.Minute)})

	got, err := s.Prune(ctx, vigil.PruneParams{WatchesBefore: base.Add(150 * time.Minute), MessagesBefore: base.Add(90 * time.Minute)})
	if err != nil {
		t.Fatal(err)
	}
	want := vigil.PruneResult{Watches: 3, Messages: 1, OldestSettled: base.Add(3 * h), OldestMessage: base.Add(2 * h), OldestKey: base.Add(-100 * h)}
	if diff := gocmp.Diff(want, got); diff != "" {
		t.Errorf("Prune (-want +got):\n%s", diff)
	}
	for _, id := range []string{"s1", "s2", "ks"} {
		if _, err := s.WatchGet(ctx, id); !errorsIs(err, vigil.ErrNotFound) {
			t.Errorf("WatchGet(%s) after prune error = %v, want not_found", id, err)
		}
	}
	get(t, s, "s3")
	get(t, s, "p-old")
	// The pruned watch's key went with it: the same request makes a new watch.
	again := httpWatch("ks-again", "r", 12, base.Add(3*h))
	if w, err := s.WatchCreate(ctx, vigil.WatchCreateParams{Watch: again, IdempotencyKey: "k-ks", RequestHash: "hash-k-ks"}); err != nil || w.ID != "ks-again" || w.Replayed {
		t.Errorf("WatchCreate with the pruned watch's key = %+v, %v; want a new watch", w, err)
	}

	got, err = s.Prune(ctx, vigil.PruneParams{IdempotencyBefore: base})
	if err != nil {
		t.Fatal(err)
	}
	want = vigil.PruneResult{Keys: 1, OldestSettled: base.Add(3 * h), OldestMessage: base.Add(2 * h), OldestKey: base.Add(2 * h)}
	if diff := gocmp.Diff(want, got); diff != "" {
		t.Errorf("Prune of keys (-want +got):\n%s", diff)
	}
	get(t, s, "p-old")

	far := base.Add(1000 * h)
	got, err = s.Prune(ctx, vigil.PruneParams{WatchesBefore: far, MessagesBefore: far, IdempotencyBefore: far})
	if err != nil {
		t.Fatal(err)
	}
	want = vigil.PruneResult{Watches: 1, Messages: 2, Keys: 2}
	if diff := gocmp.Diff(want, got); diff != "" {
		t.Errorf("Prune of everything (-want +got):\n%s", diff)
	}
	pending, err := s.WatchListPending(ctx)
	if err != nil || len(pending) != 3 {
		t.Errorf("pending after pruning everything = %d, %v; want 3", len(pending), err)
	}
}

// testCutoffsInWholeMilliseconds: a store keeps times in whole
// milliseconds and compares a cut-off as it keeps a time: one within the
// millisecond a row was written is that millisecond. A key written in it
// is replayed since then, a watch settled in it is found by
// ReceiptsResume since then, and Prune keeps the watch settled, the
// message and the key written in it; a cut-off at the next millisecond
// decides the other way.
func testCutoffsInWholeMilliseconds(t *testing.T, newStore NewStoreFunc) {
	s, _ := newStore(t)
	ctx := t.Context()
	at := base.Add(300 * time.Microsecond) // written in base's millisecond
	within, next := base.Add(500*time.Microsecond), base.Add(time.Millisecond)
	keyed := func(w *vigil.Watch, since time.Time) *vigil.Watch {
		t.Helper()
		got, err := s.WatchCreate(ctx, vigil.WatchCreateParams{Watch: w, IdempotencyKey: "k", RequestHash: "h", IdempotencySince: since})
		if err != nil {
			t.Fatalf("WatchCreate(%s) error = %v", w.ID, err)
		}
		return got
	}
	keyed(httpWatch("p1", "r", 1, at), time.Time{})
	if got := keyed(httpWatch("p1-retry", "r", 1, at), within); got.ID != "p1" || !got.Replayed {
		t.Errorf("key written at %v, since %v: got %s, replayed %v; want p1 replayed", at, within, got.ID, got.Replayed)
	}
	if got := keyed(httpWatch("p2", "r", 2, at), next); got.ID != "p2" || got.Replayed {
		t.Errorf("key written at %v, since %v: got %s, replayed %v; want a new watch p2", at, next, got.ID, got.Replayed)
	}
	w := httpWatch("s1", "r", 3, base)
	w.Deliver = json.RawMessage(`{"webhook":{"url":"https://hooks.example/x"}}`)
	settleAll(t, s, settle(create(t, s, w), vigil.StateFired, "m1", at))
	for _, c := range []struct {
		since time.Time
		want  []vigil.Undispatched
	}{{within, []vigil.Undispatched{{WatchID: "s1", MessageID: "m1"}}}, {next, nil}} {
		res, err := s.ReceiptsResume(ctx, vigil.ReceiptsResumeParams{Now: base.Add(time.Hour), SettledSince: c.since, Channels: channels})
		if err != nil {
			t.Fatal(err)
		}
		if diff := gocmp.Diff(c.want, res.Undispatched, opts); diff != "" {
			t.Errorf("ReceiptsResume settled since %v, s1 settled at %v: Undispatched (-want +got):\n%s", c.since, at, diff)
		}
	}
	for _, c := range []struct {
		cut  time.Time
		want vigil.PruneResult
	}{
		{within, vigil.PruneResult{OldestSettled: base, OldestMessage: base, OldestKey: base}},
		{next, vigil.PruneResult{Watches: 1, Messages: 1, Keys: 1}},
	} {
		got, err := s.Prune(ctx, vigil.PruneParams{WatchesBefore: c.cut, MessagesBefore: c.cut, IdempotencyBefore: c.cut})
		if err != nil {
			t.Fatal(err)
		}
		if diff := gocmp.Diff(c.want, got); diff != "" {
			t.Errorf("Prune before %v, rows written at %v (-want +got):\n%s", c.cut, at, diff)
		}
	}
}

func testClose(t *testing.T, newStore NewStoreFunc) {
	s, _ := newStore(t)
	create(t, s, httpWatch("w1", "r", 1, base))
	if err := s.Close(); err != nil {
		t.Fatalf("Close error = %v", err)
	}
	if _, err := s.WatchCreate(t.Context(), vigil.WatchCreateParams{Watch: httpWatch("w2", "r", 2, base)}); err == nil {
		t.Errorf("WatchCreate after Close: no error")
	}
}

// testSettleRollsBack: a settlement whose outcome message cannot be
// written (the watch already has one, which the mailbox refuses to
// repeat) fails whole: an error, every watch of the batch still pending
// (those before it too), no message written, and the caps still counting
// them, before and after a reopen.
func testSettleRollsBack(t *testing.T, newStore NewStoreFunc) {
	s, reopen := newStore(t)
	ctx := t.Context()
	caps := func(w *vigil.Watch) vigil.WatchCreateParams {
		return vigil.WatchCreateParams{Watch: w, MaxActive: 3, MaxActivePerRecipient: 2}
	}
	var ws []*vigil.Watch
	for i, r := range []string{"a", "a", "b"} {
		w, err := s.WatchCreate(ctx, caps(httpWatch(fmt.Sprintf("w%d", i+1), r, i+1, base)))
		if err != nil {
			t.Fatal(err)
		}
		ws = append(ws, w)
	}
	if _, err := s.MessageCreate(ctx, message("stray", "a", "w2", vigil.MessageFired, base)); err != nil {
		t.Fatalf("MessageCreate of an outcome message for a pending watch error = %v", err)
	}
	at := base.Add(time.Minute)
	_, err := s.WatchSettle(ctx, []vigil.WatchSettleParams{
		settle(ws[0], vigil.StateFired, "m1", at), settle(ws[2], vigil.StateFailed, "m3", at), settle(ws[1], vigil.StateFired, "m2", at),
	})
	wantCode(t, "WatchSettle with an outcome message that cannot be written", err, vigil.CodeConflict)
	check := func(s vigil.Store, when string) {
		t.Helper()
		for _, w := range ws {
			if got := get(t, s, w.ID); got.State != vigil.StatePending || !got.SettledAt.IsZero() || got.Outcome != nil {
				t.Errorf("%s: %s = %s (settled at %v, outcome %+v), want pending as before", when, w.ID, got.State, got.SettledAt, got.Outcome)
			}
		}
		var msgs []string
		for _, r := range []string{"a", "b"} {
			msgs = append(msgs, messageIDs(mailbox(t, s, r))...)
		}
		if diff := gocmp.Diff([]string{"stray"}, msgs); diff != "" {
			t.Errorf("%s: mailbox (-want +got):\n%s", when, diff)
		}
		_, err := s.WatchCreate(ctx, caps(httpWatch("a3", "a", 10, base)))
		wantCode(t, when+": WatchCreate past the per-recipient cap", err, vigil.CodeQuotaExceeded)
		_, err = s.WatchCreate(ctx, caps(httpWatch("c1", "c", 11, base)))
		wantCode(t, when+": WatchCreate past the global cap", err, vigil.CodeQuotaExceeded)
	}
	check(s, "after the failed settle")
	check(reopen(), "after reopen")
}

// testCancelRollsBack: as testSettleRollsBack for a cancel: one whose
// message cannot be written (the watch already has an outcome message)
// fails whole, conflict, and leaves the watch pending, counted by the
// caps, with no message written; a silent cancel then cancels it.
func testCancelRollsBack(t *testing.T, newStore NewStoreFunc) {
	s, _ := newStore(t)
	ctx := t.Context()
	caps := vigil.WatchCreateParams{Watch: httpWatch("w1", "r", 1, base), MaxActivePerRecipient: 1}
	if _, err := s.WatchCreate(ctx, caps); err != nil {
		t.Fatal(err)
	}
	if _, err := s.MessageCreate(ctx, message("stray", "r", "w1", vigil.MessageFired, base)); err != nil {
		t.Fatalf("MessageCreate of an outcome message for a pending watch error = %v", err)
	}
	at := base.Add(time.Minute)
	_, _, err := s.WatchCancel(ctx, vigil.WatchCancelParams{ID: "w1", Outcome: outcome(vigil.StateCancelled, "cancelled"), SettledAt: at,
		Message: message("m1", "r", "w1", vigil.MessageCancelled, at)})
	wantCode(t, "WatchCancel with a message that cannot be written", err, vigil.CodeConflict)
	if got := get(t, s, "w1"); got.State != vigil.StatePending || !got.SettledAt.IsZero() || got.Outcome != nil {
		t.Errorf("w1 = %s (settled at %v, outcome %+v), want pending as before", got.State, got.SettledAt, got.Outcome)
	}
	if diff := gocmp.Diff([]string{"stray"}, messageIDs(mailbox(t, s, "r"))); diff != "" {
		t.Errorf("mailbox (-want +got):\n%s", diff)
	}
	caps.Watch = httpWatch("w2", "r", 2, base)
	_, err = s.WatchCreate(ctx, caps)
	wantCode(t, "WatchCreate past the per-recipient cap", err, vigil.CodeQuotaExceeded)
	if _, won, err := s.WatchCancel(ctx, vigil.WatchCancelParams{ID: "w1", SettledAt: at}); err != nil || !won {
		t.Errorf("silent WatchCancel after the failed one = %v, %v; want won", won, err)
	}
}

// testCapsFreedByOneBatch: one settle call with several watches of one
// recipient frees a slot for each, for every recipient in it (the
// scheduler settles timers in batches of hundreds), and the counts
// survive a reopen.
func testCapsFreedByOneBatch(t *testing.T, newStore NewStoreFunc) {
	s, reopen := newStore(t)
	ctx := t.Context()
	caps := func(w *vigil.Watch) vigil.WatchCreateParams {
		return vigil.WatchCreateParams{Watch: w, MaxActive: 4, MaxActivePerRecipient: 2}
	}
	mustCreate := func(s vigil.Store, w *vigil.Watch) *vigil.Watch {
		t.Helper()
		got, err := s.WatchCreate(ctx, caps(w))
		if err != nil {
			t.Fatalf("WatchCreate(%s) error = %v", w.ID, err)
		}
		return got
	}
	refused := func(s vigil.Store, w *vigil.Watch) {
		t.Helper()
		_, err := s.WatchCreate(ctx, caps(w))
		wantCode(t, "WatchCreate("+w.ID+")", err, vigil.CodeQuotaExceeded)
	}
	a1, a2 := mustCreate(s, httpWatch("a1", "a", 1, base)), mustCreate(s, httpWatch("a2", "a", 2, base))
	b1, b2 := mustCreate(s, httpWatch("b1", "b", 3, base)), mustCreate(s, httpWatch("b2", "b", 4, base))
	refused(s, httpWatch("a3", "a", 5, base))
	refused(s, httpWatch("c1", "c", 6, base))
	at := base.Add(time.Minute)
	for i, won := range settleAll(t, s, settle(a1, vigil.StateFired, "m-a1", at), settle(b1, vigil.StateFired, "m-b1", at),
		settle(a2, vigil.StateExpired, "m-a2", at), settle(b2, vigil.StateFailed, "m-b2", at)) {
		if !won {
			t.Fatalf("settlement %d of the batch lost", i)
		}
	}
	s = reopen()
	for i, w := range []*vigil.Watch{httpWatch("a3", "a", 5, base), httpWatch("a4", "a", 7, base), httpWatch("b3", "b", 8, base), httpWatch("b4", "b", 9, base)} {
		if _, err := s.WatchCreate(ctx, caps(w)); err != nil {
			t.Fatalf("registration %d (%s) after one batch settled every watch: %v, want it made", i+1, w.ID, err)
		}
	}
	refused(s, httpWatch("a5", "a", 10, base))
	refused(s, httpWatch("c1", "c", 6, base))
}
