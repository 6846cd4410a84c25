package daemon

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/vigil-run/vigil/deliver"
	"github.com/vigil-run/vigil/internal/wire"
	"github.com/vigil-run/vigil/store/postgres"
	httpwatch "github.com/vigil-run/vigil/watcher/http"
)

// KeyFingerprints name the daemon's signing material without showing it:
// a short digest of each line of <data_dir>/webhook.secret, in the file's
// order, one of <data_dir>/link.key, and those of the signing settings of
// its configuration (SettingsFingerprints). Two daemons whose fingerprints
// match sign alike. Replicas on one PostgreSQL database compare them at
// start (checkKeys); GET /v1/daemon shows them to the admin, in the shape
// the Go client reads (internal/wire).
type KeyFingerprints = wire.KeyFingerprints

// SettingsFingerprints name the signing settings of the daemon's
// configuration, which every replica must share as it shares the files: a
// digest of webhook_secrets (each recipient's secret fingerprinted as a
// line of webhook.secret is, sorted by recipient), of webhooks (the
// default webhooks, sorted by recipient) and of public_url (normalURL).
type SettingsFingerprints = wire.SettingsFingerprints

// settingNames are the settings of SettingsFingerprints, in the order of
// their record.
var settingNames = [...]string{"webhook_secrets", "webhooks", "public_url"}

func settingsParts(s SettingsFingerprints) [len(settingNames)]string {
	return [...]string{s.WebhookSecrets, s.Webhooks, s.PublicURL}
}

// settingsRecord is the one fingerprint of the settings a replica records
// (postgres.KeyPrints.Settings): the three digests, in settingNames'
// order, joined by dots.
func settingsRecord(s SettingsFingerprints) string {
	p := settingsParts(s)
	return strings.Join(p[:], ".")
}

// settingsDiffer names the settings whose digests in s differ from those
// of a peer's record; none when it recorded none (a build before schema
// 10). A record with more digests (a later build's) is compared on the
// first three.
func settingsDiffer(s SettingsFingerprints, record string) []string {
	if record == "" {
		return nil
	}
	theirs := strings.Split(record, ".")
	var out []string
	for i, mine := range settingsParts(s) {
		if i >= len(theirs) || theirs[i] != mine {
			out = append(out, settingNames[i])
		}
	}
	return out
}

// settingsFingerprints returns the fingerprints of the signing settings
// of d (validated: each secret of webhook_secrets valid).
func settingsFingerprints(d DeliveryConfig) (SettingsFingerprints, error) {
	secrets := [][2]string{}
	for _, r := range slices.Sorted(maps.Keys(d.WebhookSecrets)) {
		k, err := deliver.SecretKey(d.WebhookSecrets[r])
		if err != nil {
			return SettingsFingerprints{}, fmt.Errorf("webhook_secrets: the secret for %s %v", r, err)
		}
		secrets = append(secrets, [2]string{r, fingerprint("webhook.secret", k)})
	}
	hooks := [][2]string{}
	for _, r := range slices.Sorted(maps.Keys(d.Webhooks)) {
		hooks = append(hooks, [2]string{r, d.Webhooks[r]})
	}
	// JSON arrays of strings: one encoding for one list.
	ws, _ := json.Marshal(secrets)
	wh, _ := json.Marshal(hooks)
	return SettingsFingerprints{
		WebhookSecrets: fingerprint("webhook_secrets", ws),
		Webhooks:       fingerprint("webhooks", wh),
		PublicURL:      fingerprint("public_url", []byte(normalURL(d.PublicURL))),
	}, nil
}

// normalURL is public_url as two replicas that link alike may spell it
// differently: as the http kind canonicalizes a URL (scheme and host in
// lower case, no default port), with no trailing slash.
func normalURL(s string) string {
	s = strings.TrimSpace(s)
	if c, err := httpwatch.CanonicalURL(s, "public_url"); err == nil {
		s = c
	}
	return strings.TrimRight(s, "/")
}

