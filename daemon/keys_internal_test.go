package daemon

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"log/slog"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/vigil-run/vigil/deliver"
	"github.com/vigil-run/vigil/forge"
	"github.com/vigil-run/vigil/internal/pgtest"
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
	a, err := keyFingerprints([]string{secret, other}, key, DeliveryConfig{})
	if err != nil {
		t.Fatal(err)
	}
	b, err := keyFingerprints([]string{secret}, key, DeliveryConfig{})
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
	if _, err := keyFingerprints([]string{"whsec_short"}, key, DeliveryConfig{}); err == nil {
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
	settings := SettingsFingerprints{WebhookSecrets: "1111111111111111", Webhooks: "2222222222222222", PublicURL: "3333333333333333"}
	other := SettingsFingerprints{WebhookSecrets: "1111111111111111", Webhooks: "2222222222222222", PublicURL: "4444444444444444"}
	set := func(p postgres.PeerKeys, s SettingsFingerprints) postgres.PeerKeys {
		p.Settings = signingRecord(s)
		return p
	}
	withSettings := func(k KeyFingerprints) KeyFingerprints { k.Settings = settings; return k }
	var sharedA, sharedB SharedFingerprints
	for i := range sharedA {
		sharedA[i], sharedB[i] = "aaaaaaaaaaaaaaaa", "aaaaaaaaaaaaaaaa"
	}
	sharedB[0], sharedB[len(sharedB)-1] = "bbbbbbbbbbbbbbbb", "bbbbbbbbbbbbbbbb" // min_every, smtp
	full := func(p postgres.PeerKeys, s SettingsFingerprints, shared SharedFingerprints) postgres.PeerKeys {
		p.Settings = settingsRecord(replicaPrints{KeyFingerprints: KeyFingerprints{Settings: s}, Shared: shared})
		return p
	}
	for _, c := range []struct {
		name string
		mine KeyFingerprints
		// shared are its shared settings' digests.
		shared SharedFingerprints
		peers  []postgres.PeerKeys
		want   []string // in the refusal; none: it starts
		not    []string
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
		{name: "the same settings", mine: withSettings(mine("L", "old")), peers: []postgres.PeerKeys{set(peer("a", "L", "old"), settings)}},
		{name: "a replica of a build that records no settings", mine: withSettings(mine("L", "old")), peers: []postgres.PeerKeys{peer("a", "L", "old")}},
		{name: "another public_url", mine: withSettings(mine("L", "old")), peers: []postgres.PeerKeys{set(peer("a", "L", "old"), other)},
			want: []string{`signing settings differ from live replica "a": this replica ("me") has other public_url, so an unsubscribe link`,
				`give this replica the same public_url as "a"`, "Running replicas"},
			not: []string{"webhook.secret", "webhook_secrets", "link.key", "3333", "4444"}},
		{name: "every setting", mine: withSettings(mine("L", "old")), peers: []postgres.PeerKeys{{Replica: "a",
			KeyPrints: postgres.KeyPrints{Webhook: []string{"old"}, Link: "L", Settings: "x.y.z"}}},
			want: []string{"has other webhook_secrets, webhooks and public_url", "the same webhook_secrets, webhooks and public_url"}},
		{name: "keys and settings", mine: withSettings(mine("M", "old")), peers: []postgres.PeerKeys{set(peer("a", "L", "old"), other)},
			want: []string{`signing keys differ from live replica "a"`, "has another link.key and has other public_url",
				"copy webhook.secret and link.key", "; and give this replica the same public_url"}},
		{name: "the same shared settings", mine: withSettings(mine("L", "old")), shared: sharedA,
			peers: []postgres.PeerKeys{full(peer("a", "L", "old"), settings, sharedA)}},
		{name: "a replica of a build that records the signing settings alone", mine: withSettings(mine("L", "old")), shared: sharedA,
			peers: []postgres.PeerKeys{set(peer("a", "L", "old"), settings)}},
		{name: "other shared settings", mine: withSettings(mine("L", "old")), shared: sharedA,
			peers: []postgres.PeerKeys{full(peer("a", "L", "old"), settings, sharedB)},
			want: []string{`settings differ from live replica "a": this replica ("me") has other min_every and smtp, so a watch's shortest interval`,
				"recorded undeliverable", `give this replica the same min_every and smtp as "a"`},
			not: []string{"signing", "link.key"}},
		{name: "signing and shared settings", mine: withSettings(mine("L", "old")), shared: sharedA,
			peers: []postgres.PeerKeys{full(peer("a", "L", "old"), other, sharedB)},
			want:  []string{`signing settings differ from live replica "a"`, "has other public_url, min_every and smtp"}},
	} {
		err := keysAgree("me", "/data/b/", replicaPrints{KeyFingerprints: c.mine, Shared: c.shared}, c.peers)
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

// TestKeyCheckWaits: a start refused only by peers that may be dead (a
// previous run under another id, killed) waits, bounded by the lease, for
// them to be silent for a renewal interval and a half and then for their
// leases to lapse, and starts; a peer that beats meanwhile is alive, and
// the start is refused. It does not wait for a peer whose lease lasts
// beyond its own, nor when it compares again after a lapse (rejoin). Time
// is the database's: each wait ages the peer's rows instead of sleeping.
func TestKeyCheckWaits(t *testing.T) {
	t.Parallel()
	mine := KeyFingerprints{WebhookSecret: []string{"aaaa000000000001"}, LinkKey: "1111000000000000"}
	other := postgres.KeyPrints{Webhook: []string{"bbbb000000000001"}, Link: "2222000000000000"}
	const lease, renew = 15 * time.Second, 5 * time.Second
	for _, c := range []struct {
		name string
		// oldLease is the lease of the peer with other keys, which beat
		// a second ago.
		oldLease time.Duration
		// beats: it beats again during the first wait.
		beats bool
		// same: a live peer with this replica's keys beats throughout.
		same   bool
		rejoin bool
		// want is in the refusal; none: it starts.
		want string
		// sleeps is how many waits it makes.
		sleeps int
	}{
		{name: "a peer gone", oldLease: lease, sleeps: 2},
		{name: "a peer gone beside a live one that agrees", oldLease: lease, same: true, sleeps: 2},
		// On a lease shorter than this one's, so that the wait's bound
		// alone would not refuse it at once.
		{name: "a peer that beats meanwhile", oldLease: 5 * time.Second, beats: true, sleeps: 1, want: `signing keys differ from live replica "old"`},
		{name: "a peer whose lease lasts longer than this one's", oldLease: time.Hour, want: `signing keys differ from live replica "old"`},
		{name: "comparing again after a lapse", oldLease: lease, rejoin: true, want: `signing keys differ from live replica "old"`},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			u := pgtest.Schema(t, "vigil_daemon")
			// The peers renew their leases as rows (an older build, or a
			// server before PostgreSQL 14): one gone still counts as
			// live until its lease_until passes, which the wait is for.
			// A peer whose lease is its session stops counting the moment
			// the session ends, and is never waited for.
			pg, err := postgres.Open(t.Context(), u, &postgres.Options{MaxConns: 2, RenewedLeases: true})
			if err != nil {
				t.Fatal(err)
			}
			defer pg.Close()
			// join records prints for replica (compared with nobody) and
			// beats.
			join := func(replica string, prints postgres.KeyPrints, lease time.Duration) {
				t.Helper()
				if err := pg.RecordKeys(t.Context(), replica, prints, lease, func([]postgres.PeerKeys) error { return nil }); err != nil {
					t.Fatal(err)
				}
				if _, err := pg.Heartbeat(t.Context(), postgres.HeartbeatParams{Replica: replica, Live: time.Minute, Lease: lease}); err != nil {
					t.Fatal(err)
				}
			}
			age := func(d time.Duration) {
				t.Helper()
				pgtest.Exec(t, u, `UPDATE replicas SET seen_at = seen_at - $1::interval, lease_until = lease_until - $1::interval WHERE id = 'old'`, d)
				pgtest.Exec(t, u, `UPDATE replica_keys SET recorded_at = recorded_at - $1::interval, start_until = start_until - $1::interval WHERE replica = 'old'`, d)
			}
			join("old", other, c.oldLease)
			age(time.Second)
			if c.same {
				join("same", postgres.KeyPrints{Webhook: mine.WebhookSecret, Link: mine.LinkKey}, lease)
			}
			var sleeps []time.Duration
			var logs bytes.Buffer
			kc := keyCheck{pg: pg, replica: "new", dataDir: "/data/new", mine: replicaPrints{KeyFingerprints: mine}, lease: lease, renew: renew,
				log: slog.New(slog.NewTextHandler(&logs, nil)),
				sleepFunc: func(_ context.Context, d time.Duration) error {
					sleeps = append(sleeps, d)
					age(d)
					if c.beats {
						join("old", other, c.oldLease)
					}
					if c.same {
						join("same", postgres.KeyPrints{Webhook: mine.WebhookSecret, Link: mine.LinkKey}, lease)
					}
					return nil
				}}
			err = kc.run(t.Context(), !c.rejoin)
			if len(sleeps) != c.sleeps {
				t.Errorf("waited %v, want %d waits", sleeps, c.sleeps)
			}
			var total time.Duration
			for _, d := range sleeps {
				total += d
			}
			if total > lease+time.Second {
				t.Errorf("waited %s in all (%v), want at most the lease", total, sleeps)
			}
			if c.want == "" {
				if err != nil {
					t.Fatalf("run = %v, want it to start", err)
				}
				if n := strings.Count(logs.String(), "waiting for their leases to lapse"); n != 1 || !strings.Contains(logs.String(), "replicas=[old]") {
					t.Errorf("logged the wait %d times, want once, naming old:\n%s", n, &logs)
				}
				var seen []string
				if err := pg.RecordKeys(t.Context(), "next", other, lease, func(ps []postgres.PeerKeys) error {
					seen = replicaIDs(ps)
					return nil
				}); err != nil || !slices.Contains(seen, "new") {
					t.Errorf("a check after the start saw %v (%v), want new among them: it recorded its keys", seen, err)
				}
				return
			}
			if !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("run = %v, want a refusal with %q", err, c.want)
			}
		})
	}
}

