-- Schema 6 of the vigil PostgreSQL store: one lease per replica (issue
-- #16, the idle cost of replicas). Numbered 6 because 5 is taken by
-- another change.
--
-- Until schema 5 each shard's lease lapsed on its own (lease_expiry), so
-- a replica's renewal rewrote one row per shard it held (about 21 of 64
-- with 3 replicas, every 5 s). From this schema a replica that knows it
-- holds its shards on one lease, its own row's lease_until: a renewal
-- rewrites that one row (the same row as its heartbeat), and the leases
-- rows (holder and epoch) change only when a shard changes hands. A
-- settling write is fenced on its shard's holder and epoch (leases, FOR
-- SHARE) and on the holder's lease_until not having lapsed by the
-- database's clock, in one statement (store/postgres, fenceShards).
--
-- lease_expiry stays: a shard whose holder's lease_until is NULL (a
-- replica of an older build, which never writes it) or that nobody holds
-- lapses there, as before; a released shard lapses there at its release.
-- While a replica of an older build is live, the newer ones renew their
-- shards' lease_expiry rows too, so the older one sees them held and
-- never takes them. Additive: an older build never names lease_until.

-- +goose Up
ALTER TABLE replicas ADD COLUMN lease_until TIMESTAMPTZ;

-- +goose Down
ALTER TABLE replicas DROP COLUMN lease_until;
