-- Schema 7 of the vigil PostgreSQL store: watches_pending_created goes
-- (issue #16, a registration's cost to PostgreSQL). Its only reader was
-- the list filtered on the pending state, which watches_state_created
-- (state, created_at, id) of schema 4 serves in the same order, as
-- SQLite's schema 7 found for its own copy. A registration writes one
-- index fewer, and the planner has one partial index of the pending
-- watches fewer to mistake for the one a query needs. An older build
-- names no index: it keeps working beside this one.

-- +goose Up

DROP INDEX watches_pending_created;

-- +goose Down

CREATE INDEX watches_pending_created ON watches (created_at, id) WHERE state = 'pending';
