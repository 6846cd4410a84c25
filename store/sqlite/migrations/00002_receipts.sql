-- Schema 2: push delivery receipts (SPEC §5).
--
-- One row per (watch, channel). The dispatcher writes "sending" before each
-- attempt leaves, so a crash mid-send is found at start-up and read back as
-- "unknown". The watch's own receipts column holds the same receipts as
-- JSON, rewritten with every change in the same transaction, so reading a
-- watch (or a page of them) needs no join.

-- +goose Up
CREATE TABLE receipts (
    watch_id   TEXT    NOT NULL REFERENCES watches (id) ON DELETE CASCADE,
    channel    TEXT    NOT NULL,
    message_id TEXT    NOT NULL,
    status     TEXT    NOT NULL,
    attempts   INTEGER NOT NULL DEFAULT 0,
    detail     TEXT,
    next_at    INTEGER,
    updated_at INTEGER NOT NULL,
    PRIMARY KEY (watch_id, channel)
) WITHOUT ROWID;

-- Start-up finds the receipts left sending or retrying without a scan.
CREATE INDEX receipts_open ON receipts (status) WHERE status = 'sending' OR status = 'retrying';

-- +goose Down
DROP TABLE receipts;
