package webhook_test

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/vigil-run/vigil/deliver/webhook"
)

// standardSignature is the Standard Webhooks signature computed from the
// specification alone, without the package: the HMAC-SHA256 key is the
// bytes the base64 after "whsec_" spells, the signed content
// "{webhook-id}.{webhook-timestamp}.{raw body}", the signature its
// standard base64 after "v1,".
func standardSignature(t *testing.T, secret, id, ts string, body []byte) string {
	t.Helper()
	key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(secret, "whsec_"))
	if err != nil {
		t.Fatalf("the test's secret: %v", err)
	}
	m := hmac.New(sha256.New, key)
	m.Write([]byte(id + "." + ts + "."))
	m.Write(body)
	return "v1," + base64.StdEncoding.EncodeToString(m.Sum(nil))
}

// TestStandardWebhooksIndependent checks what the channel sends against
// the Standard Webhooks specification as docs/delivery.md states it, by an
// implementation of its own: the three headers, the id the outcome
// message's, the timestamp the attempt's unix seconds, and one signature
// per secret, space-separated, while secrets rotate, each of which an
// independent receiver verifies; a watch's own secret signs alone.
func TestStandardWebhooksIndependent(t *testing.T) {
	t.Parallel()
	seen := make(chan got, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			t.Errorf("method %s, want POST", r.Method)
		}
		body, _ := io.ReadAll(r.Body)
		seen <- got{h: r.Header.Clone(), body: body}
	}))
	defer srv.Close()
	ch, err := webhook.New(webhook.Config{Secrets: []string{secretA, secretB}})
	if err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 11, 30, 12, 0, 3, 120e6, time.UTC)
	for _, tc := range []struct {
		name    string
		own     string
		signers []string
		others  []string
	}{
		{"daemon secrets, rotating", "", []string{secretA, secretB}, nil},
		{"the watch's own secret", secretB, []string{secretB}, []string{secretA}},
	} {
		d := delivery(srv.URL)
		d.Now = at
		d.Options.Webhook.Secret = tc.own
		if retry, err := ch.Send(t.Context(), d); err != nil || retry {
			t.Fatalf("%s: Send = %v, %v", tc.name, retry, err)
		}
		g := <-seen
		if ct := g.h.Get("Content-Type"); ct != "application/json" {
			t.Errorf("%s: Content-Type %q", tc.name, ct)
		}
		if string(g.body) != string(d.Payload) {
			t.Errorf("%s: body %s, want the payload %s", tc.name, g.body, d.Payload)
		}
		id, ts, sigs := g.h.Get("webhook-id"), g.h.Get("webhook-timestamp"), g.h.Get("webhook-signature")
		if id != d.MessageID {
			t.Errorf("%s: webhook-id %q, want the message id %q", tc.name, id, d.MessageID)
		}
		if ts != strconv.FormatInt(at.Unix(), 10) {
			t.Errorf("%s: webhook-timestamp %q, want the attempt's unix seconds %d", tc.name, ts, at.Unix())
		}
		list := strings.Split(sigs, " ")
		if len(list) != len(tc.signers) {
			t.Errorf("%s: webhook-signature %q holds %d signatures, want %d separated by one space", tc.name, sigs, len(list), len(tc.signers))
		}
		for _, s := range tc.signers {
			if want := standardSignature(t, s, id, ts, g.body); !slices.Contains(list, want) {
				t.Errorf("%s: webhook-signature %q lacks %s's %q", tc.name, sigs, s[:12], want)
			}
		}
		for _, s := range tc.others {
			if want := standardSignature(t, s, id, ts, g.body); slices.Contains(list, want) {
				t.Errorf("%s: signed with %s too", tc.name, s[:12])
			}
		}
		// And the shipped Verify agrees with the independent signatures.
		for _, s := range tc.signers {
			if err := webhook.Verify(s, g.h, g.body, at, 0); err != nil {
				t.Errorf("%s: Verify(%s) = %v", tc.name, s[:12], err)
			}
		}
	}
}
