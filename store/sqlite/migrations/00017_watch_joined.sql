-- Schema 17 of the vigil SQLite store: watches.joined, set by a
-- registration answered with a pending watch as existing (WatchJoin). A
-- registration that waits for its new watch's first observation (observe)
-- may take the answer to itself when that observation settles the watch
-- (answered at creation, nothing mailed); a settlement reads this column
-- with the watch's state, in the one writer, and mails the outcome all
-- the same when it is set, so that the second registration, told the
-- watch was pending, hears of it. The engine once kept this in its memory
-- alone; the store keeps it as PostgreSQL's replicas must (schema 11
-- there). A build that knows only schema 16 refuses the database as
-- newer.

-- +goose Up

ALTER TABLE watches ADD COLUMN joined INTEGER NOT NULL DEFAULT 0;

-- +goose Down

ALTER TABLE watches DROP COLUMN joined;
