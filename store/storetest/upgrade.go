package storetest

import (
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/vigil-run/vigil"
)

// upgradeAt is when the rows of an upgrade test were written.
var upgradeAt = time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)

func upgradeWatch(id, recipient, predicate string, at time.Time) *vigil.Watch {
	w := &vigil.Watch{ID: id, Kind: vigil.KindHTTP, Predicate: json.RawMessage(predicate), Recipient: recipient,
		State: vigil.StatePending, Mode: vigil.ModeUntil, Every: 10 * time.Second, Deadline: at.Add(30 * time.Minute), CreatedAt: at}
	w.Identity = vigil.Identity(recipient, w.Kind, w.Mode, w.Predicate)
	return w
}

// WriteUpgradeRows writes to s the rows a daemon keeps, for a test of an
// upgrade to read back with CheckUpgradedRows once the store's schema has
// been taken down to an older one and migrated again: two pending watches
// (one with a note and labels), a settled one with its outcome message and
// a delivered webhook receipt, a note, a reader's cursor past the outcome,
// and a scoped token.
func WriteUpgradeRows(t *testing.T, s vigil.Store) {
	t.Helper()
	ctx := t.Context()
	at := upgradeAt
	pend := upgradeWatch("w-pending", "r", `{"url":"https://example.com/p"}`, at)
	pend.Labels = map[string]string{"team": "ops"}
	pend.Note = "Watch the deploy"
	due := upgradeWatch("w-due", "r2", `{"url":"https://example.com/d"}`, at)
	due.Deadline = at.Add(time.Minute)
	settled := upgradeWatch("w-settled", "r", `{"url":"https://example.com/s"}`, at)
	for _, w := range []*vigil.Watch{pend, due, settled} {
		if _, err := s.WatchCreate(ctx, vigil.WatchCreateParams{Watch: w}); err != nil {
			t.Fatal(err)
		}
	}
	outcome := &vigil.Outcome{State: vigil.StateFired, Sentence: "it fired", Reason: "satisfied"}
	if _, err := s.WatchSettle(ctx, []vigil.WatchSettleParams{{ID: "w-settled", State: vigil.StateFired,
		Outcome: outcome, SettledAt: at.Add(time.Second), Polls: 2,
		Message: &vigil.Message{ID: "m-settled", Recipient: "r", WatchID: "w-settled", Type: vigil.MessageTypeFor(vigil.StateFired),
			Text: "w-settled fired", CreatedAt: at.Add(time.Second)}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.MessageCreate(ctx, &vigil.Message{ID: "m-note", Recipient: "r", Type: vigil.MessageNote,
		Text: "a note", CreatedAt: at.Add(2 * time.Second)}); err != nil {
		t.Fatal(err)
	}
	page, err := s.MessagesRead(ctx, vigil.MessagesReadParams{Recipient: "r", Limit: 10})
	if err != nil || len(page.Messages) != 2 {
		t.Fatalf("messages before: %v, %v", page.Messages, err)
	}
	if err := s.MessagesAck(ctx, vigil.MessagesAckParams{Recipient: "r", Reader: "agent", Seq: page.Messages[0].Seq}); err != nil {
		t.Fatal(err)
	}
	receipt := vigil.Receipt{Channel: "webhook", Status: vigil.ReceiptDelivered, Attempts: 1, UpdatedAt: at.Add(3 * time.Second)}
	if err := s.ReceiptUpsert(ctx, vigil.ReceiptUpsertParams{ReceiptRecord: vigil.ReceiptRecord{
		WatchID: "w-settled", MessageID: "m-settled", Receipt: receipt}}); err != nil {
		t.Fatal(err)
	}
	tok := &vigil.Token{ID: "tok-1", Hash: vigil.HashToken("secret-1"), Recipients: []string{"r"},
		Kinds: []vigil.Kind{vigil.KindHTTP}, CreatedAt: at, ExpiresAt: at.Add(24 * time.Hour)}
	if err := s.TokenCreate(ctx, vigil.TokenCreateParams{Token: tok}); err != nil {
		t.Fatal(err)
	}
}

// CheckUpgradedRows reads back what WriteUpgradeRows wrote, in a store
// opened (and migrated) since: every row reads as written (the receipt
// and the token only when the older schema had them), the pending watches
// are re-armed (WatchListPending), one settles and mails its outcome, a
// registration of a pending watch's identity joins it and one of the
// settled watch's makes a new watch, and the counts match.
func CheckUpgradedRows(t *testing.T, s vigil.Store, receipts, tokens bool) {
	t.Helper()
	ctx := t.Context()
	at := upgradeAt
	pend := upgradeWatch("w-pending", "r", `{"url":"https://example.com/p"}`, at)
	pend.Labels = map[string]string{"team": "ops"}
	pend.Note = "Watch the deploy"
	due := upgradeWatch("w-due", "r2", `{"url":"https://example.com/d"}`, at)
	due.Deadline = at.Add(time.Minute)
	settled := upgradeWatch("w-settled", "r", `{"url":"https://example.com/s"}`, at)
	outcome := &vigil.Outcome{State: vigil.StateFired, Sentence: "it fired", Reason: "satisfied"}
	receipt := vigil.Receipt{Channel: "webhook", Status: vigil.ReceiptDelivered, Attempts: 1, UpdatedAt: at.Add(3 * time.Second)}
	tok := &vigil.Token{ID: "tok-1", ExpiresAt: at.Add(24 * time.Hour)}
	got, err := s.WatchGet(ctx, "w-pending")
	if err != nil {
		t.Fatal(err)
	}
	if got.State != vigil.StatePending || got.Kind != pend.Kind || string(got.Predicate) != string(pend.Predicate) ||
		got.Recipient != "r" || !got.Deadline.Equal(pend.Deadline) || got.Every != pend.Every ||
		got.Identity != pend.Identity || got.Note != pend.Note || got.Labels["team"] != "ops" {
		t.Errorf("pending watch after the upgrade: %+v\nwant %+v", got, pend)
	}
	got, err = s.WatchGet(ctx, "w-settled")
	if err != nil {
		t.Fatal(err)
	}
	if got.State != vigil.StateFired || !got.SettledAt.Equal(at.Add(time.Second)) || got.Outcome == nil ||
		got.Outcome.Sentence != outcome.Sentence || got.Outcome.Reason != outcome.Reason {
		t.Errorf("settled watch after the upgrade: %+v, outcome %+v", got, got.Outcome)
	}
	if receipts {
		if len(got.Receipts) != 1 || got.Receipts[0].Channel != "webhook" || got.Receipts[0].Status != vigil.ReceiptDelivered ||
			!got.Receipts[0].UpdatedAt.Equal(receipt.UpdatedAt) {
			t.Errorf("settled watch's receipts after the upgrade: %+v, want %+v", got.Receipts, receipt)
		}
	}

	entries, err := s.WatchListPending(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, e := range entries {
		if e.Unreadable != "" {
			t.Errorf("pending watch %s unreadable after the upgrade: %s", e.ID, e.Unreadable)
		}
		ids = append(ids, e.ID)
	}
	slices.Sort(ids)
	if !slices.Equal(ids, []string{"w-due", "w-pending"}) {
		t.Errorf("pending watches re-armed after the upgrade: %v, want w-due and w-pending", ids)
	}

	msgs, err := s.MessagesRead(ctx, vigil.MessagesReadParams{Recipient: "r", Reader: "agent", Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	if len(msgs.Messages) != 1 || msgs.Messages[0].ID != "m-note" || msgs.Messages[0].Text != "a note" {
		t.Errorf("reader's unread messages after the upgrade: %+v, want the note alone", msgs.Messages)
	}
	of, err := s.MessagesOfWatch(ctx, "w-settled", 10)
	if err != nil || len(of) != 1 || of[0].ID != "m-settled" {
		t.Errorf("MessagesOfWatch(w-settled) after the upgrade: %+v, %v; want its outcome", of, err)
	}

	if tokens {
		tk, err := s.TokenGetByHash(ctx, vigil.HashToken("secret-1"))
		if err != nil || tk.ID != "tok-1" || !slices.Equal(tk.Recipients, []string{"r"}) || !tk.ExpiresAt.Equal(tok.ExpiresAt) {
			t.Errorf("token after the upgrade: %+v, %v", tk, err)
		}
	}

	// A pending watch still fires: it settles once, and its outcome is mailed.
	won, err := s.WatchSettle(ctx, []vigil.WatchSettleParams{{ID: "w-due", State: vigil.StateExpired,
		Outcome: &vigil.Outcome{State: vigil.StateExpired, Sentence: "it expired", Reason: "deadline"}, SettledAt: due.Deadline,
		Message: &vigil.Message{ID: "m-due", Recipient: "r2", WatchID: "w-due", Type: vigil.MessageTypeFor(vigil.StateExpired),
			Text: "w-due expired", CreatedAt: due.Deadline}}})
	if err != nil || len(won) != 1 || !won[0] {
		t.Fatalf("settling a pending watch after the upgrade: %v, %v", won, err)
	}
	box, err := s.MessagesRead(ctx, vigil.MessagesReadParams{Recipient: "r2", Limit: 10})
	if err != nil || len(box.Messages) != 1 || box.Messages[0].ID != "m-due" {
		t.Errorf("r2's mailbox after its watch settled: %+v, %v", box.Messages, err)
	}

	// Identities: a pending watch's is taken, a settled watch's free.
	again := upgradeWatch("w-again", "r", string(pend.Predicate), at.Add(time.Hour))
	res, err := s.WatchCreate(ctx, vigil.WatchCreateParams{Watch: again})
	if err != nil || res.ID != "w-pending" {
		t.Errorf("registering the pending watch's identity again: %v, %v; want w-pending", res, err)
	}
	fresh := upgradeWatch("w-fresh", "r", string(settled.Predicate), at.Add(time.Hour))
	res, err = s.WatchCreate(ctx, vigil.WatchCreateParams{Watch: fresh})
	if err != nil || res.ID != "w-fresh" {
		t.Errorf("registering the settled watch's identity again: %v, %v; want a new watch", res, err)
	}
	counts, err := s.WatchCounts(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	states := map[vigil.State]int{}
	for _, c := range counts {
		states[c.State] += c.N
	}
	if states[vigil.StatePending] != 2 || states[vigil.StateFired] != 1 || states[vigil.StateExpired] != 1 {
		t.Errorf("counts after the upgrade: %v (%+v), want 2 pending, 1 fired, 1 expired", states, counts)
	}
}
