package deliver_test

import (
	"context"
	"net/http"
	"path/filepath"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/vigil-run/vigil"
	"github.com/vigil-run/vigil/deliver"
	"github.com/vigil-run/vigil/deliver/webhook"
	"github.com/vigil-run/vigil/store/memstore"
	"github.com/vigil-run/vigil/store/sqlite"
)

// defaultHook is agent-7's default webhook, the daemon's setting
// webhooks: agent-7=https://hooks.example/in.
var defaultHook = map[string]deliver.WebhookOptions{"agent-7": {URL: "https://hooks.example/in"}}

// TestDefaultWebhookNotRetroactive: a default webhook added to the
// configuration does not post, at the next start, the outcomes of its
// recipient settled before it (in the resume window), which owed it
// nothing when they settled: it applies to those that settle from then
// on.
func TestDefaultWebhookNotRetroactive(t *testing.T) {
	st, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "v.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	// Settled under a daemon with no default webhook: nothing owed.
	w, _ := settled(t, st, "old1", "", vigil.StateFired)
	settled(t, st, "old2", "", vigil.StateFailed)
	// The operator adds the default webhook and restarts, an hour later.
	restart := w.SettledAt.Add(time.Hour)
	rv := &receiver{answer: func(int) (int, bool, bool) { return http.StatusOK, false, false }}
	ch, err := webhook.New(webhook.Config{Client: &http.Client{Transport: rv}, Secrets: []string{testSecret}})
	if err != nil {
		t.Fatal(err)
	}
	d := deliver.New(deliver.Config{Store: st, Channels: map[string]deliver.Channel{deliver.ChannelWebhook: ch},
		RecipientWebhooks: defaultHook, NowFunc: func() time.Time { return restart }})
	if err := d.Resume(t.Context()); err != nil {
		t.Fatal(err)
	}
	if n := d.Pending(); n != 0 {
		t.Errorf("Pending() = %d after the start that added the default webhook, want 0: outcomes settled before it are posted", n)
	}
	// A start after that one, with the same default, finds no more.
	d = deliver.New(deliver.Config{Store: st, Channels: map[string]deliver.Channel{deliver.ChannelWebhook: ch},
		RecipientWebhooks: defaultHook, NowFunc: func() time.Time { return restart.Add(time.Hour) }})
	if err := d.Resume(t.Context()); err != nil {
		t.Fatal(err)
	}
	if n := d.Pending(); n != 0 {
		t.Errorf("Pending() = %d at the next start, want 0", n)
	}
	for _, id := range []string{"old1", "old2"} {
		if got, _ := st.WatchGet(t.Context(), id); len(got.Receipts) != 0 {
			t.Errorf("%s receipts = %+v, want none", id, got.Receipts)
		}
	}
}

// TestDefaultWebhookResumedWhenOwed: an outcome settled while its
// recipient's default webhook was configured, and never handed over (the
// daemon stopped first), is posted to it at the next start; one settled
// before the default was added is not, even when it is resumed for a
// channel of its own (its email), and neither is another recipient's.
func TestDefaultWebhookResumedWhenOwed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := memstore.New()
		start := func(defaults map[string]deliver.WebhookOptions, mail deliver.Channel) (*receiver, *deliver.Dispatcher, func()) {
			rv := &receiver{answer: func(int) (int, bool, bool) { return http.StatusOK, false, false }}
			ch, err := webhook.New(webhook.Config{Client: &http.Client{Transport: rv}, Secrets: []string{testSecret}})
			if err != nil {
				t.Fatal(err)
			}
			d := deliver.New(deliver.Config{Store: st, RecipientWebhooks: defaults,
				Channels: map[string]deliver.Channel{deliver.ChannelWebhook: ch, deliver.ChannelEmail: mail}})
			if err := d.Resume(t.Context()); err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(t.Context())
			done := make(chan struct{})
			go func() { _ = d.Run(ctx); close(done) }()
			return rv, d, func() { cancel(); <-done }
		}
		// A daemon without defaults: its outcomes stop before any is
		// handed over (it crashes).
		_, _, stop := start(nil, &fakeChannel{})
		settled(t, st, "a-before", "", vigil.StateFired)
		settled(t, st, "b-before-mail", `{"email":{"to":"ops@example.com"}}`, vigil.StateFired)
		stop()
		time.Sleep(time.Minute)
		// With agent-7's default webhook: more settle, and it crashes
		// again before handing them over.
		mail := &fakeChannel{}
		rv, _, stop := start(defaultHook, mail)
		synctest.Wait()
		if n := len(rv.requests()); n != 0 {
			t.Errorf("the start that added the default posted %d outcomes settled before it", n)
		}
		if n := mail.count(); n != 1 {
			t.Errorf("the start that added the default sent %d emails, want b-before-mail's", n)
		}
		stop()
		time.Sleep(time.Minute)
		settled(t, st, "c-under", "", vigil.StateExpired)
		settledFor(t, st, "d-other", "agent-8", "", vigil.StateFired)
		time.Sleep(time.Minute)
		// The next start, same configuration: c-under is owed its post.
		rv, d, stop := start(defaultHook, &fakeChannel{})
		synctest.Wait()
		var ids []string
		for _, r := range rv.requests() {
			ids = append(ids, r.id)
		}
		if !slices.Equal(ids, []string{"msg-c-under"}) {
			t.Errorf("posted %v at the restart, want [msg-c-under]", ids)
		}
		if n := d.Pending(); n != 0 {
			t.Errorf("Pending() = %d, want 0", n)
		}
		stop()
	})
}
