package storetest

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	gocmp "github.com/google/go-cmp/cmp"

	"github.com/vigil-run/vigil"
)

// channels are the push channels a Deliver may name.
var channels = []string{"webhook", "command", "email"}

func upsert(t *testing.T, s vigil.Store, r vigil.ReceiptRecord) {
	t.Helper()
	if err := s.ReceiptUpsert(t.Context(), vigil.ReceiptUpsertParams{ReceiptRecord: r}); err != nil {
		t.Fatalf("ReceiptUpsert(%s/%s %s) error = %v", r.WatchID, r.Channel, r.Status, err)
	}
}

// testReceiptClaim: a claimed write (the start of an attempt) is made only
// over the receipt the attempt follows: none for a first attempt, one
// retrying or unknown with as many attempts as it follows; over anything
// else (another attempt sending, a delivery done) it writes nothing and
// says conflict. An attempt's end (Ends) is written over that attempt's
// receipt only.
func testReceiptClaim(t *testing.T, newStore NewStoreFunc) {
	s, _ := newStore(t)
	w := create(t, s, httpWatch("w1", "r", 1, base))
	settleAll(t, s, settle(w, vigil.StateFired, "m1", base))
	at := base.Add(time.Second)
	rec := func(channel, status string, attempts int) vigil.ReceiptRecord {
		return vigil.ReceiptRecord{WatchID: "w1", MessageID: "m1", Receipt: vigil.Receipt{Channel: channel, Status: status, Attempts: attempts, UpdatedAt: at}}
	}
	claim := func(r vigil.ReceiptRecord, prior int) error {
		return s.ReceiptUpsert(t.Context(), vigil.ReceiptUpsertParams{ReceiptRecord: r, Claim: true, Prior: prior})
	}
	stored := func(channel string) vigil.Receipt {
		t.Helper()
		for _, r := range get(t, s, "w1").Receipts {
			if r.Channel == channel {
				return r
			}
		}
		return vigil.Receipt{}
	}
	for _, c := range []struct {
		what    string
		r       vigil.ReceiptRecord
		prior   int
		ok      bool
		after   string // the webhook receipt's status after it
		attempt int
	}{
		{"a first attempt that follows an attempt", rec("webhook", vigil.ReceiptSending, 2), 1, false, "", 0},
		{"a first attempt", rec("webhook", vigil.ReceiptSending, 1), 0, true, vigil.ReceiptSending, 1},
		{"a second first attempt, the first on its way", rec("webhook", vigil.ReceiptSending, 1), 0, false, vigil.ReceiptSending, 1},
	} {
		err := claim(c.r, c.prior)
		if c.ok && err != nil || !c.ok && vigil.ErrorCode(err) != vigil.CodeConflict {
			t.Fatalf("%s: ReceiptUpsert error = %v, want ok %v (or conflict)", c.what, err, c.ok)
		}
		if got := stored("webhook"); got.Status != c.after || got.Attempts != c.attempt {
			t.Fatalf("after %s the receipt is %+v, want %s after %d attempts", c.what, got, c.after, c.attempt)
		}
	}
	// The attempt fails; the next one follows it, once.
	upsert(t, s, rec("webhook", vigil.ReceiptRetrying, 1))
	if err := claim(rec("webhook", vigil.ReceiptSending, 2), 0); vigil.ErrorCode(err) != vigil.CodeConflict {
		t.Fatalf("a first attempt over a retrying receipt: error = %v, want conflict", err)
	}
	if err := claim(rec("webhook", vigil.ReceiptSending, 2), 1); err != nil {
		t.Fatalf("the second attempt: %v", err)
	}
	if err := claim(rec("webhook", vigil.ReceiptSending, 2), 1); vigil.ErrorCode(err) != vigil.CodeConflict {
		t.Fatalf("the second attempt again: error = %v, want conflict", err)
	}
	// It lands: nothing starts again, whatever it follows.
	upsert(t, s, rec("webhook", vigil.ReceiptDelivered, 2))
	for prior := range 4 {
		if err := claim(rec("webhook", vigil.ReceiptUndeliverable, prior), prior); vigil.ErrorCode(err) != vigil.CodeConflict {
			t.Fatalf("an attempt after %d over a delivered receipt: error = %v, want conflict", prior, err)
		}
	}
	if got := stored("webhook"); got.Status != vigil.ReceiptDelivered || got.Attempts != 2 {
		t.Fatalf("the delivered receipt became %+v", got)
	}
	// An unknown receipt (a crash mid-send) is claimed by the attempt that
	// follows it, as retry_unknown asks.
	upsert(t, s, rec("command", vigil.ReceiptUnknown, 3))
	if err := claim(rec("command", vigil.ReceiptSending, 4), 3); err != nil {
		t.Fatalf("an attempt after an unknown receipt: %v", err)
	}
	if vigil.ReceiptClaimable(true, vigil.ReceiptSending, 4, 4) {
		t.Fatalf("ReceiptClaimable holds a sending receipt claimable")
	}
	err := s.ReceiptUpsert(t.Context(), vigil.ReceiptUpsertParams{ReceiptRecord: vigil.ReceiptRecord{WatchID: "missing", MessageID: "m",
		Receipt: vigil.Receipt{Channel: "webhook", Status: vigil.ReceiptSending, Attempts: 1, UpdatedAt: at}}, Claim: true})
	wantCode(t, "ReceiptUpsert(missing watch, claimed)", err, vigil.CodeNotFound)

	// An attempt's end is written over its own receipt only: sending, or
	// unknown (resumed while it ran), with as many attempts, or already
	// what it writes; never over the attempt that followed it, nor over a
	// channel with no receipt.
	end := func(r vigil.ReceiptRecord) error {
		return s.ReceiptUpsert(t.Context(), vigil.ReceiptUpsertParams{ReceiptRecord: r, Ends: true})
	}
	if err := end(rec("email", vigil.ReceiptDelivered, 1)); vigil.ErrorCode(err) != vigil.CodeConflict {
		t.Fatalf("an end with no receipt: error = %v, want conflict", err)
	}
	if err := end(rec("command", vigil.ReceiptRetrying, 3)); vigil.ErrorCode(err) != vigil.CodeConflict {
		t.Fatalf("an end over the next attempt's sending: error = %v, want conflict", err)
	}
	if err := end(rec("command", vigil.ReceiptUnknown, 4)); err != nil {
		t.Fatalf("the attempt's own end: %v", err)
	}
	if err := end(rec("command", vigil.ReceiptDelivered, 4)); err != nil {
		t.Fatalf("an end over its own attempt resumed as unknown: %v", err)
	}
	if err := end(rec("command", vigil.ReceiptDelivered, 4)); err != nil {
		t.Fatalf("the same end again: %v", err)
	}
	if err := end(rec("command", vigil.ReceiptUndeliverable, 4)); vigil.ErrorCode(err) != vigil.CodeConflict {
		t.Fatalf("another end over a delivered receipt: error = %v, want conflict", err)
	}
	if got := stored("command"); got.Status != vigil.ReceiptDelivered || got.Attempts != 4 {
		t.Fatalf("the command receipt became %+v, want delivered after 4 attempts", got)
	}
}

