-- Schema 1 of the vigil SQLite store.
--
-- Times are INTEGER unix milliseconds UTC, durations INTEGER milliseconds,
-- JSON values TEXT. A NULL time or duration is the zero value.

-- +goose Up

-- counters has one row per recipient, created on its first watch, whose
-- pending is the number of that recipient's pending watches; the row of the
-- empty name, which no recipient has, holds the total. The store keeps them
-- in step with the watches in the same transaction as every create, settle,
-- cancel and close, so the caps never need a COUNT(*) scan.
CREATE TABLE counters (
    recipient  TEXT    NOT NULL PRIMARY KEY,
    pending    INTEGER NOT NULL,
    created_at INTEGER NOT NULL
) WITHOUT ROWID;

INSERT INTO counters (recipient, pending, created_at) VALUES ('', 0, 0);

CREATE TABLE watches (
    id                   TEXT    NOT NULL PRIMARY KEY,
    recipient            TEXT    NOT NULL,
    kind                 TEXT    NOT NULL,
    state                TEXT    NOT NULL,
    identity             ANY     NOT NULL,
    created_at           INTEGER NOT NULL,
    predicate            TEXT,
    mode                 TEXT,
    every_ms             INTEGER,
    deadline             INTEGER,
    start_at             INTEGER,
    settled_at           INTEGER,
    polls                INTEGER NOT NULL DEFAULT 0,
    standing             INTEGER NOT NULL DEFAULT 0,
    note                 TEXT,
    labels               TEXT,
    deliver              TEXT,
    stable               INTEGER,
    stable_for_ms        INTEGER,
    max_polls            INTEGER,
    max_errors           INTEGER,
    chain_depth          INTEGER,
    token_id             TEXT,
    answered_at_creation INTEGER NOT NULL DEFAULT 0,
    last_observation     TEXT,
    outcome              TEXT,
    receipts             TEXT
);

-- Identity is unique among pending watches (SPEC §3). A vigil.Identity (32
-- hex digits) is stored as its 16 bytes, a BLOB; anything else as TEXT.
CREATE UNIQUE INDEX watches_identity_pending ON watches (identity) WHERE state = 'pending';
-- Listing, newest first, overall and per recipient. Ties on created_at are
-- broken by id with a small sort, which keeps id out of these indexes.
CREATE INDEX watches_created ON watches (created_at);
CREATE INDEX watches_recipient ON watches (recipient, created_at);
-- Pruning settled watches; pending rows are not in it.
CREATE INDEX watches_settled ON watches (settled_at) WHERE settled_at IS NOT NULL;

-- The mailbox. AUTOINCREMENT: a seq is never reused, even after pruning the
-- newest message, so reader cursors stay valid.
CREATE TABLE messages (
    seq        INTEGER PRIMARY KEY AUTOINCREMENT,
    id         TEXT    NOT NULL,
    recipient  TEXT    NOT NULL,
    watch_id   TEXT,
    type       TEXT    NOT NULL,
    text       TEXT    NOT NULL,
    data       TEXT,
    created_at INTEGER NOT NULL
);

CREATE INDEX messages_recipient ON messages (recipient, seq);
CREATE INDEX messages_created ON messages (created_at);
-- A watch has at most one outcome message, ever: the mailbox is exactly-once.
-- (type IN ('fired', 'failed', 'expired', 'errored', 'cancelled'), spelled
-- with OR: SQLite evaluates a constant IN list of more than two items
-- through a temporary table built for every insert.)
CREATE UNIQUE INDEX messages_outcome ON messages (watch_id)
    WHERE type = 'fired' OR type = 'failed' OR type = 'expired' OR type = 'errored' OR type = 'cancelled';

-- Reader cursors: each named reader of a mailbox sees each message once.
CREATE TABLE readers (
    recipient TEXT    NOT NULL,
    reader    TEXT    NOT NULL,
    cursor    INTEGER NOT NULL,
    PRIMARY KEY (recipient, reader)
) WITHOUT ROWID;

-- The idempotency ledger: (recipient, key) -> the watch the request got.
CREATE TABLE idempotency (
    recipient    TEXT    NOT NULL,
    key          TEXT    NOT NULL,
    request_hash TEXT    NOT NULL,
    watch_id     TEXT    NOT NULL REFERENCES watches (id) ON DELETE CASCADE,
    existing     INTEGER NOT NULL DEFAULT 0,
    created_at   INTEGER NOT NULL,
    PRIMARY KEY (recipient, key)
) WITHOUT ROWID;

CREATE INDEX idempotency_watch ON idempotency (watch_id);
CREATE INDEX idempotency_created ON idempotency (created_at);

-- +goose Down
DROP TABLE idempotency;
DROP TABLE readers;
DROP TABLE messages;
DROP TABLE watches;
DROP TABLE counters;
