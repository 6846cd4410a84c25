-- Schema 13 of the vigil PostgreSQL store: a replica's lease is its
-- database session (issue #16, the idle cost of replicas).
--
-- Until schema 12 a replica renewed its lease by rewriting its replicas
-- row (lease_until) every few seconds: a row and a commit per renewal,
-- 36 a minute for three idle replicas. From this schema a replica of a
-- server that has idle_session_timeout (PostgreSQL 14 and later) holds a
-- session-level advisory lock, keyed lock_key, on a connection of its own
-- whose idle_session_timeout is the lease: its lease holds while that
-- session lives. The session ends when the replica's process does (the
-- server reads the closed socket at once), and, for a replica frozen or
-- cut off, once the session has been idle for a lease, when the server
-- ends it; either way the lock is gone and the others take its shards.
-- A renewal then reads and writes nothing but its own statement: its
-- heartbeat still runs on that session, every few seconds, and keeps it
-- from going idle.
--
-- lock_key is NULL for a replica of an older build (or on a server
-- without idle_session_timeout): its lease is lease_until, as before, and
-- while a row of one exists the newer replicas renew lease_until too, so
-- that it sees them live. lost_at is when a replica noticed that the
-- session of a replica with a lock_key had ended (its lease lapsed then,
-- or at its lease_until if later); a replica that comes back clears it.
-- Additive: an older build never names these columns.

-- +goose Up
ALTER TABLE replicas ADD COLUMN lock_key BIGINT, ADD COLUMN lost_at TIMESTAMPTZ;

-- +goose Down
ALTER TABLE replicas DROP COLUMN lock_key, DROP COLUMN lost_at;
