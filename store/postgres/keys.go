package postgres

import (
	"context"
	"errors"
	"hash/fnv"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
)

// KeyPrints are the fingerprints of a replica's signing material: a short
// digest of each of its webhook signing secrets, in its file's order, one
// of its link key, and one of the rest of its signing configuration and
// of the other settings replicas must share (the daemon makes them; the
// store only keeps strings). Never the secrets themselves.
type KeyPrints struct {
	Webhook []string
	Link    string
	// Settings is empty for a replica of a build before schema 10,
	// which records none. A later build records more digests, after
	// those of the builds before (the daemon compares those both hold).
	Settings string
}

// PeerKeys are the fingerprints a live replica recorded, and how recently
// it was heard of, by the database's clock.
type PeerKeys struct {
	Replica string
	KeyPrints
	// Seen is its last heartbeat since it recorded its fingerprints, or
	// the recording when it has not beaten since: a later Seen for the
	// same replica is a sign of life.
	Seen time.Time
	// Silent is how long ago Seen was, and Left how long it goes on
	// counting as live without another heartbeat (its lease, or its
	// start window), when the check ran.
	Silent, Left time.Duration
}

// keysForget is how long the row of a replica that never beat, or whose
// replicas row is gone, is kept after its start window: far longer than
// any start takes between its check and its first heartbeat.
const keysForget = time.Hour

// RecordKeys compares replica's fingerprints with those of the other live
// replicas and records them, in one transaction under an advisory lock of
// this schema, so that replicas starting together compare with each
// other: check is called with the live replicas that recorded
// fingerprints (sorted by id, this replica left out), and an error from it
// records nothing and is returned as it is. A replica is live here while
// its lease has not lapsed, by the database's clock, once it has beaten
// since it recorded its fingerprints, and for window (its lease) from the
// recording before that: a replica that passed its check counts from then
// on, before its first heartbeat. A replica of a build before schema 9
// records nothing and is never compared; one of schema 9 records no
// settings (KeyPrints.Settings empty). Rows of replicas gone for long are
// deleted on the way.
func (s *Store) RecordKeys(ctx context.Context, replica string, prints KeyPrints, window time.Duration, check func(peers []PeerKeys) error) error {
	h := fnv.New64a()
	h.Write([]byte("vigil replica keys " + s.schema))
	key := int64(h.Sum64())
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, key); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `DELETE FROM replica_keys AS k
			WHERE k.start_until < now() - $1::interval AND NOT EXISTS (SELECT FROM replicas AS r WHERE r.id = k.replica)`, keysForget); err != nil {
			return err
		}
		rows, err := tx.Query(ctx, peerKeysSQL, replica, window)
		if err != nil {
			return err
		}
		peers, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (PeerKeys, error) {
			var p PeerKeys
			var silent, left float64
			err := r.Scan(&p.Replica, &p.Webhook, &p.Link, &p.Settings, &p.Seen, &silent, &left)
			p.Seen = p.Seen.UTC()
			p.Silent, p.Left = seconds(silent), seconds(left)
			return p, err
		})
		if err != nil {
			return err
		}
		if err := check(peers); err != nil {
			return &checkErr{err}
		}
		_, err = tx.Exec(ctx, `INSERT INTO replica_keys (replica, webhook, link, settings, recorded_at, start_until)
			VALUES ($1, $2, $3, nullif($5, ''), now(), now() + $4::interval)
			ON CONFLICT (replica) DO UPDATE SET webhook = EXCLUDED.webhook, link = EXCLUDED.link, settings = EXCLUDED.settings,
				recorded_at = EXCLUDED.recorded_at, start_until = EXCLUDED.start_until`,
			replica, nonNil(prints.Webhook), prints.Link, window, prints.Settings)
		return err
	})
	if ce := (*checkErr)(nil); errors.As(err, &ce) {
		return ce.err
	}
	return wrap("record the signing keys' fingerprints", err)
}

// checkErr carries RecordKeys' check's refusal past wrap.
type checkErr struct{ err error }

func (c *checkErr) Error() string { return c.err.Error() }

// peerKeysSQL reads the fingerprints of the live replicas but $1 (see
// RecordKeys), with when each was last heard of (PeerKeys.Seen, Silent,
// Left); $2 is the lease.
var peerKeysSQL = `WITH ` + locksSQL + `
	SELECT k.replica, k.webhook, k.link, coalesce(k.settings, ''), v.seen,
		extract(epoch FROM now() - v.seen)::float8, extract(epoch FROM v.until - now())::float8
	FROM replica_keys AS k LEFT JOIN replicas AS r ON r.id = k.replica
		CROSS JOIN LATERAL (` + keysWindow(`r.lock_key IN (SELECT key FROM locks)`, `$2::interval`) + `) AS v
	WHERE k.replica <> $1 AND v.until > now()
	ORDER BY k.replica`

// keysWindow says, of the replica of the row k of replica_keys joined to
// its row r of replicas, when it was last heard of (seen) and until when
// it counts as live for RecordKeys (until): while its lease session lives
// (the condition held: it holds its lease, schema 13), now and a lease
// from now; otherwise its lease decides once it has beaten since it
// recorded its fingerprints (its replicas row may also be a previous run's
// under the same id, older than the recording), its start window before.
// The heartbeat asks it of the replica itself (Peers.Unchecked).
func keysWindow(held, lease string) string {
	return `SELECT CASE WHEN ` + held + ` THEN now() WHEN r.seen_at >= k.recorded_at THEN r.seen_at ELSE k.recorded_at END AS seen,
		CASE WHEN ` + held + ` THEN now() + ` + lease + ` WHEN r.seen_at >= k.recorded_at THEN r.lease_until ELSE k.start_until END AS until`
}

// seconds converts the database's seconds into a Duration.
func seconds(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }

// ForgetKeys deletes replica's fingerprints (a replica that stops, or
// whose start failed after it recorded them). Leave does the same.
func (s *Store) ForgetKeys(ctx context.Context, replica string) error {
	_, err := s.pool.Exec(ctx, `DELETE FROM replica_keys WHERE replica = $1`, replica)
	return wrap("forget the signing keys' fingerprints", err)
}

func nonNil(ss []string) []string {
	if ss == nil {
		return []string{}
	}
	return slices.Clone(ss)
}
