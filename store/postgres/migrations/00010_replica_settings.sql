-- Schema 10 of the vigil PostgreSQL store: beside the fingerprints of each
-- replica's signing keys (schema 9), one of the rest of its signing
-- configuration, compared at start the same way.
--
-- webhook_secrets (each recipient's signing secret), webhooks (the
-- recipients' default webhooks) and public_url (the base of unsubscribe
-- links) come from each replica's own configuration, and must be the same
-- on every replica as webhook.secret and link.key must: a watch's webhook
-- goes out from whichever replica holds its shard, and a link is followed
-- to any replica. A replica records here a digest of each (sorted by
-- recipient, each secret fingerprinted as webhook.secret's lines are,
-- public_url normalised), three 16-hex-digit digests joined by dots, and
-- a replica whose settings differ from a live replica's refuses to start,
-- naming the setting (daemon, checkKeys).
--
-- Nullable and additive: a replica of the build before (schema 9) names
-- the columns it writes and reads, so it records NULL here and is not
-- compared on its settings; it goes on beside replicas of this build.

-- +goose Up
ALTER TABLE replica_keys ADD COLUMN settings TEXT;

-- +goose Down
ALTER TABLE replica_keys DROP COLUMN settings;
