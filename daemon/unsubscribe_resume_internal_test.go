package daemon

import (
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/vigil-run/vigil"
	"github.com/vigil-run/vigil/deliver"
	"github.com/vigil-run/vigil/deliver/email"
	"github.com/vigil-run/vigil/store/memstore"
)

// TestUnsubscribeKeepsResume: the one-click unsubscribe link of a
// mail turns email off and nothing else. A watch that mails and resumes an
// agent session (and has no webhook, command or progress) must keep its
// resume: dropping it means the agent is never woken for an outcome not
// yet handed over (a restart before the resume ran finds no resume owed).
func TestUnsubscribeKeepsResume(t *testing.T) {
	ctx := context.Background()
	st := memstore.New()
	links := email.NewLinks("http://vigil.test/v1/unsubscribe/", []byte("0123456789abcdef0123456789abcdef"))
	d := &Daemon{store: st, links: links, log: slog.New(slog.DiscardHandler)}
	now := time.Now().UTC().Truncate(time.Millisecond)
	opts := `{"email":{"to":"ops@example.com"},"resume":{"harness":"claude","on":"any","session":"s1","timeout":"10m"}}`
	w := &vigil.Watch{ID: "w1", Kind: vigil.KindHTTP, Predicate: json.RawMessage(`{"url":"https://example.com/"}`), Recipient: "agent-7",
		State: vigil.StatePending, Mode: vigil.ModeUntil, Every: 10 * time.Second, Deadline: now.Add(time.Hour), CreatedAt: now,
		Deliver: json.RawMessage(opts)}
	w.Identity = vigil.Identity(w.Recipient, w.Kind, w.Mode, w.Predicate)
	if _, err := st.WatchCreate(ctx, vigil.WatchCreateParams{Watch: w}); err != nil {
		t.Fatal(err)
	}
	// It fires; its mail goes out (its receipt says so); the daemon stops
	// before the resume's turn came.
	m := &vigil.Message{ID: "msg-w1", Recipient: w.Recipient, WatchID: "w1", Type: vigil.MessageTypeFor(vigil.StateFired), Text: "fired", CreatedAt: now}
	out := &vigil.Outcome{State: vigil.StateFired, Sentence: "fired", Reason: "satisfied"}
	if _, err := st.WatchSettle(ctx, []vigil.WatchSettleParams{{ID: "w1", State: vigil.StateFired, Outcome: out, SettledAt: now, Polls: 1, Message: m}}); err != nil {
		t.Fatal(err)
	}
	if err := st.ReceiptUpsert(ctx, vigil.ReceiptUpsertParams{ReceiptRecord: vigil.ReceiptRecord{WatchID: "w1", MessageID: "msg-w1",
		Receipt: vigil.Receipt{Channel: deliver.ChannelEmail, Status: vigil.ReceiptDelivered, Attempts: 1, UpdatedAt: now}}}); err != nil {
		t.Fatal(err)
	}
	u := links.URL("w1")
	sig := u[strings.LastIndexByte(u, '/')+1:]
	if err := d.unsubscribe(ctx, "w1", sig, true); err != nil {
		t.Fatal(err)
	}
	got, err := st.WatchGet(ctx, "w1")
	if err != nil {
		t.Fatal(err)
	}
	o, err := deliver.ParseOptions(got.Deliver)
	if err != nil {
		t.Fatal(err)
	}
	if o.Email != nil {
		t.Errorf("email still on: %s", got.Deliver)
	}
	if o.Resume == nil {
		t.Errorf("after unsubscribing from email, deliver = %s: the resume was dropped too", got.Deliver)
	}
	// The next start owes the resume its first attempt.
	disp := deliver.New(deliver.Config{Store: st, Channels: map[string]deliver.Channel{}})
	var owed []vigil.Undispatched
	if err := disp.ResumeWith(ctx, func(ctx context.Context, p vigil.ReceiptsResumeParams) (vigil.ReceiptsResumeResult, error) {
		r, err := st.ReceiptsResume(ctx, p)
		owed = r.Undispatched
		return r, err
	}); err != nil {
		t.Fatal(err)
	}
	if len(owed) != 1 {
		t.Errorf("at the next start, undispatched = %+v; want w1 (its resume never ran)", owed)
	}
}
