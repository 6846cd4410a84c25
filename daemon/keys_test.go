package daemon_test

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/vigil-run/vigil"
	"github.com/vigil-run/vigil/client"
	"github.com/vigil-run/vigil/daemon"
	"github.com/vigil-run/vigil/forge"
	"github.com/vigil-run/vigil/internal/pgtest"
	"github.com/vigil-run/vigil/store/postgres"
)

// newSecret is a new random webhook secret, as vigil makes one.
func newSecret(t testing.TB) string {
	t.Helper()
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return "whsec_" + base64.StdEncoding.EncodeToString(b)
}

// newLinkKey is a new random link key, as link.key holds it.
func newLinkKey(t testing.TB) string {
	t.Helper()
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return base64.StdEncoding.EncodeToString(b)
}

// readKeys returns the webhook secret lines and the link key in dataDir.
func readKeys(t testing.TB, dataDir string) ([]string, string) {
	t.Helper()
	w, err := os.ReadFile(filepath.Join(dataDir, daemon.WebhookSecretFile))
	if err != nil {
		t.Fatal(err)
	}
	l, err := os.ReadFile(filepath.Join(dataDir, daemon.LinkKeyFile))
	if err != nil {
		t.Fatal(err)
	}
	return strings.Fields(string(w)), strings.TrimSpace(string(l))
}