// fingerprint is the first 16 hex digits of the SHA-256 of key under a
// prefix of its own for each kind of key (what): it names the key, to be
// compared with another's, and tells nothing of it (a webhook secret holds
// at least 24 bytes, deliver.MinSecretBytes, and a link key 16; those
// vigil makes, 32 random bytes).
func fingerprint(what string, key []byte) string {
	h := sha256.New()
	h.Write([]byte("vigil key fingerprint v1\x00" + what + "\x00"))
	h.Write(key)
	return hex.EncodeToString(h.Sum(nil))[:16]
}

// keyFingerprints returns the fingerprints of the daemon's webhook secrets
// (as ensureWebhookSecrets read them: each line a valid secret), link key
// and signing settings.
func keyFingerprints(secrets []string, linkKey []byte, d DeliveryConfig) (KeyFingerprints, error) {
	settings, err := settingsFingerprints(d)
	if err != nil {
		return KeyFingerprints{}, err
	}
	out := KeyFingerprints{LinkKey: fingerprint("link.key", linkKey), Settings: settings}
	for i, s := range secrets {
		k, err := deliver.SecretKey(s)
		if err != nil {
			return KeyFingerprints{}, fmt.Errorf("webhook secret %d %v", i+1, err)
		}
		out.WebhookSecret = append(out.WebhookSecret, fingerprint("webhook.secret", k))
	}
	return out, nil
}

// checkKeys compares, before a replica on PostgreSQL serves or takes a
// shard, its signing keys with those of every live replica (its lease not
// lapsed) that recorded theirs, and records its own
// (postgres.Store.RecordKeys): it refuses to start (ErrRefused) unless
// some line of its webhook.secret is in the webhook.secret of every live
// replica, and its link.key is theirs. Otherwise a receiver set up with
// one replica's secret would refuse, for good, the webhooks another signs
// (each watch's deliveries go out from whichever replica holds its shard
// then), and an unsubscribe link made by one would answer 404 on another.
// One line in common is enough: a rotation adds the new secret to every
// replica, one restart at a time, and later drops the old one the same
// way, and every step shares a line with the replicas still running.
//
// At a start (wait), a refusal that only peers which may be dead make
// (keysWait: a replica killed and started again at once under another id,
// its host and new pid, with other keys finds its previous run live until
// its lease lapses) is put off: the check is made again once they have
// been silent for longer than a renewal interval and a half, and again
// once their leases lapsed, for a lease (and a second) at most; a peer that beats
// meanwhile is alive, and the start is refused. A replica that compares
// again after its lease lapsed (shards.rejoin) does not wait: its
// manager's steps go on, and it is refused at once.
func checkKeys(ctx context.Context, pg *postgres.Store, cfg Config, replica string, mine KeyFingerprints, log *slog.Logger, wait bool) error {
	lease, renew := cfg.leases()
	return keyCheck{pg: pg, replica: replica, dataDir: cfg.DataDir, mine: mine, lease: lease, renew: renew, log: log}.run(ctx, wait)
}

// keyCheck is checkKeys' comparison.
type keyCheck struct {
	pg           *postgres.Store
	replica      string
	dataDir      string
	mine         KeyFingerprints
	lease, renew time.Duration
	log          *slog.Logger
	// sleepFunc waits d unless ctx ends first; nil: a timer (tests
	// move the database's rows instead).
	sleepFunc func(ctx context.Context, d time.Duration) error
}

// keysSlack is how long past a peer's lease the check waits before it
// looks again: the database's clock and this one's run apart a little,
// and a statement takes time.
const keysSlack = 250 * time.Millisecond