// TestSettingsFingerprints: the signing settings' fingerprints are the
// same for the same settings however they are spelt (the maps' order,
// public_url's case, default port and trailing slash), and another for
// each setting changed, that setting's alone; none shows a secret or a
// URL.
func TestSettingsFingerprints(t *testing.T) {
	t.Parallel()
	secret := func(b byte) string {
		return deliver.SecretPrefix + base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{b}, 32))
	}
	base := DeliveryConfig{
		WebhookSecrets: map[string]string{"alice": secret('a'), "bob": secret('b')},
		Webhooks:       map[string]string{"alice": "https://hooks.example.com/a", "bob": "https://hooks.example.com/b"},
		PublicURL:      "https://vigil.example.com",
	}
	fp := func(d DeliveryConfig) SettingsFingerprints {
		t.Helper()
		s, err := settingsFingerprints(d)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	// rp: the prints of a replica with these signing settings and the
	// default shared ones.
	shared := sharedFingerprints(defaultConfig(func(string) string { return "/home/ada" }))
	rp := func(s SettingsFingerprints) replicaPrints {
		return replicaPrints{KeyFingerprints: KeyFingerprints{Settings: s}, Shared: shared}
	}
	want := fp(base)
	hex16 := regexp.MustCompile(`^[0-9a-f]{16}$`)
	for _, p := range settingsParts(rp(want)) {
		if !hex16.MatchString(p) {
			t.Errorf("fingerprint %q: want 16 hex digits", p)
		}
	}
	if r := settingsRecord(rp(want)); !regexp.MustCompile(`^[0-9a-f]{16}(\.[0-9a-f]{16}){15}$`).MatchString(r) ||
		!strings.HasPrefix(r, signingRecord(want)+".") {
		t.Errorf("record %q: want the three signing settings' fingerprints, then the thirteen shared ones', joined by dots", r)
	}
	same := base
	same.PublicURL = "HTTPS://Vigil.Example.COM:443/"
	same.WebhookSecrets = map[string]string{"bob": secret('b'), "alice": secret('a')}
	if got := fp(same); got != want {
		t.Errorf("the same settings spelt otherwise: %+v, want %+v", got, want)
	}
	for _, c := range []struct {
		setting string
		change  func(d *DeliveryConfig)
	}{
		{"webhook_secrets", func(d *DeliveryConfig) {
			d.WebhookSecrets = map[string]string{"alice": secret('a'), "bob": secret('c')}
		}},
		{"webhook_secrets", func(d *DeliveryConfig) { d.WebhookSecrets = map[string]string{"alice": secret('a')} }},
		{"webhooks", func(d *DeliveryConfig) { d.Webhooks = map[string]string{"alice": "https://hooks.example.com/a"} }},
		{"webhooks", func(d *DeliveryConfig) {
			d.Webhooks = map[string]string{"alice": "https://hooks.example.com/b", "bob": "https://hooks.example.com/a"}
		}},
		{"public_url", func(d *DeliveryConfig) { d.PublicURL = "https://vigil.example.com:8443" }},
		{"public_url", func(d *DeliveryConfig) { d.PublicURL = "" }},
	} {
		d := base
		c.change(&d)
		if got := settingsDiffer(rp(fp(d)), settingsRecord(rp(want))); !slices.Equal(got, []string{c.setting}) {
			t.Errorf("%s changed: differ = %v, want [%s]", c.setting, got, c.setting)
		}
	}
	if got := settingsDiffer(rp(want), ""); got != nil {
		t.Errorf("differ from a replica that recorded no settings = %v, want none", got)
	}
	if _, err := settingsFingerprints(DeliveryConfig{WebhookSecrets: map[string]string{"alice": "whsec_short"}}); err == nil || strings.Contains(err.Error(), "whsec_short") {
		t.Errorf("an invalid recipient secret: %v, want an error that does not show it", err)
	}
}

