-- Schema 9 of the vigil PostgreSQL store: the fingerprints of each
-- replica's signing material, so that a replica whose webhook secrets or
-- link key disagree with the live replicas' refuses to start.
--
-- Each replica keeps its own data dir, and with it the daemon's webhook
-- signing secrets (webhook.secret, one per line, each signing) and the key
-- of the unsubscribe links of delivery mails (link.key). A receiver set up
-- with one replica's secret refused, for good, every webhook another
-- replica signed (a shard moves, and the same watch's retry goes out from
-- there), and an unsubscribe link made by one replica answered 404 on
-- another. A replica records here, at its start, a short digest of each
-- line of its webhook.secret and one of its link.key (never the secrets:
-- the first 16 hex digits of a SHA-256 under a fixed prefix), after
-- comparing its own with those of the replicas live then, under an
-- advisory lock so that two that start together compare with each other
-- (daemon, checkKeys; store/postgres, RecordKeys).
--
-- A replica is live for this check while its lease has not lapsed
-- (replicas.lease_until, as the lease code has it) once it has beaten
-- since it recorded its row, and until start_until before that: between
-- its check and its first heartbeat. The row is written once per start
-- (the files are read once, at the start), never by a renewal, and
-- deleted when the replica leaves. Additive: an older build never names
-- the table, records nothing, and is not compared.

-- +goose Up
CREATE TABLE replica_keys (
    replica     TEXT        NOT NULL PRIMARY KEY,
    -- One fingerprint per line of webhook.secret, in the file's order.
    webhook     TEXT[]      NOT NULL,
    -- The fingerprint of link.key.
    link        TEXT        NOT NULL,
    -- When the row was written, by the database's clock.
    recorded_at TIMESTAMPTZ NOT NULL,
    -- Until when the replica counts as live if it has not beaten since.
    start_until TIMESTAMPTZ NOT NULL
);

-- +goose Down
DROP TABLE replica_keys;