func (c keyCheck) run(ctx context.Context, wait bool) error {
	var (
		compared int
		first    = map[string]time.Time{} // the Seen of the peers waited for, when first seen
		waited   time.Duration
	)
	for {
		var peers []postgres.PeerKeys
		err := c.pg.RecordKeys(ctx, c.replica, postgres.KeyPrints{Webhook: c.mine.WebhookSecret, Link: c.mine.LinkKey, Settings: settingsRecord(c.mine.Settings)}, c.lease,
			func(ps []postgres.PeerKeys) error {
				peers, compared = ps, len(ps)
				return keysAgree(c.replica, c.dataDir, c.mine, ps)
			})
		if err == nil {
			break
		}
		if !wait || !errors.Is(err, ErrRefused) {
			return err
		}
		d, gone := keysWait(c.replica, c.dataDir, c.mine, peers, first, c.renew*3/2, c.lease+time.Second-waited)
		if d <= 0 {
			return err
		}
		if len(first) == 0 {
			last := time.Duration(0)
			for _, p := range gone {
				last = max(last, p.Left)
			}
			c.log.Info("signing keys differ from replicas that have not beaten lately, and may be gone (a previous run of this one, say): "+
				"waiting for their leases to lapse before comparing again; a replica that beats meanwhile is live, and this one is refused",
				"replicas", replicaIDs(gone), "until", time.Now().Add(last+keysSlack).Round(time.Millisecond))
		}
		for _, p := range gone {
			if _, ok := first[p.Replica]; !ok {
				first[p.Replica] = p.Seen
			}
		}
		if err := c.sleep(ctx, d); err != nil {
			return err
		}
		waited += d
	}
	c.log.Info("signing keys agree with the live replicas' (webhook.secret, link.key, webhook_secrets, webhooks, public_url)", "compared", compared,
		"webhook_secret", strings.Join(c.mine.WebhookSecret, ","), "link_key", c.mine.LinkKey, "settings", settingsRecord(c.mine.Settings))
	return nil
}

