package daemon

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"log/slog"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/vigil-run/vigil/deliver"
	"github.com/vigil-run/vigil/store/postgres"
)

// KeyFingerprints name the daemon's signing material without showing it:
// a short digest of each line of <data_dir>/webhook.secret, in the file's
// order, and one of <data_dir>/link.key. Two daemons whose fingerprints
// match sign alike. Replicas on one PostgreSQL database compare them at
// start (checkKeys); GET /v1/daemon shows them to the admin.
type KeyFingerprints struct {
	WebhookSecret []string `json:"webhook_secret"`
	LinkKey       string   `json:"link_key"`
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
// (as ensureWebhookSecrets read them: each line a valid secret) and link
// key.
func keyFingerprints(secrets []string, linkKey []byte) (KeyFingerprints, error) {
	out := KeyFingerprints{LinkKey: fingerprint("link.key", linkKey)}
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
func checkKeys(ctx context.Context, pg *postgres.Store, cfg Config, replica string, mine KeyFingerprints, log *slog.Logger) error {
	lease, _ := cfg.leases()
	var compared int
	err := pg.RecordKeys(ctx, replica, postgres.KeyPrints{Webhook: mine.WebhookSecret, Link: mine.LinkKey}, lease,
		func(peers []postgres.PeerKeys) error {
			compared = len(peers)
			return keysAgree(replica, cfg.DataDir, mine, peers)
		})
	if err != nil {
		return err
	}
	log.Info("signing keys agree with the live replicas' (webhook.secret, link.key)", "compared", compared,
		"webhook_secret", strings.Join(mine.WebhookSecret, ","), "link_key", mine.LinkKey)
	return nil
}

// keysAgree is checkKeys' rule over the live peers' fingerprints (sorted
// by replica id): the refusal names this replica and the first peer it
// disagrees with, which of the two files differ, and what to do.
func keysAgree(replica, dataDir string, mine KeyFingerprints, peers []postgres.PeerKeys) error {
	common := slices.Clone(mine.WebhookSecret)
	var all []string
	for _, p := range peers {
		var differ, so []string
		shared := slices.ContainsFunc(mine.WebhookSecret, func(f string) bool { return slices.Contains(p.Webhook, f) })
		if !shared {
			differ = append(differ, "shares no line of webhook.secret with it")
			so = append(so, "a webhook receiver set up with one's secret would refuse the other's webhooks")
		}
		if p.Link != mine.LinkKey {
			differ = append(differ, "has another link.key")
			so = append(so, "an unsubscribe link one mailed would answer 404 on the other")
		}
		if len(differ) > 0 {
			return refuse(nil, "signing keys differ from live replica %s: this replica (%s) %s, so %s; %s",
				strconv.Quote(p.Replica), strconv.Quote(replica), strings.Join(differ, " and "), strings.Join(so, ", and "), keysFix(dataDir, p.Replica))
		}
		common = slices.DeleteFunc(common, func(f string) bool { return !slices.Contains(p.Webhook, f) })
		all = append(all, strconv.Quote(p.Replica))
	}
	if len(common) == 0 && len(peers) > 0 {
		return refuse(nil, "signing keys differ from live replicas %s: no line of this replica's (%s) webhook.secret is in the webhook.secret of "+
			"every one of them, so a receiver set up with any one secret would refuse some replica's webhooks; %s",
			strings.Join(all, ", "), strconv.Quote(replica), keysFix(dataDir, peers[0].Replica))
	}
	return nil
}

// keysFix says what to do about keys that differ.
func keysFix(dataDir, peer string) string {
	return fmt.Sprintf("give every replica the same files: copy %s and %s from the data dir of a running replica (%s) into %s, "+
		"and start this one again (see Running replicas in docs/operations.md)",
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
