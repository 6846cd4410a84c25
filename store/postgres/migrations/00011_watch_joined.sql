-- Schema 11 of the vigil PostgreSQL store: watches.joined, set by a
-- registration answered with a pending watch as existing (WatchJoin), on
-- whichever replica it reached. A registration that waits for its new
-- watch's first observation (observe) may take the answer to itself when
-- that observation settles the watch (answered at creation, nothing
-- mailed); the replica holding the observer is not always the one the
-- second registration reached, so the settling write reads this column
-- under the row's lock and mails the outcome all the same when it is set.
-- The join's UPDATE and the settlement's SELECT … FOR UPDATE lock the same
-- row: one of them finds the watch pending first.
--
-- Additive, with a default: a replica of the build before (schema 10)
-- names the columns it writes and reads, so it inserts false here and
-- never reads it (it settles quietly as before).

-- +goose Up
ALTER TABLE watches ADD COLUMN joined BOOLEAN NOT NULL DEFAULT false;

-- +goose Down
ALTER TABLE watches DROP COLUMN joined;
