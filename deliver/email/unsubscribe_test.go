package email_test

import (
	"context"
	"encoding/json"
	"io"
	"net/mail"
	"strings"
	"testing"
	"time"

	"github.com/vigil-run/vigil"
	"github.com/vigil-run/vigil/deliver"
	"github.com/vigil-run/vigil/deliver/email"
	"github.com/vigil-run/vigil/store/memstore"
)

// TestListUnsubscribe: each mail carries a one-click List-Unsubscribe
// (RFC 8058) pointing at its watch's signed link, and says it in the body.
func TestListUnsubscribe(t *testing.T) {
	t.Parallel()
	mb, port := startSMTP(t, nil)
	st := memstore.New()
	links := email.NewLinks("https://vigil.example/v1/unsubscribe/", []byte("0123456789abcdef0123456789abcdef"))
	ch := email.New(email.Config{Host: "127.0.0.1", Port: port, From: "vigil@example.com", Links: links})
	w, m := settled(t, st, "w1", vigil.StateFired, "db:5432 accepts connections.")
	p, _ := json.Marshal(deliver.NewPayload(w, m.ID))
	o, _ := deliver.ParseOptions(w.Deliver)
	if retry, err := ch.Send(t.Context(), &deliver.Delivery{Watch: w, MessageID: m.ID, Options: o, Payload: p, Attempt: 1, Now: time.Now()}); err != nil || retry {
		t.Fatalf("Send = %v, %v", retry, err)
	}
	<-mb.got
	parsed, err := mail.ReadMessage(strings.NewReader(string(mb.sent()[0].data)))
	if err != nil {
		t.Fatal(err)
	}
	want := links.URL("w1")
	if got := parsed.Header.Get("List-Unsubscribe"); got != "<"+want+">" {
		t.Errorf("List-Unsubscribe = %q, want <%s>", got, want)
	}
	if got := parsed.Header.Get("List-Unsubscribe-Post"); got != "List-Unsubscribe=One-Click" {
		t.Errorf("List-Unsubscribe-Post = %q, want List-Unsubscribe=One-Click", got)
	}
	body, _ := io.ReadAll(parsed.Body)
	if !strings.Contains(string(body), want) {
		t.Errorf("body = %q; want it to give the link", body)
	}
}

// TestEmailRechecksAtSendTime: just before a mail leaves, the dispatcher
// reads the watch again and asks whether its maker may still reach its
// recipient: a revoked token's watch mails nothing (undeliverable, saying
// why), and neither does a watch whose email was turned off since it
// settled.
func TestEmailRechecksAtSendTime(t *testing.T) {
	t.Parallel()
	mb, port := startSMTP(t, nil)
	st := memstore.New()
	access := func(_ context.Context, w *vigil.Watch) error {
		if w.ID == "revoked" {
			return deliver.Denied("the token that created this watch was revoked")
		}
		return nil
	}
	ch := email.New(email.Config{Host: "127.0.0.1", Port: port, From: "vigil@example.com"})
	d := deliver.New(deliver.Config{Store: st, Channels: map[string]deliver.Channel{deliver.ChannelEmail: ch}, AccessFunc: access})
	run(t, d)

	rw, rm := settled(t, st, "revoked", vigil.StateFired, "revoked fired")
	d.Deliver(rw, rm)
	uw, um := settled(t, st, "unsubscribed", vigil.StateFired, "unsubscribed fired")
	if err := st.WatchDeliverSet(t.Context(), vigil.WatchDeliverSetParams{ID: "unsubscribed"}); err != nil {
		t.Fatal(err)
	}
	d.Deliver(uw, um) // uw still holds the options it settled with
	waitIdle(t, d)
	if n := len(mb.sent()); n != 0 {
		t.Fatalf("%d mails sent; want none for a revoked token's watch or an unsubscribed one", n)
	}
	for id, want := range map[string]string{"revoked": "revoked", "unsubscribed": "turned off"} {
		got, _ := st.WatchGet(t.Context(), id)
		if len(got.Receipts) != 1 || got.Receipts[0].Status != vigil.ReceiptUndeliverable || !strings.Contains(got.Receipts[0].Detail, want) {
			t.Errorf("%s: receipts %+v; want one undeliverable email receipt saying %q", id, got.Receipts, want)
		}
	}
}
