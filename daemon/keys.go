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
	"github.com/vigil-run/vigil/forge"
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

// sharedNames are the rest of the settings every replica must share
// (docs/operations.md, Running replicas): each replica applies its own to
// the registrations it answers and to the watches of the shards it
// holds, so one that differs behaves otherwise for them. Their digests
// (sharedFingerprints) follow the signing settings' in a replica's
// record, in this order. Only ever append: a replica compares the digests
// both records hold, by position, so a build that records more is
// compared with an older one on what the older one records.
var sharedNames = [...]string{
	"min_every", "max_deadline", "max_active", "max_active_per_recipient",
	"register_rate", "register_burst", "deny_private", "roots", "allow_exec",
	"forges.github", "forges.gitea", "forges.gitlab", "smtp",
}

// SharedFingerprints are the digests of the settings of sharedNames, in
// that order.
type SharedFingerprints [len(sharedNames)]string

// replicaPrints are what a replica records and compares with the live
// replicas' (checkKeys): the fingerprints of its signing keys and
// settings, which GET /v1/daemon shows, and those of the rest of the
// settings every replica must share.
type replicaPrints struct {
	KeyFingerprints
	Shared SharedFingerprints
}

// recordNames are the names of the digests of a settings record, in its
// order: the signing settings', then the shared ones'.
var recordNames = slices.Concat(settingNames[:], sharedNames[:])

func settingsParts(p replicaPrints) []string {
	s := p.Settings
	return slices.Concat([]string{s.WebhookSecrets, s.Webhooks, s.PublicURL}, p.Shared[:])
}

// settingsRecord is the one fingerprint of the settings a replica records
// (postgres.KeyPrints.Settings): the digests, in recordNames' order,
// joined by dots. A build before the shared settings' check records the
// first three alone.
func settingsRecord(p replicaPrints) string {
	return strings.Join(settingsParts(p), ".")
}

// settingsDiffer names the settings whose digests in p differ from those
// of a peer's record, comparing only the digests both hold: none when it
// recorded none (a build before schema 10), the signing settings alone
// when it recorded only theirs (a build before the shared settings'
// check), and the first len(recordNames) of a later build's that records
// more. So a rolling upgrade never refuses a replica for what the other
// does not record.
func settingsDiffer(p replicaPrints, record string) []string {
	if record == "" {
		return nil
	}
	theirs := strings.Split(record, ".")
	var out []string
	for i, mine := range settingsParts(p) {
		if i >= len(theirs) {
			break
		}
		if theirs[i] != mine {
			out = append(out, recordNames[i])
		}
	}
	return out
}

