-- Schema 19 of the vigil SQLite store: tokens.repos, a scoped token's
-- repos scope, a JSON array of doublestar globs over PROVIDER/REPO
-- ("github/acme/*") that the repositories of its ci and ticket watches
-- must match. NULL (every token made before) means any repository the
-- daemon's forge credentials can read, as before. A build that knows
-- only schema 18 refuses the database as newer.

-- +goose Up

ALTER TABLE tokens ADD COLUMN repos TEXT;

-- +goose Down

ALTER TABLE tokens DROP COLUMN repos;