// signingRecord is the settings record of a replica of the build before
// the shared settings' check: the signing settings' three digests alone.
func signingRecord(s SettingsFingerprints) string {
	return strings.Join([]string{s.WebhookSecrets, s.Webhooks, s.PublicURL}, ".")
}

// TestSharedFingerprints: the shared settings' digests are the same for
// the same settings however they are spelt (roots as a set, a host's
// case, smtp's default port, a token's or password's value), and another
// for each setting changed, that setting's alone; a peer's record is
// compared on the digests both records hold: the signing settings' alone
// from the build before, the first ones of a later build's longer record.
func TestSharedFingerprints(t *testing.T) {
	t.Parallel()
	base := defaultConfig(func(string) string { return "/home/ada" })
	base.Roots = []string{"/srv/b", "/srv/a"}
	base.Delivery.SMTP = SMTPConfig{Host: "smtp.example.com", Port: 587, User: "vigil", Password: "pw-one", From: "vigil@example.com"}
	base.Forges.Gitea = forge.Endpoint{URL: "https://gitea.example.com", Token: "token-one"}
	signing := SettingsFingerprints{WebhookSecrets: "1111111111111111", Webhooks: "2222222222222222", PublicURL: "3333333333333333"}
	rp := func(c Config) replicaPrints {
		return replicaPrints{KeyFingerprints: KeyFingerprints{Settings: signing}, Shared: sharedFingerprints(c)}
	}
	want := rp(base)
	record := settingsRecord(want)
	if len(recordNames) != 16 || len(settingsParts(want)) != len(recordNames) {
		t.Fatalf("%d record names, %d parts: want 16 of each", len(recordNames), len(settingsParts(want)))
	}
	for _, s := range []string{"pw-one", "token-one", "/srv", "smtp.example.com"} {
		if strings.Contains(record, s) {
			t.Errorf("record %q shows %q", record, s)
		}
	}

	same := base
	same.Roots = []string{"/srv/a/", "/srv/b", "/srv/./a"}
	same.Delivery.SMTP.Host, same.Delivery.SMTP.Port, same.Delivery.SMTP.Password = "SMTP.example.COM", 0, "pw-two"
	same.Forges.Gitea.Token, same.Forges.Gitea.URL = "token-two", "HTTPS://Gitea.example.com/"
	if got := settingsDiffer(rp(same), record); got != nil {
		t.Errorf("the same settings spelt otherwise differ in %v", got)
	}
	// Email off, or a forge off, whatever their other keys.
	off, offToo := base, base
	off.Delivery.SMTP, offToo.Delivery.SMTP = SMTPConfig{}, SMTPConfig{User: "x", From: "a@b.c"}
	off.Forges.Gitea, offToo.Forges.Gitea = forge.Endpoint{}, forge.Endpoint{Token: "t"}
	if got := settingsDiffer(rp(offToo), settingsRecord(rp(off))); got != nil {
		t.Errorf("email and a forge off, spelt otherwise, differ in %v", got)
	}

	for _, c := range []struct {
		setting string
		change  func(c *Config)
	}{
		{"min_every", func(c *Config) { c.Limits.MinEvery = 2 * time.Second }},
		{"max_deadline", func(c *Config) { c.Limits.MaxDeadline = time.Hour }},
		{"max_active", func(c *Config) { c.Limits.MaxActive = 10 }},
		{"max_active_per_recipient", func(c *Config) { c.Limits.MaxActivePerRecipient = 10 }},
		{"register_rate", func(c *Config) { c.RegisterRate = 1 }},
		{"register_burst", func(c *Config) { c.RegisterBurst = 1 }},
		{"deny_private", func(c *Config) { c.DenyPrivate = true }},
		{"roots", func(c *Config) { c.Roots = []string{"/srv/a"} }},
		{"roots", func(c *Config) { c.Roots = []string{"/srv/a", "/srv/b", "/srv/c"} }},
		{"allow_exec", func(c *Config) { c.AllowExec = !c.AllowExec }},
		{"forges.github", func(c *Config) { c.Forges.GitHub.Token = "t" }},
		{"forges.github", func(c *Config) { c.Forges.GitHub.URL = "https://ghe.example.com/api/v3" }},
		{"forges.gitea", func(c *Config) { c.Forges.Gitea.Login = "bot" }},
		{"forges.gitea", func(c *Config) { c.Forges.Gitea.Token = "" }},
		{"forges.gitlab", func(c *Config) { c.Forges.GitLab.URL = "" }},
		{"smtp", func(c *Config) { c.Delivery.SMTP.Host = "" }},
		{"smtp", func(c *Config) { c.Delivery.SMTP.Port = 25 }},
		{"smtp", func(c *Config) { c.Delivery.SMTP.User, c.Delivery.SMTP.Password = "", "" }},
		{"smtp", func(c *Config) { c.Delivery.SMTP.Password = "" }},
		{"smtp", func(c *Config) { c.Delivery.SMTP.From = "other@example.com" }},
		{"smtp", func(c *Config) { c.Delivery.SMTP.NoStartTLS = true }},
	} {
		cfg := base
		cfg.Roots = slices.Clone(base.Roots)
		c.change(&cfg)
		if got := settingsDiffer(rp(cfg), record); !slices.Equal(got, []string{c.setting}) {
			t.Errorf("%s changed: differ = %v, want [%s]", c.setting, got, c.setting)
		}
		// A replica of the build before records the signing settings'
		// digests alone: not compared on the rest.
		if got := settingsDiffer(rp(cfg), signingRecord(signing)); got != nil {
			t.Errorf("%s changed, beside a record of the signing settings alone: differ = %v, want none", c.setting, got)
		}
		// A later build records more: compared on what this one records.
		if got := settingsDiffer(rp(cfg), record+".ffffffffffffffff"); !slices.Equal(got, []string{c.setting}) {
			t.Errorf("%s changed, beside a later build's record: differ = %v, want [%s]", c.setting, got, c.setting)
		}
	}
	// A record of part of the shared settings: compared on those.
	cfg := base
	cfg.Limits.MinEvery, cfg.AllowExec = time.Minute, !cfg.AllowExec
	short := strings.Join(strings.Split(record, ".")[:4], ".")
	if got := settingsDiffer(rp(cfg), short); !slices.Equal(got, []string{"min_every"}) {
		t.Errorf("beside a record of the first shared setting: differ = %v, want [min_every]", got)
	}
}
