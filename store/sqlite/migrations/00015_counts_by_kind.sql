-- Schema 15 of the vigil SQLite store: watch_counts holds one row for
-- each recipient and kind, with a column for each state, instead of one
-- row for each recipient, state and kind (issue #18). A settlement moves a
-- watch from pending to its end within one row: one upsert where it was
-- two, on pages of their own when recipients are many (a storm's watches
-- each with its own recipient moved 40 000 rows for 20 000 watches).
-- Registrations still write one row. What the table answers is the same:
-- how many watches each recipient has in each state and kind.
--
-- From this schema on, a settled watch's last_observation may also hold
-- '=' (not JSON): its last observation is its outcome's, which a
-- settlement stores once, in the outcome, not twice (store/sqlite
-- observationInOutcome). A build that knows only schema 14 refuses the
-- database as newer, so none reads '=' as a broken observation.

-- +goose Up

CREATE TABLE watch_counts_by_kind (
    recipient   TEXT    NOT NULL,
    kind        TEXT    NOT NULL,
    pending     INTEGER NOT NULL DEFAULT 0,
    fired       INTEGER NOT NULL DEFAULT 0,
    failed      INTEGER NOT NULL DEFAULT 0,
    expired     INTEGER NOT NULL DEFAULT 0,
    cancelled   INTEGER NOT NULL DEFAULT 0,
    errored     INTEGER NOT NULL DEFAULT 0,
    unwatchable INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (recipient, kind)
) WITHOUT ROWID;

-- Taken again from the watches, not from the old rows: what is counted is
-- what exists.
INSERT INTO watch_counts_by_kind (recipient, kind, pending, fired, failed, expired, cancelled, errored, unwatchable)
    SELECT recipient, kind,
        sum(state = 'pending'), sum(state = 'fired'), sum(state = 'failed'), sum(state = 'expired'),
        sum(state = 'cancelled'), sum(state = 'errored'), sum(state = 'unwatchable')
    FROM watches GROUP BY recipient, kind;

DROP TABLE watch_counts;
ALTER TABLE watch_counts_by_kind RENAME TO watch_counts;

-- +goose Down

CREATE TABLE watch_counts_by_state (
    recipient TEXT    NOT NULL,
    state     TEXT    NOT NULL,
    kind      TEXT    NOT NULL,
    n         INTEGER NOT NULL,
    PRIMARY KEY (recipient, state, kind)
) WITHOUT ROWID;

INSERT INTO watch_counts_by_state (recipient, state, kind, n)
    SELECT recipient, state, kind, count(*) FROM watches GROUP BY recipient, state, kind;

DROP TABLE watch_counts;
ALTER TABLE watch_counts_by_state RENAME TO watch_counts;