// sharedFingerprints returns the digests of the shared settings of cfg
// (validated), each spelt as the daemon applies it: roots as a set
// (cleaned, sorted, each once: a path is admitted inside any of them),
// URLs as normalURL, a forge that is off (no URL) or email that is off
// (no smtp.host) whatever its other keys, smtp.port with its default. A
// forge's token and smtp.password count only as given or not, never by
// their value: a digest would let no replica start beside the others
// while a token is rotated one replica at a time, and a token that is
// set but wrong differs from none the comparison could see either.
func sharedFingerprints(cfg Config) SharedFingerprints {
	l := cfg.Limits
	roots := make([]string, 0, len(cfg.Roots))
	for _, r := range cfg.Roots {
		roots = append(roots, filepath.Clean(r))
	}
	slices.Sort(roots)
	roots = slices.Compact(roots)
	endpoint := func(e forge.Endpoint) any {
		if strings.TrimSpace(e.URL) == "" {
			return nil
		}
		return []any{normalURL(e.URL), e.Token != "", e.Login}
	}
	var smtp any
	if s := cfg.Delivery.SMTP; s.Host != "" {
		smtp = []any{strings.ToLower(s.Host), s.port(), s.User, s.Password != "", s.From, !s.NoStartTLS, s.implicitTLS()}
	}
	values := [len(sharedNames)]any{
		int64(l.MinEvery), int64(l.MaxDeadline), l.MaxActive, l.MaxActivePerRecipient,
		cfg.RegisterRate, cfg.RegisterBurst, cfg.DenyPrivate, roots, cfg.AllowExec,
		endpoint(cfg.Forges.GitHub), endpoint(cfg.Forges.Gitea), endpoint(cfg.Forges.GitLab), smtp,
	}
	var out SharedFingerprints
	for i, v := range values {
		// JSON: one encoding for one value.
		b, _ := json.Marshal(v)
		out[i] = fingerprint(sharedNames[i], b)
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
// It also refuses unless the digests of its signing settings and of the
// other settings every replica must share (sharedNames) are theirs, on
// those both recorded (settingsDiffer): each replica applies its own to
// the shards it holds and the requests it answers.
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
// manager's steps go on, and it is refused at once. A start also waits,
// trying again every second for startUnavailable at most, while the
// database answers unavailable (restarting, failing over).
func checkKeys(ctx context.Context, pg *postgres.Store, cfg Config, replica string, mine replicaPrints, log *slog.Logger, wait bool) error {
	lease, renew := cfg.leases()
	return keyCheck{pg: pg, replica: replica, dataDir: cfg.DataDir, mine: mine, lease: lease, renew: renew, log: log}.run(ctx, wait)
}

// keyCheck is checkKeys' comparison.
type keyCheck struct {
	pg           *postgres.Store
	replica      string
	dataDir      string
	mine         replicaPrints
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
		record := func() error {
			return c.pg.RecordKeys(ctx, c.replica, postgres.KeyPrints{Webhook: c.mine.WebhookSecret, Link: c.mine.LinkKey, Settings: settingsRecord(c.mine)}, c.lease,
				func(ps []postgres.PeerKeys) error {
					peers, compared = ps, len(ps)
					return keysAgree(c.replica, c.dataDir, c.mine, ps)
				})
		}
		var err error
		if wait {
			// The database restarting as this replica starts: tried
			// again rather than the start failing.
			err = untilAvailable(ctx, c.log, "comparing signing keys with the live replicas", c.sleepFunc, record)
		} else {
			err = record()
		}
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
	c.log.Info("signing keys and settings agree with the live replicas' (webhook.secret, link.key, "+strings.Join(recordNames, ", ")+")", "compared", compared,
		"webhook_secret", strings.Join(c.mine.WebhookSecret, ","), "link_key", c.mine.LinkKey, "settings", settingsRecord(c.mine))
	return nil
}

func (c keyCheck) sleep(ctx context.Context, d time.Duration) error {
	if c.sleepFunc != nil {
		return c.sleepFunc(ctx, d)
	}
	return sleepErr(ctx, d)
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
func keysWait(replica, dataDir string, mine replicaPrints, peers []postgres.PeerKeys, first map[string]time.Time,
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
func keysAgree(replica, dataDir string, mine replicaPrints, peers []postgres.PeerKeys) error {
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
		names := settingsDiffer(mine, p.Settings)
		what := "signing keys differ"
		switch {
		case len(differ) > 0:
			fix = append(fix, keysFix(dataDir, p.Replica))
		case slices.ContainsFunc(names, func(n string) bool { return slices.Contains(settingNames[:], n) }):
			what = "signing settings differ"
		default:
			what = "settings differ"
		}
		if len(names) > 0 {
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
	"min_every": "a watch's shortest interval would be allowed or refused depending on which replica answers its registration, " +
		"and a schedule's checked otherwise depending on which one holds it",
	"max_deadline":             "a watch's deadline would be allowed or refused depending on which replica answers its registration",
	"max_active":               "the cap on pending watches would depend on which replica answers a registration",
	"max_active_per_recipient": "a recipient's cap on pending watches would depend on which replica answers a registration",
	"register_rate":            "a token's registrations would be limited otherwise depending on which replica answers them",
	"register_burst":           "a token's registrations would be limited otherwise depending on which replica answers them",
	"deny_private":             "an http or tcp probe to a private address would be made or refused depending on which replica holds its watch",
	"roots":                    "a file or folder watch would be allowed or refused depending on which replica answers or holds it",
	"allow_exec": "a command, run or schedule watch, or a command delivery, would be run or refused (undeliverable) " +
		"depending on which replica answers or holds it",
	"forges.github": "a ci or ticket watch on GitHub would be read otherwise depending on which replica holds it",
	"forges.gitea":  "a ci or ticket watch on Gitea would be read otherwise depending on which replica holds it",
	"forges.gitlab": "a ci or ticket watch on GitLab would be read otherwise depending on which replica holds it",
	"smtp":          "a watch's email would be sent otherwise, or recorded undeliverable, depending on which replica holds it",
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