// writeKeys writes webhook.secret (one line per secret) and link.key into
// dataDir, as an operator gives every replica the same files.
func writeKeys(t testing.TB, dataDir string, secrets []string, link string) {
	t.Helper()
	if err := os.MkdirAll(dataDir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dataDir, daemon.WebhookSecretFile), []byte(strings.Join(secrets, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dataDir, daemon.LinkKeyFile), []byte(link+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
}

// sameKeys copies the signing keys of the replica on from into to: every
// replica on one database signs with the same files.
func sameKeys(t testing.TB, from, to string) {
	t.Helper()
	secrets, link := readKeys(t, from)
	writeKeys(t, to, secrets, link)
}

// replicaConfig is the configuration of a replica of store, on a short
// lease: a start refused beside a live replica waits for its next
// heartbeat first (it might be a run that was killed), a renewal interval
// and a half at most.
func replicaConfig(t *testing.T, store, id string) daemon.Config {
	// The same roots for every replica of a test (the parent of its
	// temporary directories): replicas must share their settings.
	cfg := testConfig(t.TempDir(), filepath.Dir(t.TempDir()))
	cfg.Store, cfg.Replica = store, id
	cfg.Lease, cfg.LeaseRenew = 3*time.Second, time.Second
	return cfg
}

// refused starts a daemon for cfg that must refuse to start, and returns
// its error.
func refused(t *testing.T, cfg daemon.Config) error {
	t.Helper()
	d, err := daemon.New(t.Context(), cfg, nil)
	if err == nil {
		d.Close()
		t.Fatalf("replica %s started; want it refused", cfg.Replica)
	}
	if !errors.Is(err, daemon.ErrRefused) {
		t.Fatalf("replica %s: %v; want a refusal (ErrRefused)", cfg.Replica, err)
	}
	return err
}

// keysOf asks c for the daemon's key fingerprints (GET /v1/daemon).
func keysOf(t *testing.T, c *client.Client) client.KeyFingerprints {
	t.Helper()
	info, err := c.Daemon(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if info.Keys == nil {
		t.Fatalf("GET /v1/daemon to the admin = %+v: no key fingerprints", info)
	}
	return *info.Keys
}

// TestPostgresReplicaKeysSame: two replicas given the same webhook.secret
// and link.key start side by side, share the shards, and show the same
// fingerprints in GET /v1/daemon (to the admin; a scoped token sees none).
func TestPostgresReplicaKeysSame(t *testing.T) {
	t.Parallel()
	store := pgStore(t)
	cfgA := replicaConfig(t, store, "replica-a")
	a := start(t, cfgA)
	cfgB := cfgA
	cfgB.DataDir, cfgB.Replica = t.TempDir(), "replica-b"
	sameKeys(t, cfgA.DataDir, cfgB.DataDir)
	b := start(t, cfgB)
	ca, cb := newClient(t, a), newClient(t, b)
	shardsOf(t, 32, ca, cb)
	ka, kb := keysOf(t, ca), keysOf(t, cb)
	if len(ka.WebhookSecret) != 1 || len(ka.LinkKey) != 16 || !slices.Equal(ka.WebhookSecret, kb.WebhookSecret) || ka.LinkKey != kb.LinkKey {
		t.Errorf("fingerprints of A %+v and B %+v: want one webhook secret and a link key, the same on both", ka, kb)
	}
	tok, err := ca.CreateToken(t.Context(), vigil.TokenCreateRequest{Recipients: []string{"r"}})
	if err != nil {
		t.Fatal(err)
	}
	scoped, err := client.New(a.Addr(), tok.Secret, nil)
	if err != nil {
		t.Fatal(err)
	}
	if info, err := scoped.Daemon(t.Context()); err != nil || info.Keys != nil {
		t.Errorf("GET /v1/daemon to a scoped token = %+v, %v; want no key fingerprints", info, err)
	}
}

// TestPostgresReplicaKeysDiffer: a replica whose webhook.secret shares no
// line with a live replica's, or whose link.key differs, refuses to start
// (exit 2), naming both replicas and the file, and saying to copy the
// files from a running replica; it records nothing, so it is not counted
// among the live replicas after.
func TestPostgresReplicaKeysDiffer(t *testing.T) {
	t.Parallel()
	store := pgStore(t)
	cfgA := replicaConfig(t, store, "replica-a")
	start(t, cfgA)
	secretsA, linkA := readKeys(t, cfgA.DataDir)

	// A data dir of its own: both files made afresh.
	cfgB := replicaConfig(t, store, "replica-b")
	err := refused(t, cfgB)
	for _, want := range []string{`signing keys differ from live replica "replica-a"`, `this replica ("replica-b")`,
		"shares no line of webhook.secret with it and has another link.key", "copy webhook.secret and link.key", cfgB.DataDir} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("refusal %q lacks %q", err, want)
		}
	}
	// Another webhook.secret, A's link.key.
	writeKeys(t, cfgB.DataDir, []string{newSecret(t)}, linkA)
	if err := refused(t, cfgB); !strings.Contains(err.Error(), "shares no line of webhook.secret") || strings.Contains(err.Error(), "another link.key") {
		t.Errorf("refusal of another webhook.secret alone = %q", err)
	}
	// A's webhook.secret, another link.key.
	writeKeys(t, cfgB.DataDir, secretsA, newLinkKey(t))
	if err := refused(t, cfgB); !strings.Contains(err.Error(), "has another link.key") || strings.Contains(err.Error(), "shares no line") {
		t.Errorf("refusal of another link.key alone = %q", err)
	}
	// None of those counts as live: a replica with A's files starts.
	cfgC := replicaConfig(t, store, "replica-c")
	sameKeys(t, cfgA.DataDir, cfgC.DataDir)
	start(t, cfgC)
}

// TestPostgresReplicaKeysRotation: rotating the webhook secret one replica
// at a time. A signs with the old secret; B, restarted with the new secret
// added, shares the old line with A and starts; C with the new secret
// alone shares none with A and is refused while A runs; once A is gone
// (restarted with the new secret, say), C starts beside B.
func TestPostgresReplicaKeysRotation(t *testing.T) {
	t.Parallel()
	store := pgStore(t)
	cfgA := replicaConfig(t, store, "replica-a")
	a := start(t, cfgA)
	old, link := readKeys(t, cfgA.DataDir)
	next := newSecret(t)

	cfgB := replicaConfig(t, store, "replica-b")
	writeKeys(t, cfgB.DataDir, []string{next, old[0]}, link)
	b := start(t, cfgB)
	ka, kb := keysOf(t, newClient(t, a)), keysOf(t, newClient(t, b))
	if len(kb.WebhookSecret) != 2 || kb.WebhookSecret[1] != ka.WebhookSecret[0] || kb.WebhookSecret[0] == ka.WebhookSecret[0] {
		t.Errorf("B's fingerprints %v, A's %v: want the new line's and the old one's, A's", kb.WebhookSecret, ka.WebhookSecret)
	}

	cfgC := replicaConfig(t, store, "replica-c")
	writeKeys(t, cfgC.DataDir, []string{next}, link)
	if err := refused(t, cfgC); !strings.Contains(err.Error(), `signing keys differ from live replica "replica-a": this replica ("replica-c") shares no line of webhook.secret`) {
		t.Errorf("C beside A: %v", err)
	}
	if err := a.stop(); err != nil {
		t.Fatal(err)
	}
	start(t, cfgC)
}

// TestPostgresReplicaKeysLapsedPeer: only live replicas are compared. A
// replica with other keys is refused while a peer recorded other keys and
// holds its lease; once that lease has lapsed (by the database's clock)
// it starts. A replica of an older build, live but with no fingerprints
// recorded, is not compared either.
func TestPostgresReplicaKeysLapsedPeer(t *testing.T) {
	t.Parallel()
	store := pgStore(t)
	// The peers, played by stores of their own: "other" recorded other
	// keys and beats; "old" beats and records nothing.
	pg, err := postgres.Open(t.Context(), store, &postgres.Options{MaxConns: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer pg.Close()
	if err := pg.RecordKeys(t.Context(), "other", postgres.KeyPrints{Webhook: []string{"0123456789abcdef"}, Link: "fedcba9876543210"},
		time.Minute, func([]postgres.PeerKeys) error { return nil }); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"other", "old"} {
		if _, err := pg.Heartbeat(t.Context(), postgres.HeartbeatParams{Replica: id, Live: time.Minute, Lease: time.Minute}); err != nil {
			t.Fatal(err)
		}
	}

	cfg := replicaConfig(t, store, "replica-b")
	if err := refused(t, cfg); !strings.Contains(err.Error(), `signing keys differ from live replica "other"`) {
		t.Fatalf("beside a live peer with other keys: %v", err)
	}
	pgtest.Lapse(t, store, "other", time.Millisecond)
	b := start(t, cfg)
	if info, err := newClient(t, b).Daemon(t.Context()); err != nil || info.Role != "active" {
		t.Fatalf("after the peer's lease lapsed: %+v, %v; want it serving", info, err)
	}
}

// TestPostgresReplicaKeysAfterLapse: a replica whose lease lapsed (frozen
// past it) compares its keys again at its next heartbeat, before it takes
// a shard. Beside a live replica with the same keys it takes its shards
// again; beside one with other keys that started meanwhile (comparing
// with nobody, as a start does beside a lapsed replica) it takes none,
// logs the start's refusal at error level and stops with it (ErrRefused:
// vigil serve exits 2). The lapses are made in the database, and each
// step comes at once on the newcomer's first heartbeat (a rebalance): no
// timer is waited for.
func TestPostgresReplicaKeysAfterLapse(t *testing.T) {
	t.Parallel()
	store := pgStore(t)
	cfg := replicaConfig(t, store, "replica-a")
	// It steps at its start and when told (a rebalance) only: a renewal
	// every 20 minutes never comes within the test.
	cfg.Lease, cfg.LeaseRenew = time.Hour, 20*time.Minute
	logs := &syncBuffer{}
	d, err := daemon.New(t.Context(), cfg, slog.New(slog.NewTextHandler(logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	errc := make(chan error, 1)
	go func() { errc <- d.Run(ctx) }()
	defer func() {
		cancel()
		<-errc
	}()
	select {
	case <-d.Primed():
	case err := <-errc:
		t.Fatalf("replica-a stopped before it was primed: %v", err)
	}
	c, err := client.New(d.Addr(), d.Token(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.CloseIdleConnections()
	shardsOf(t, 64, c)
	k := keysOf(t, c)
	same := postgres.KeyPrints{Webhook: k.WebhookSecret, Link: k.LinkKey}

	// The newcomers, played by a store of their own.
	pg, err := postgres.Open(t.Context(), store, &postgres.Options{MaxConns: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer pg.Close()
	// epochs are the shards' epochs, and which replica-a holds.
	epochs := func() (map[int]int64, map[int]bool) {
		t.Helper()
		ls, err := pg.ShardLeases(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		out, held := map[int]int64{}, map[int]bool{}
		for _, l := range ls {
			out[l.Shard] = l.Epoch
			held[l.Shard] = l.Owner == "replica-a" && l.Live
		}
		return out, held
	}
	// lapse ends replica-a's lease, and says when by the database's clock.
	lapse := func() time.Time {
		t.Helper()
		c, err := pgx.Connect(t.Context(), store)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close(context.Background())
		var at time.Time
		if err := c.QueryRow(t.Context(), `UPDATE replicas SET lease_until = now() - interval '1 millisecond' WHERE id = 'replica-a' RETURNING now()`).Scan(&at); err != nil {
			t.Fatal(err)
		}
		// A lease held as a session lapses when the session ends.
		pgtest.Lapse(t, store, "replica-a", time.Millisecond)
		return at
	}
	// join lapses replica-a's lease and records prints for replica,
	// comparing with nobody (a is not live), and beats: its first
	// heartbeat makes a step. A replica-a that beat again after the lapse
	// (a step of its own, after the last join's) is live, rightly
	// compared with: the lapse is made again.
	errRenewed := errors.New("replica-a beat again after its lease was ended")
	join := func(replica string, prints postgres.KeyPrints) {
		t.Helper()
		for try := 0; ; try++ {
			at := lapse()
			err := pg.RecordKeys(t.Context(), replica, prints, time.Minute, func(peers []postgres.PeerKeys) error {
				for _, p := range peers {
					if p.Replica == "replica-a" && p.Seen.After(at) {
						return errRenewed
					}
					if p.Replica == "replica-a" {
						return fmt.Errorf("%s compared with replica-a, whose lease lapsed", replica)
					}
				}
				return nil
			})
			if errors.Is(err, errRenewed) && try < 50 {
				continue
			}
			if err != nil {
				t.Fatal(err)
			}
			break
		}
		if _, err := pg.Heartbeat(t.Context(), postgres.HeartbeatParams{Replica: replica, Live: time.Minute, Lease: time.Minute}); err != nil {
			t.Fatal(err)
		}
	}

	// Beside a replica with the same keys: it goes on, and takes its
	// share again (at the next epoch).
	before, _ := epochs()
	join("replica-same", same)
	deadline := time.Now().Add(30 * time.Second)
	for {
		now, held := epochs()
		again := 0
		for sh, e := range now {
			if held[sh] && e > before[sh] {
				again++
			}
		}
		if again == 32 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after its lease lapsed beside a replica with its keys, replica-a holds %d shards taken again, want 32", again)
		}
		time.Sleep(20 * time.Millisecond)
	}

	// Beside a replica with other keys: refused, stopped.
	before, _ = epochs()
	join("replica-other", postgres.KeyPrints{Webhook: []string{"0123456789abcdef"}, Link: "fedcba9876543210"})
	select {
	case err = <-errc:
		errc <- err // for the deferred wait
	case <-time.After(30 * time.Second):
		t.Fatal("replica-a goes on after its lease lapsed, beside a live replica with other keys")
	}
	if !errors.Is(err, daemon.ErrRefused) || !strings.Contains(err.Error(), `signing keys differ from live replica "replica-other": this replica ("replica-a")`) {
		t.Fatalf("replica-a's Run = %v, want the start's refusal (ErrRefused) naming replica-other", err)
	}
	if !strings.Contains(logs.String(), `level=ERROR msg="signing keys differ from live replica \"replica-other\"`) {
		t.Errorf("no refusal logged at error level:\n%s", logs)
	}
	after, held := epochs()
	for sh, e := range after {
		if held[sh] || e != before[sh] {
			t.Errorf("shard %d at epoch %d (%d before the lapse), held by replica-a %v: it took a shard after the lapse", sh, e, before[sh], held[sh])
		}
	}
}

// TestPostgresReplicaSettingsDiffer: replicas with the same files must
// also have the same webhook_secrets, webhooks and public_url. One whose
// public_url or a recipient's secret differs from a live replica's is
// refused, the refusal naming the setting and never its value; with the
// same settings (spelt otherwise) it starts, and GET /v1/daemon shows the
// same settings' fingerprints on both.
func TestPostgresReplicaSettingsDiffer(t *testing.T) {
	t.Parallel()
	store := pgStore(t)
	secret := newSecret(t)
	cfgA := replicaConfig(t, store, "replica-a")
	cfgA.Delivery.PublicURL = "https://vigil.example.com"
	cfgA.Delivery.WebhookSecrets = map[string]string{"alice": secret}
	cfgA.Delivery.Webhooks = map[string]string{"alice": "https://hooks.example.com/alice"}
	a := start(t, cfgA)

	cfgB := replicaConfig(t, store, "replica-b")
	sameKeys(t, cfgA.DataDir, cfgB.DataDir)
	cfgB.Delivery = cfgA.Delivery
	cfgB.Delivery.PublicURL = "https://other.example.com"
	err := refused(t, cfgB)
	for _, want := range []string{`signing settings differ from live replica "replica-a": this replica ("replica-b") has other public_url`,
		`give this replica the same public_url as "replica-a"`} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("refusal %q lacks %q", err, want)
		}
	}
	cfgB.Delivery.PublicURL = cfgA.Delivery.PublicURL
	cfgB.Delivery.WebhookSecrets = map[string]string{"alice": newSecret(t)}
	err = refused(t, cfgB)
	if !strings.Contains(err.Error(), "has other webhook_secrets,") || strings.Contains(err.Error(), "public_url") {
		t.Errorf("refusal of another recipient secret = %q", err)
	}
	for _, s := range []string{secret, cfgB.Delivery.WebhookSecrets["alice"], "whsec_"} {
		if strings.Contains(err.Error(), s) {
			t.Errorf("refusal %q shows a secret", err)
		}
	}

	cfgB.Delivery.WebhookSecrets = map[string]string{"alice": secret}
	cfgB.Delivery.PublicURL = "HTTPS://vigil.example.com/"
	b := start(t, cfgB)
	ka, kb := keysOf(t, newClient(t, a)), keysOf(t, newClient(t, b))
	if ka.Settings == (client.SettingsFingerprints{}) || ka.Settings != kb.Settings {
		t.Errorf("settings' fingerprints of A %+v and B %+v: want them shown, the same on both", ka.Settings, kb.Settings)
	}
}

// TestPostgresReplicaSharedSettingsDiffer: replicas must also share the
// rest of the settings each applies to the registrations it answers and
// the watches of its shards (docs/operations.md, Running replicas). One
// whose min_every, max_deadline, max_active limits, register_rate or
// register_burst, deny_private, roots, allow_exec, forges or smtp differ
// from a live replica's is refused, naming each, never a value; with the
// same settings spelt otherwise (roots in another order, a host's case,
// the default port, another smtp password or forge token) it starts; and
// beside a replica of the build before this check, which records its
// signing settings alone, it is compared on those alone and starts.
func TestPostgresReplicaSharedSettingsDiffer(t *testing.T) {
	t.Parallel()
	store := pgStore(t)
	r1, r2 := t.TempDir(), t.TempDir()
	const password, token = "hunter2-smtp-password", "gitea-token-secret"
	cfgA := replicaConfig(t, store, "replica-a")
	cfgA.Roots = []string{r1, r2}
	cfgA.Delivery.SMTP = daemon.SMTPConfig{Host: "smtp.example.com", Port: 587, User: "vigil", Password: password, From: "vigil@example.com"}
	cfgA.Forges.Gitea = forge.Endpoint{URL: "https://gitea.example.com", Token: token}
	// A lease far longer than B's: B is refused at once, without waiting
	// to see whether A beats, and A stays live however loaded the machine.
	cfgA.Lease = 30 * time.Second
	start(t, cfgA)

	cfgB := cfgA
	cfgB.DataDir, cfgB.Replica, cfgB.Lease = t.TempDir(), "replica-b", 3*time.Second
	sameKeys(t, cfgA.DataDir, cfgB.DataDir)
	for _, c := range []struct {
		setting string
		change  func(c *daemon.Config)
	}{
		{"min_every", func(c *daemon.Config) { c.Limits.MinEvery = 5 * time.Second }},
		{"max_deadline", func(c *daemon.Config) { c.Limits.MaxDeadline = 24 * time.Hour }},
		{"max_active", func(c *daemon.Config) { c.Limits.MaxActive = 5000 }},
		{"max_active_per_recipient", func(c *daemon.Config) { c.Limits.MaxActivePerRecipient = 10 }},
		{"register_rate", func(c *daemon.Config) { c.RegisterRate = 0 }},
		{"register_burst", func(c *daemon.Config) { c.RegisterBurst = 5 }},
		{"deny_private", func(c *daemon.Config) { c.DenyPrivate = true }},
		{"roots", func(c *daemon.Config) { c.Roots = []string{r1} }},
		{"allow_exec", func(c *daemon.Config) { c.AllowExec = false }},
		{"forges.gitea", func(c *daemon.Config) { c.Forges.Gitea = forge.Endpoint{} }},
		{"forges.github", func(c *daemon.Config) { c.Forges.GitHub.Token = token }},
		{"smtp", func(c *daemon.Config) { c.Delivery.SMTP.Host = "smtp2.example.com" }},
		{"smtp", func(c *daemon.Config) { c.Delivery.SMTP.Password, c.Delivery.SMTP.User = "", "" }},
	} {
		cfg := cfgB
		cfg.Roots = slices.Clone(cfgB.Roots)
		c.change(&cfg)
		err := refused(t, cfg)
		for _, want := range []string{`settings differ from live replica "replica-a": this replica ("replica-b") has other ` + c.setting + `, so `,
			`give this replica the same ` + c.setting + ` as "replica-a"`, "Running replicas"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("%s differs: refusal %q lacks %q", c.setting, err, want)
			}
		}
		for _, not := range []string{"signing", password, token, "smtp2.example.com", r1} {
			if strings.Contains(err.Error(), not) {
				t.Errorf("%s differs: refusal %q says %q", c.setting, err, not)
			}
		}
	}

	// Several at once: each named.
	cfg := cfgB
	cfg.Limits.MinEvery, cfg.AllowExec, cfg.Roots = 2*time.Second, false, []string{r2}
	if err := refused(t, cfg); !strings.Contains(err.Error(), "has other min_every, roots and allow_exec, so ") {
		t.Errorf("three settings differ: refusal %q, want each named", err)
	}

	// The same settings, spelt otherwise: it starts.
	cfg = cfgB
	cfg.Roots = []string{r2 + "/", r1, r2}
	cfg.Delivery.SMTP.Host, cfg.Delivery.SMTP.Port, cfg.Delivery.SMTP.Password = "SMTP.Example.com", 0, "rotated-password"
	cfg.Forges.Gitea.Token = "rotated-token"
	cfg.Forges.Gitea.URL = "HTTPS://gitea.example.com/"
	b := start(t, cfg)
	if err := b.stop(); err != nil {
		t.Fatal(err)
	}

	// Beside a replica of the build before this check, which records the
	// digests of its signing settings alone: compared on those, it starts
	// with other shared settings.
	pgtest.Exec(t, store, `UPDATE replica_keys SET settings = array_to_string((string_to_array(settings, '.'))[1:3], '.') WHERE replica = 'replica-a'`)
	cfg = cfgB
	cfg.Limits.MinEvery, cfg.AllowExec = 5*time.Second, false
	start(t, cfg)
}
