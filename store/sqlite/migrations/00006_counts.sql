-- Schema 6 of the vigil SQLite store: what a watch's probes counted.
--
-- errors counts the probes that could not tell (verdict unavailable),
-- consecutive_errors those since the last probe that could (max_errors
-- bounds these, so a restart must not start them again), and checked_at
-- (unix milliseconds) is when the latest probe was made; last_observation
-- keeps when what it says was first seen. Like polls, they are written
-- with each observation that changed, at settlement and at a user's
-- cancel, not on every probe. NULL is 0 (or no time), keeping rows small.

-- +goose Up

ALTER TABLE watches ADD COLUMN errors INTEGER;
ALTER TABLE watches ADD COLUMN consecutive_errors INTEGER;
ALTER TABLE watches ADD COLUMN checked_at INTEGER;

-- +goose Down

ALTER TABLE watches DROP COLUMN checked_at;
ALTER TABLE watches DROP COLUMN consecutive_errors;
ALTER TABLE watches DROP COLUMN errors;