func (c keyCheck) sleep(ctx context.Context, d time.Duration) error {
	if c.sleepFunc != nil {
		return c.sleepFunc(ctx, d)
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// keysWait decides, for a refusal by keysAgree over peers, whether the
// start may wait for the peers that refuse it to be found gone, and how
// long before it looks again. It may when each peer that disagrees on its
// own may be dead: it has not beaten since the check first waited for it
// (first holds their Seen then), and without those peers the rest agree.
// It looks again once each of them has been silent for quiet (a live
// replica beats every renewal interval: one that has not beaten for that
// long is likely gone), and once each of those that were silent that long
// has seen its lease lapse; it waits only for leases that lapse within
// within. It returns 0 for a refusal that stands (a peer that beat
// meanwhile is alive, or one whose lease lasts too long), and the peers
// it waits for.
func keysWait(replica, dataDir string, mine KeyFingerprints, peers []postgres.PeerKeys, first map[string]time.Time,
	quiet, within time.Duration) (time.Duration, []postgres.PeerKeys) {
	var differ, rest []postgres.PeerKeys
	for _, p := range peers {
		if keysAgree(replica, dataDir, mine, []postgres.PeerKeys{p}) != nil {
			differ = append(differ, p)
		} else {
			rest = append(rest, p)
		}
	}
	if len(differ) == 0 || keysAgree(replica, dataDir, mine, rest) != nil {
		return 0, nil
	}
	var next time.Duration
	for _, p := range differ {
		if seen, ok := first[p.Replica]; ok && p.Seen.After(seen) {
			return 0, nil // it beat: alive
		}
		if p.Left+keysSlack > within {
			return 0, nil
		}
		d := p.Left + keysSlack
		if p.Silent < quiet {
			d = quiet - p.Silent
		}
		if next == 0 || d < next {
			next = d
		}
	}
	return next, differ
}

func replicaIDs(peers []postgres.PeerKeys) []string {
	out := make([]string, len(peers))
	for i, p := range peers {
		out[i] = p.Replica
	}
	return out
}

// keysAgree is checkKeys' rule over the live peers' fingerprints (sorted
// by replica id): the refusal names this replica and the first peer it
// disagrees with, which of the two files and which settings differ (never
// their values), and what to do.
func keysAgree(replica, dataDir string, mine KeyFingerprints, peers []postgres.PeerKeys) error {
	common := slices.Clone(mine.WebhookSecret)
	var all []string
	for _, p := range peers {
		var differ, so, fix []string
		shared := slices.ContainsFunc(mine.WebhookSecret, func(f string) bool { return slices.Contains(p.Webhook, f) })
		if !shared {
			differ = append(differ, "shares no line of webhook.secret with it")
			so = append(so, "a webhook receiver set up with one's secret would refuse the other's webhooks")
		}
		if p.Link != mine.LinkKey {
			differ = append(differ, "has another link.key")
			so = append(so, "an unsubscribe link one mailed would answer 404 on the other")
		}
		what := "signing keys differ"
		if len(differ) > 0 {
			fix = append(fix, keysFix(dataDir, p.Replica))
		} else {
			what = "signing settings differ"
		}
		if names := settingsDiffer(mine.Settings, p.Settings); len(names) > 0 {
			differ = append(differ, "has other "+andList(names))
			for _, n := range names {
				so = append(so, settingsSo[n])
			}
			fix = append(fix, fmt.Sprintf("give this replica the same %s as %s (its configuration file, VIGIL_ environment or flags) and start it again",
				andList(names), strconv.Quote(p.Replica)))
		}
		if len(differ) > 0 {
			return refuse(nil, "%s from live replica %s: this replica (%s) %s, so %s; %s (see Running replicas in docs/operations.md)",
				what, strconv.Quote(p.Replica), strconv.Quote(replica), strings.Join(differ, " and "), strings.Join(so, ", and "), strings.Join(fix, "; and "))
		}
		common = slices.DeleteFunc(common, func(f string) bool { return !slices.Contains(p.Webhook, f) })
		all = append(all, strconv.Quote(p.Replica))
	}
	if len(common) == 0 && len(peers) > 0 {
		return refuse(nil, "signing keys differ from live replicas %s: no line of this replica's (%s) webhook.secret is in the webhook.secret of "+
			"every one of them, so a receiver set up with any one secret would refuse some replica's webhooks; %s (see Running replicas in docs/operations.md)",
			strings.Join(all, ", "), strconv.Quote(replica), keysFix(dataDir, peers[0].Replica))
	}
	return nil
}

// settingsSo says what a setting that differs between two replicas does.
var settingsSo = map[string]string{
	"webhook_secrets": "a receiver set up with a recipient's secret would refuse the webhooks one of them signs for it",
	"webhooks":        "a recipient's default webhook would go elsewhere depending on which replica holds the watch",
	"public_url":      "an unsubscribe link would point elsewhere depending on which replica mailed it",
}

// andList joins names: "a", "a and b", "a, b and c".
func andList(names []string) string {
	if len(names) < 2 {
		return strings.Join(names, "")
	}
	return strings.Join(names[:len(names)-1], ", ") + " and " + names[len(names)-1]
}

// keysFix says what to do about keys that differ.
func keysFix(dataDir, peer string) string {
	return fmt.Sprintf("give every replica the same files: copy %s and %s from the data dir of a running replica (%s) into %s, "+
		"and start this one again",
		WebhookSecretFile, LinkKeyFile, strconv.Quote(peer), filepath.Clean(dataDir))
}

// forgetKeys deletes replica's recorded fingerprints, for a start that
// failed or a daemon never run after its check: it took no shard, and
// must not count among the live replicas another one's start compares
// with. Best effort, for 2 s at most: they stop counting once its start
// window (a lease) ends anyway.
func forgetKeys(pg *postgres.Store, replica string) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_ = pg.ForgetKeys(ctx, replica)
}
