package daemon

import (
	"encoding/base64"
	"errors"
	"regexp"
	"strings"
	"testing"

	"github.com/vigil-run/vigil/deliver"
	"github.com/vigil-run/vigil/store/postgres"
)

// TestKeyFingerprints: a fingerprint is 16 hex digits, the same for the
// same key, another for another key, and another for the same bytes as a
// webhook secret and as a link key (each kind has its prefix); it holds
// nothing of the secret's text.
func TestKeyFingerprints(t *testing.T) {
	t.Parallel()
	key := []byte("0123456789abcdef0123456789abcdef")
	secret := deliver.SecretPrefix + base64.StdEncoding.EncodeToString(key)
	other := deliver.SecretPrefix + base64.StdEncoding.EncodeToString([]byte("fedcba9876543210fedcba9876543210"))
	a, err := keyFingerprints([]string{secret, other}, key)
	if err != nil {
		t.Fatal(err)
	}
	b, err := keyFingerprints([]string{secret}, key)
	if err != nil {
		t.Fatal(err)
	}
	hex16 := regexp.MustCompile(`^[0-9a-f]{16}$`)
	for _, f := range append(a.WebhookSecret, a.LinkKey) {
		if !hex16.MatchString(f) || strings.Contains(secret, f) {
			t.Errorf("fingerprint %q: want 16 hex digits, nothing of the secret", f)
		}
	}
	if len(a.WebhookSecret) != 2 || a.WebhookSecret[0] != b.WebhookSecret[0] || a.WebhookSecret[0] == a.WebhookSecret[1] {
		t.Errorf("fingerprints %v and %v: want one per line, the same line alike, two lines apart", a.WebhookSecret, b.WebhookSecret)
	}
	if a.LinkKey == a.WebhookSecret[0] {
		t.Errorf("the same bytes as link key and webhook secret print alike (%s): want a prefix per kind", a.LinkKey)
	}
	if _, err := keyFingerprints([]string{"whsec_short"}, key); err == nil {
		t.Error("a line that is no secret: no error")
	}
}

// TestKeysAgree: the start-up rule over the live replicas' fingerprints.
// A replica starts beside replicas whose link key is its own and with
// which it has a line of webhook.secret in common (one is enough: a
// rotation), a line common to all of them; otherwise the refusal names
// both replicas and the file that differs, and says what to do.
func TestKeysAgree(t *testing.T) {
	t.Parallel()
	peer := func(id string, link string, webhook ...string) postgres.PeerKeys {
		return postgres.PeerKeys{Replica: id, KeyPrints: postgres.KeyPrints{Webhook: webhook, Link: link}}
	}
	mine := func(link string, webhook ...string) KeyFingerprints {
		return KeyFingerprints{WebhookSecret: webhook, LinkKey: link}
	}
	for _, c := range []struct {
		name  string
		mine  KeyFingerprints
		peers []postgres.PeerKeys
		want  []string // in the refusal; none: it starts
		not   []string
	}{
		{name: "alone", mine: mine("L", "old")},
		{name: "same files", mine: mine("L", "old"), peers: []postgres.PeerKeys{peer("a", "L", "old"), peer("b", "L", "old")}},
		{name: "rotation, the new line added", mine: mine("L", "new", "old"), peers: []postgres.PeerKeys{peer("a", "L", "old")}},
		{name: "rotation, the old line dropped", mine: mine("L", "new"), peers: []postgres.PeerKeys{peer("a", "L", "old", "new"), peer("b", "L", "new")}},
		{name: "no line in common", mine: mine("L", "mine"), peers: []postgres.PeerKeys{peer("a", "L", "old")},
			want: []string{`signing keys differ from live replica "a"`, `this replica ("me")`, "shares no line of webhook.secret", "copy webhook.secret and link.key", "/data/b"},
			not:  []string{"another link.key"}},
		{name: "another link key", mine: mine("M", "old"), peers: []postgres.PeerKeys{peer("a", "L", "old")},
			want: []string{`signing keys differ from live replica "a"`, "has another link.key"}, not: []string{"shares no line"}},
		{name: "both", mine: mine("M", "mine"), peers: []postgres.PeerKeys{peer("a", "L", "old")},
			want: []string{"shares no line of webhook.secret with it and has another link.key"}},
		{name: "the second peer differs", mine: mine("L", "old"), peers: []postgres.PeerKeys{peer("a", "L", "old"), peer("b", "L", "other")},
			want: []string{`live replica "b"`}, not: []string{`replica "a"`}},
		{name: "a line in common with each, none with all", mine: mine("L", "x", "z"),
			peers: []postgres.PeerKeys{peer("a", "L", "x", "y"), peer("b", "L", "y", "z")},
			want:  []string{`signing keys differ from live replicas "a", "b"`, "every one of them", "copy webhook.secret and link.key"}},
	} {
		err := keysAgree("me", "/data/b/", c.mine, c.peers)
		if len(c.want) == 0 {
			if err != nil {
				t.Errorf("%s: %v, want it to start", c.name, err)
			}
			continue
		}
		if !errors.Is(err, ErrRefused) {
			t.Errorf("%s: %v, want a refusal (ErrRefused)", c.name, err)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: %q lacks %q", c.name, err, w)
			}
		}
		for _, n := range c.not {
			if strings.Contains(err.Error(), n) {
				t.Errorf("%s: %q says %q", c.name, err, n)
			}
		}
	}
}
