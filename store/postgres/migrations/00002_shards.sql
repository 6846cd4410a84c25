-- Schema 2: shards, leases and fencing, for several replicas on one
-- database (see docs/architecture.md, "Replicas").
--
-- Every watch belongs to one of a fixed number of shards, 64, fixed here
-- once and recorded in meta: its shard is a stable hash of its id (the
-- first two bytes of its MD5, mod 64), computed by the database for every
-- row, old and new, so no writer can get it wrong. The Go side computes the
-- same (postgres.ShardOf), and a test holds the two equal.
--
-- Old replicas tolerate this schema: they never name the new columns, and
-- the new tables are only read by replicas that know them.

-- +goose Up

CREATE TABLE meta (
    key   TEXT   NOT NULL PRIMARY KEY,
    value BIGINT NOT NULL
);

INSERT INTO meta (key, value) VALUES ('shards', 64);

ALTER TABLE watches
    ADD COLUMN shard SMALLINT GENERATED ALWAYS AS
        (((get_byte(decode(md5(id), 'hex'), 0) * 256 + get_byte(decode(md5(id), 'hex'), 1)) % 64)::smallint) STORED,
    -- The database's clock when the row was inserted, for the repair scan
    -- of a shard's newest rows (a notification lost).
    ADD COLUMN inserted_at TIMESTAMPTZ NOT NULL DEFAULT clock_timestamp(),
    -- The replica whose settling write won (NULL on one daemon, or for a
    -- watch cancelled through the API).
    ADD COLUMN settled_by TEXT;

-- A shard's pending watches (when a replica gains it), and those inserted
-- since a given instant (the repair scan): both lead with the shard.
CREATE INDEX watches_shard_pending ON watches (shard, inserted_at) WHERE state = 'pending';

-- One row per shard: who holds it (NULL: nobody) and the epoch of that
-- holding (raised by each acquisition, so a write fenced on it fails for a
-- holder that lost the shard even if it got it back later). A fenced write
-- holds a share lock on the rows of its shards until it commits, so a
-- takeover (which updates the row, skipping locked ones) never overlaps it.
CREATE TABLE leases (
    shard SMALLINT NOT NULL PRIMARY KEY,
    owner TEXT,
    epoch BIGINT   NOT NULL DEFAULT 0
);

INSERT INTO leases (shard) SELECT g FROM generate_series(0, 63) AS g;

-- When each shard's lease lapses, by the database's clock, apart from
-- leases: a renewal updates only this row, so it never waits for the
-- fenced writes holding the lease row.
CREATE TABLE lease_expiry (
    shard      SMALLINT    NOT NULL PRIMARY KEY,
    expires_at TIMESTAMPTZ NOT NULL DEFAULT '-infinity'
);

INSERT INTO lease_expiry (shard) SELECT g FROM generate_series(0, 63) AS g;

-- Replicas say they are alive here at every renewal; the fair share of
-- shards is the shard count over the replicas seen within one lease.
CREATE TABLE replicas (
    id         TEXT        NOT NULL PRIMARY KEY,
    seen_at    TIMESTAMPTZ NOT NULL,
    started_at TIMESTAMPTZ NOT NULL
);

-- +goose Down
DROP TABLE replicas;
DROP TABLE lease_expiry;
DROP TABLE leases;
DROP INDEX watches_shard_pending;
ALTER TABLE watches DROP COLUMN settled_by, DROP COLUMN inserted_at, DROP COLUMN shard;
DROP TABLE meta;
