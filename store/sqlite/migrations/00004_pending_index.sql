-- Schema 4 of the vigil SQLite store: pending watches listed newest first
-- through an index of their own.
--
-- A list of pending watches (vigil ls --state pending, GET
-- /v1/watches?state=pending) walked watches_created newest first and
-- skipped every settled row on the way: with few pending watches among many
-- settled ones (after a storm, or a week of history) each list read them
-- all. This index holds only the pending rows, in the list's order; a row
-- leaves it when its watch settles.

-- +goose Up

CREATE INDEX watches_pending_created ON watches (created_at, id) WHERE state = 'pending';

-- +goose Down

DROP INDEX watches_pending_created;
