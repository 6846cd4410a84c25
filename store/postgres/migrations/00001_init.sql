-- Schema 1 of the vigil PostgreSQL store: the tables of SQLite's schemas
-- 1 to 6 in one step.
--
-- Times are BIGINT unix milliseconds UTC and durations BIGINT milliseconds,
-- as in the SQLite store, so both round-trip at millisecond precision. JSON
-- values are TEXT, kept byte for byte as they were given (jsonb would
-- rewrite them). A NULL time, duration or count is the zero value.

-- +goose Up

-- counters has one row per recipient, created on its first watch, whose
-- pending is the number of that recipient's pending watches. Every create,
-- settle, cancel and close moves it in its own transaction; the
-- per-recipient cap is a conditional increment of that row
-- (... WHERE pending < cap), which PostgreSQL re-checks under the row lock,
-- so it holds under concurrent writers in any number of processes.
CREATE TABLE counters (
    recipient  TEXT   NOT NULL PRIMARY KEY,
    pending    BIGINT NOT NULL CHECK (pending >= 0),
    created_at BIGINT NOT NULL
);

-- totals holds the number of pending watches as the sum of 64 stripes, so
-- that concurrent registrations do not all wait on one row: a watch counts
-- in the stripe of its id's hash. A stripe alone may go below zero; the
-- sum never does. The global cap is checked against the sum: see the
-- store's capKey for why that holds under concurrent writers.
CREATE TABLE totals (
    stripe  INTEGER NOT NULL PRIMARY KEY,
    pending BIGINT  NOT NULL
);

INSERT INTO totals (stripe, pending) SELECT g, 0 FROM generate_series(0, 63) AS g;

CREATE TABLE watches (
    id                   TEXT     NOT NULL PRIMARY KEY,
    recipient            TEXT     NOT NULL,
    kind                 TEXT     NOT NULL,
    state                TEXT     NOT NULL,
    identity             TEXT     NOT NULL,
    created_at           BIGINT   NOT NULL,
    predicate            TEXT,
    mode                 TEXT,
    every_ms             BIGINT,
    deadline             BIGINT,
    start_at             BIGINT,
    settled_at           BIGINT,
    polls                BIGINT   NOT NULL DEFAULT 0,
    standing             BOOLEAN  NOT NULL DEFAULT false,
    note                 TEXT,
    labels               TEXT,
    deliver              TEXT,
    stable               BIGINT,
    stable_for_ms        BIGINT,
    max_polls            BIGINT,
    max_errors           BIGINT,
    chain_depth          BIGINT,
    token_id             TEXT,
    answered_at_creation BOOLEAN  NOT NULL DEFAULT false,
    last_observation     TEXT,
    outcome              TEXT,
    receipts             TEXT,
    errors               BIGINT,
    consecutive_errors   BIGINT,
    checked_at           BIGINT
);

-- Identity is unique among pending watches (SPEC §3): a concurrent
-- registration of the same thing, from any replica, loses on this index
-- and finds the winner's watch.
CREATE UNIQUE INDEX watches_identity_pending ON watches (identity) WHERE state = 'pending';
-- Listing, newest first, overall and per recipient.
CREATE INDEX watches_created ON watches (created_at, id);
CREATE INDEX watches_recipient ON watches (recipient, created_at, id);
CREATE INDEX watches_pending_created ON watches (created_at, id) WHERE state = 'pending';
-- Pruning settled watches; pending rows are not in it.
CREATE INDEX watches_settled ON watches (settled_at) WHERE settled_at IS NOT NULL;

-- The mailbox. A seq is never reused. Every transaction that appends a
-- message takes one advisory transaction lock first (see the store's
-- messageLock), so seqs become visible in their order: a reader's cursor
-- never passes a message that commits later with a smaller seq.
CREATE TABLE messages (
    seq        BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    id         TEXT   NOT NULL,
    recipient  TEXT   NOT NULL,
    watch_id   TEXT,
    type       TEXT   NOT NULL,
    text       TEXT   NOT NULL,
    data       TEXT,
    created_at BIGINT NOT NULL
);

CREATE INDEX messages_recipient ON messages (recipient, seq);
CREATE INDEX messages_created ON messages (created_at);
CREATE INDEX messages_watch ON messages (watch_id);
-- A watch has at most one outcome message, ever: the mailbox is exactly-once.
CREATE UNIQUE INDEX messages_outcome ON messages (watch_id)
    WHERE type IN ('fired', 'failed', 'expired', 'errored', 'cancelled');

-- Reader cursors: each named reader of a mailbox sees each message once.
CREATE TABLE readers (
    recipient TEXT   NOT NULL,
    reader    TEXT   NOT NULL,
    cursor    BIGINT NOT NULL,
    PRIMARY KEY (recipient, reader)
);

-- The idempotency ledger: (recipient, key) -> the watch the request got.
CREATE TABLE idempotency (
    recipient    TEXT    NOT NULL,
    key          TEXT    NOT NULL,
    request_hash TEXT    NOT NULL,
    watch_id     TEXT    NOT NULL REFERENCES watches (id) ON DELETE CASCADE,
    existing     BOOLEAN NOT NULL DEFAULT false,
    created_at   BIGINT  NOT NULL,
    PRIMARY KEY (recipient, key)
);

CREATE INDEX idempotency_watch ON idempotency (watch_id);
CREATE INDEX idempotency_created ON idempotency (created_at);

-- Push delivery receipts (SPEC §5): one row per (watch, channel); the
-- watch's receipts column holds the same as JSON, rewritten in the same
-- transaction.
CREATE TABLE receipts (
    watch_id   TEXT   NOT NULL REFERENCES watches (id) ON DELETE CASCADE,
    channel    TEXT   NOT NULL,
    message_id TEXT   NOT NULL,
    status     TEXT   NOT NULL,
    attempts   BIGINT NOT NULL DEFAULT 0,
    detail     TEXT,
    next_at    BIGINT,
    updated_at BIGINT NOT NULL,
    PRIMARY KEY (watch_id, channel)
);

CREATE INDEX receipts_open ON receipts (status) WHERE status IN ('sending', 'retrying');

-- Scoped API tokens (SPEC §9), kept as the hex SHA-256 of the plaintext.
-- recipients and kinds are JSON arrays of strings.
CREATE TABLE tokens (
    id         TEXT    NOT NULL PRIMARY KEY,
    hash       TEXT    NOT NULL UNIQUE,
    recipients TEXT    NOT NULL,
    kinds      TEXT,
    exec       BOOLEAN NOT NULL DEFAULT false,
    created_at BIGINT  NOT NULL,
    expires_at BIGINT,
    revoked_at BIGINT
);

-- +goose Down
DROP TABLE tokens;
DROP TABLE receipts;
DROP TABLE idempotency;
DROP TABLE readers;
DROP TABLE messages;
DROP TABLE watches;
DROP TABLE totals;
DROP TABLE counters;