// testReceipts: a receipt is written per (watch, channel), replaced by the
// next write, and comes back with the watch from get, get-many and list.
func testReceipts(t *testing.T, newStore NewStoreFunc) {
	s, _ := newStore(t)
	w := create(t, s, httpWatch("w1", "r", 1, base))
	settleAll(t, s, settle(w, vigil.StateFired, "m1", base))
	at := base.Add(time.Second)
	upsert(t, s, vigil.ReceiptRecord{WatchID: "w1", MessageID: "m1", Receipt: vigil.Receipt{Channel: "webhook", Status: vigil.ReceiptSending, Attempts: 1, UpdatedAt: at}})
	upsert(t, s, vigil.ReceiptRecord{WatchID: "w1", MessageID: "m1", Receipt: vigil.Receipt{Channel: "command", Status: vigil.ReceiptDelivered, Attempts: 1, Detail: "exit status 0", UpdatedAt: at}})
	upsert(t, s, vigil.ReceiptRecord{WatchID: "w1", MessageID: "m1", Receipt: vigil.Receipt{Channel: "webhook", Status: vigil.ReceiptUndeliverable, Attempts: 1, Detail: "HTTP 410", UpdatedAt: at.Add(time.Second)}})
	want := []vigil.Receipt{
		{Channel: "command", Status: vigil.ReceiptDelivered, Attempts: 1, Detail: "exit status 0", UpdatedAt: at},
		{Channel: "webhook", Status: vigil.ReceiptUndeliverable, Attempts: 1, Detail: "HTTP 410", UpdatedAt: at.Add(time.Second)},
	}
	if diff := gocmp.Diff(want, get(t, s, "w1").Receipts, opts); diff != "" {
		t.Errorf("WatchGet receipts (-want +got):\n%s", diff)
	}
	many, err := s.WatchGetMany(t.Context(), []string{"w1"})
	if err != nil || len(many) != 1 {
		t.Fatalf("WatchGetMany = %v, %v", many, err)
	}
	if diff := gocmp.Diff(want, many[0].Receipts, opts); diff != "" {
		t.Errorf("WatchGetMany receipts (-want +got):\n%s", diff)
	}
	page, err := s.WatchList(t.Context(), vigil.WatchListParams{})
	if err != nil || len(page.Watches) != 1 {
		t.Fatalf("WatchList = %v, %v", page, err)
	}
	if diff := gocmp.Diff(want, page.Watches[0].Receipts, opts); diff != "" {
		t.Errorf("WatchList receipts (-want +got):\n%s", diff)
	}
	// The receipts round-trip through JSON as the API shows them.
	b, _ := json.Marshal(get(t, s, "w1"))
	var back vigil.Watch
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if diff := gocmp.Diff(want, back.Receipts, opts); diff != "" {
		t.Errorf("receipts through JSON (-want +got):\n%s", diff)
	}

	err = s.ReceiptUpsert(t.Context(), vigil.ReceiptUpsertParams{ReceiptRecord: vigil.ReceiptRecord{WatchID: "missing", MessageID: "m", Receipt: vigil.Receipt{Channel: "webhook", Status: vigil.ReceiptSending, UpdatedAt: at}}})
	wantCode(t, "ReceiptUpsert(missing watch)", err, vigil.CodeNotFound)

	// A deleted watch takes its receipts with it.
	if err := s.WatchDelete(t.Context(), "w1"); err != nil {
		t.Fatal(err)
	}
	res, err := s.ReceiptsResume(t.Context(), vigil.ReceiptsResumeParams{Now: at, Channels: channels, DefaultChannel: "webhook", Defaults: map[string]string{"r": "k"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Unknown)+len(res.Retrying)+len(res.Undispatched) != 0 {
		t.Errorf("ReceiptsResume after delete = %+v, want nothing", res)
	}
}

// testReceiptsResume: at start-up, sending becomes unknown, retrying comes
// back with its next attempt, and a settled watch with no receipt is found.
func testReceiptsResume(t *testing.T, newStore NewStoreFunc) {
	s, reopen := newStore(t)
	// A start with a default webhook for r, before anything settles.
	resumeDefaults(t, s, base, map[string]string{"r": "k"})
	deliver := json.RawMessage(`{"webhook":{"url":"https://hooks.example/x"}}`)
	mk := func(id string, n int, withDeliver bool) *vigil.Watch {
		w := httpWatch(id, "r", n, base)
		if withDeliver {
			w.Deliver = deliver
		}
		return create(t, s, w)
	}
	sending, retrying, orphan, quiet, plain, pending, old, done := mk("a-sending", 1, true), mk("b-retrying", 2, true), mk("c-orphan", 3, true),
		mk("d-quiet", 4, true), mk("e-plain", 5, false), mk("f-pending", 6, true), mk("g-old", 7, true), mk("h-done", 8, true)
	_ = pending
	at := base.Add(time.Minute)
	settleAll(t, s, settle(sending, vigil.StateFired, "m-a", at), settle(retrying, vigil.StateFailed, "m-b", at),
		settle(orphan, vigil.StateExpired, "m-c", at), settle(plain, vigil.StateFired, "m-e", at),
		settle(old, vigil.StateFired, "m-g", base), settle(done, vigil.StateFired, "m-h", at),
		vigil.WatchSettleParams{ID: quiet.ID, State: vigil.StateFired, Outcome: outcome(vigil.StateFired, "satisfied"), SettledAt: at, AnsweredAtCreation: true})
	next := at.Add(30 * time.Second)
	upsert(t, s, vigil.ReceiptRecord{WatchID: "a-sending", MessageID: "m-a", Receipt: vigil.Receipt{Channel: "webhook", Status: vigil.ReceiptSending, Attempts: 1, UpdatedAt: at}})
	upsert(t, s, vigil.ReceiptRecord{WatchID: "b-retrying", MessageID: "m-b", NextAt: next, Receipt: vigil.Receipt{Channel: "webhook", Status: vigil.ReceiptRetrying, Attempts: 2, Detail: "HTTP 503", UpdatedAt: at}})
	upsert(t, s, vigil.ReceiptRecord{WatchID: "h-done", MessageID: "m-h", Receipt: vigil.Receipt{Channel: "webhook", Status: vigil.ReceiptDelivered, Attempts: 1, UpdatedAt: at}})

	s = reopen()
	now := at.Add(time.Hour)
	res, err := s.ReceiptsResume(t.Context(), vigil.ReceiptsResumeParams{Now: now, SettledSince: base.Add(time.Second), Channels: channels})
	if err != nil {
		t.Fatalf("ReceiptsResume error = %v", err)
	}
	wantUnknown := []vigil.ReceiptRecord{{WatchID: "a-sending", MessageID: "m-a", Receipt: vigil.Receipt{Channel: "webhook", Status: vigil.ReceiptUnknown, Attempts: 1,
		Detail: "the daemon stopped while this was being sent", UpdatedAt: now}}}
	if diff := gocmp.Diff(wantUnknown, res.Unknown, opts); diff != "" {
		t.Errorf("Unknown (-want +got):\n%s", diff)
	}
	wantRetrying := []vigil.ReceiptRecord{{WatchID: "b-retrying", MessageID: "m-b", NextAt: next, Receipt: vigil.Receipt{Channel: "webhook", Status: vigil.ReceiptRetrying, Attempts: 2, Detail: "HTTP 503", UpdatedAt: at}}}
	if diff := gocmp.Diff(wantRetrying, res.Retrying, opts); diff != "" {
		t.Errorf("Retrying (-want +got):\n%s", diff)
	}
	if diff := gocmp.Diff([]vigil.Undispatched{{WatchID: "c-orphan", MessageID: "m-c"}}, res.Undispatched, opts); diff != "" {
		t.Errorf("Undispatched (-want +got):\n%s", diff)
	}
	if got := get(t, s, "a-sending").Receipts; len(got) != 1 || got[0].Status != vigil.ReceiptUnknown {
		t.Errorf("a-sending receipts after resume = %+v, want one unknown", got)
	}
	// Unknown is final: a second start finds nothing more to do for it.
	res, err = s.ReceiptsResume(t.Context(), vigil.ReceiptsResumeParams{Now: now, SettledSince: base.Add(time.Second), Channels: channels,
		DefaultChannel: "webhook", Defaults: map[string]string{"r": "k"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Unknown) != 0 || len(res.Retrying) != 1 {
		t.Errorf("second ReceiptsResume = %+v, want no unknown and the one retrying", res)
	}
	if diff := gocmp.Diff([]string{"c-orphan", "e-plain"}, sorted(ids(res.Undispatched, func(u vigil.Undispatched) string { return u.WatchID }))); diff != "" {
		t.Errorf("Undispatched with a default channel (-want +got):\n%s", diff)
	}
}

// testReceiptsResumeRetryUnknown: a receipt found sending whose attempt
// said when the next is due (a webhook under retry_unknown) is resumed as
// retrying, due then, durably: a resume that fails after it (or a second
// start) finds it again; one that said nothing is unknown.
func testReceiptsResumeRetryUnknown(t *testing.T, newStore NewStoreFunc) {
	s, reopen := newStore(t)
	at := base.Add(time.Minute)
	next := at.Add(time.Second)
	for i, id := range []string{"a-retry", "b-once"} {
		w := httpWatch(id, "r", i+1, base)
		w.Deliver = json.RawMessage(`{"webhook":{"url":"https://hooks.example/x"}}`)
		create(t, s, w)
		settleAll(t, s, settle(w, vigil.StateFired, "m-"+id, at))
	}
	upsert(t, s, vigil.ReceiptRecord{WatchID: "a-retry", MessageID: "m-a-retry", NextAt: next,
		Receipt: vigil.Receipt{Channel: "webhook", Status: vigil.ReceiptSending, Attempts: 2, UpdatedAt: at}})
	upsert(t, s, vigil.ReceiptRecord{WatchID: "b-once", MessageID: "m-b-once",
		Receipt: vigil.Receipt{Channel: "webhook", Status: vigil.ReceiptSending, Attempts: 1, UpdatedAt: at}})

	s = reopen()
	now := at.Add(time.Hour)
	want := []vigil.ReceiptRecord{{WatchID: "a-retry", MessageID: "m-a-retry", NextAt: next, Receipt: vigil.Receipt{Channel: "webhook",
		Status: vigil.ReceiptRetrying, Attempts: 2, UpdatedAt: now,
		Detail: "the daemon stopped while this was being sent, and it may have been received: sent again, as retry_unknown asks"}}}
	for round := range 2 {
		res, err := s.ReceiptsResume(t.Context(), vigil.ReceiptsResumeParams{Now: now, SettledSince: base, Channels: channels})
		if err != nil {
			t.Fatalf("ReceiptsResume error = %v", err)
		}
		if diff := gocmp.Diff(want, res.Retrying, opts); diff != "" {
			t.Errorf("round %d: Retrying (-want +got):\n%s", round, diff)
		}
		wantUnknown := "b-once" // then final: found no more
		if round > 0 {
			wantUnknown = ""
		}
		if got := strings.Join(ids(res.Unknown, func(r vigil.ReceiptRecord) string { return r.WatchID }), ","); got != wantUnknown {
			t.Errorf("round %d: Unknown = %q, want %q", round, got, wantUnknown)
		}
		if got := get(t, s, "a-retry").Receipts; len(got) != 1 || got[0] != want[0].Receipt {
			t.Errorf("round %d: a-retry's receipts = %+v, want %+v", round, got, want[0].Receipt)
		}
		if got := get(t, s, "b-once").Receipts; len(got) != 1 || got[0].Status != vigil.ReceiptUnknown {
			t.Errorf("round %d: b-once's receipts = %+v, want one unknown", round, got)
		}
	}
}

// testReceiptsResumePartial: a settled watch whose Deliver names several
// channels, some of which have a receipt and some not (the daemon stopped
// while one channel's job was in flight and another's still queued), is
// found at start-up with the channels that have one, so the others get
// their first attempt; a watch with a receipt on every channel it names
// is not, nor are keys of Deliver that are no channel.
func testReceiptsResumePartial(t *testing.T, newStore NewStoreFunc) {
	s, reopen := newStore(t)
	const (
		hook    = `"webhook":{"url":"https://hooks.example/x"}`
		command = `"command":{"argv":["true"]}`
		email   = `"email":{"to":"ops@example.com"}`
	)
	at := base.Add(time.Minute)
	// A start with a default webhook for r, before anything settles.
	resumeDefaults(t, s, base, map[string]string{"r": "k"})
	mk := func(id string, n int, deliver string) {
		w := httpWatch(id, "r", n, base)
		w.Deliver = json.RawMessage("{" + deliver + "}")
		create(t, s, w)
		settleAll(t, s, settle(w, vigil.StateFired, "m-"+id, at))
	}
	rec := func(id, channel, status string) {
		upsert(t, s, vigil.ReceiptRecord{WatchID: id, MessageID: "m-" + id, Receipt: vigil.Receipt{Channel: channel, Status: status, Attempts: 1, UpdatedAt: at}})
	}
	mk("a-two", 1, hook+","+email)
	rec("a-two", "webhook", vigil.ReceiptSending)
	mk("b-three", 2, hook+","+command+","+email)
	rec("b-three", "webhook", vigil.ReceiptDelivered)
	rec("b-three", "command", vigil.ReceiptUndeliverable)
	mk("c-all", 3, hook+","+email)
	rec("c-all", "webhook", vigil.ReceiptDelivered)
	rec("c-all", "email", vigil.ReceiptUnknown)
	mk("d-progress", 4, hook+`,"progress":true`)
	rec("d-progress", "webhook", vigil.ReceiptRetrying)
	mk("e-email", 5, email)
	rec("e-email", "email", vigil.ReceiptDelivered)

	s = reopen()
	now := at.Add(time.Hour)
	res, err := s.ReceiptsResume(t.Context(), vigil.ReceiptsResumeParams{Now: now, SettledSince: base, Channels: channels})
	if err != nil {
		t.Fatalf("ReceiptsResume error = %v", err)
	}
	want := []vigil.Undispatched{
		{WatchID: "a-two", MessageID: "m-a-two", Receipted: []string{"webhook"}},
		{WatchID: "b-three", MessageID: "m-b-three", Receipted: []string{"command", "webhook"}},
	}
	if diff := gocmp.Diff(want, res.Undispatched, opts); diff != "" {
		t.Errorf("Undispatched (-want +got):\n%s", diff)
	}
	if got := ids(res.Unknown, func(r vigil.ReceiptRecord) string { return r.WatchID + "/" + r.Channel }); !slices.Equal(got, []string{"a-two/webhook"}) {
		t.Errorf("Unknown = %v, want [a-two/webhook]", got)
	}
	// A recipient's default webhook, configured when they settled, is
	// owed by every watch of it, whatever its Deliver names.
	res, err = s.ReceiptsResume(t.Context(), vigil.ReceiptsResumeParams{Now: now, SettledSince: base, Channels: channels,
		DefaultChannel: "webhook", Defaults: map[string]string{"r": "k"}})
	if err != nil {
		t.Fatalf("ReceiptsResume error = %v", err)
	}
	for i := range want {
		want[i].Default = true
	}
	want = append(want, vigil.Undispatched{WatchID: "e-email", MessageID: "m-e-email", Receipted: []string{"email"}, Default: true})
	if diff := gocmp.Diff(want, res.Undispatched, opts); diff != "" {
		t.Errorf("Undispatched with a default webhook (-want +got):\n%s", diff)
	}
	// Once each channel has its receipt, nothing is owed.
	rec("a-two", "email", vigil.ReceiptDelivered)
	rec("b-three", "email", vigil.ReceiptDelivered)
	res, err = s.ReceiptsResume(t.Context(), vigil.ReceiptsResumeParams{Now: now, SettledSince: base, Channels: channels})
	if err != nil {
		t.Fatalf("ReceiptsResume error = %v", err)
	}
	if len(res.Undispatched) != 0 {
		t.Errorf("Undispatched after every channel has a receipt = %+v, want none", res.Undispatched)
	}
}

// resumeDefaults is a start's ReceiptsResume at now with the default
// webhooks defaults (recipient -> key), returning the watch ids found
// undispatched, each with "+default" when it owes its recipient's default.
func resumeDefaults(t *testing.T, s vigil.Store, now time.Time, defaults map[string]string) []string {
	t.Helper()
	res, err := s.ReceiptsResume(t.Context(), vigil.ReceiptsResumeParams{Now: now, SettledSince: base, Channels: channels,
		DefaultChannel: "webhook", Defaults: defaults})
	if err != nil {
		t.Fatalf("ReceiptsResume error = %v", err)
	}
	var out []string
	for _, u := range res.Undispatched {
		id := u.WatchID
		if u.Default {
			id += "+default"
		}
		out = append(out, id)
	}
	return out
}

// testReceiptsResumeDefaults: a recipient's default webhook is owed only
// by the watches of that recipient that settled while it was configured,
// as each start records it: not by those settled before it was added
// (they owed nothing when they settled), nor after it was removed or its
// URL changed, nor by other recipients' watches. What was recorded
// outlives a restart of the store.
func testReceiptsResumeDefaults(t *testing.T, newStore NewStoreFunc) {
	s, reopen := newStore(t)
	at := func(m int) time.Time { return base.Add(time.Duration(m) * time.Minute) }
	n := 0
	mk := func(id, recipient, deliver string, settled time.Time) {
		n++
		w := httpWatch(id, recipient, n, base)
		if deliver != "" {
			w.Deliver = json.RawMessage(deliver)
		}
		create(t, s, w)
		settleAll(t, s, settle(w, vigil.StateFired, "m-"+id, settled))
	}
	check := func(what string, got []string, want ...string) {
		t.Helper()
		if diff := gocmp.Diff(want, got); diff != "" {
			t.Errorf("%s: undispatched (-want +got):\n%s", what, diff)
		}
	}
	const own = `{"webhook":{"url":"https://hooks.example/own"}}`
	// A daemon without defaults settles these; it stops before handing
	// a-own its webhook.
	check("start without defaults", resumeDefaults(t, s, at(0), nil))
	mk("a-own", "q", own, at(1))
	mk("b-old", "r", "", at(2))
	mk("c-old", "r", `{"email":{"to":"ops@example.com"}}`, at(2))
	upsert(t, s, vigil.ReceiptRecord{WatchID: "c-old", MessageID: "m-c-old", Receipt: vigil.Receipt{Channel: "email", Status: vigil.ReceiptDelivered, Attempts: 1, UpdatedAt: at(2)}})
	// The operator adds a default webhook for r and restarts: the
	// outcomes settled before owe it nothing.
	check("default added", resumeDefaults(t, s, at(10), map[string]string{"r": "k1"}), "a-own")
	// Settled under it, and never handed over: owed, at every start with
	// the same default, across a restart of the store.
	mk("d-new", "r", "", at(10))
	mk("e-new", "r", `{"email":{"to":"ops@example.com"}}`, at(11))
	mk("f-other", "q", "", at(11))
	s = reopen()
	check("same default", resumeDefaults(t, s, at(20), map[string]string{"r": "k1"}), "a-own", "d-new+default", "e-new+default")
	check("same default again", resumeDefaults(t, s, at(21), map[string]string{"r": "k1"}), "a-own", "d-new+default", "e-new+default")
	upsert(t, s, vigil.ReceiptRecord{WatchID: "d-new", MessageID: "m-d-new", Receipt: vigil.Receipt{Channel: "webhook", Status: vigil.ReceiptDelivered, Attempts: 1, UpdatedAt: at(21)}})
	check("one delivered", resumeDefaults(t, s, at(22), map[string]string{"r": "k1"}), "a-own", "e-new+default")
	// Its URL changed: a new default, from this start on.
	check("default changed", resumeDefaults(t, s, at(30), map[string]string{"r": "k2"}), "a-own", "e-new")
	mk("g-changed", "r", "", at(31))
	check("changed default kept", resumeDefaults(t, s, at(40), map[string]string{"r": "k2"}), "a-own", "e-new", "g-changed+default")
	// Removed, then added again: again only from the start that adds it.
	check("default removed", resumeDefaults(t, s, at(50), nil), "a-own", "e-new")
	mk("h-none", "r", "", at(51))
	check("default added again", resumeDefaults(t, s, at(60), map[string]string{"r": "k2"}), "a-own", "e-new")
}
