-- Schema 12 of the vigil PostgreSQL store: tokens.repos, a scoped token's
-- repos scope, a JSON array of doublestar globs over PROVIDER/REPO
-- ("github/acme/*") that the repositories of its ci and ticket watches
-- must match. NULL (every token made before) means any repository the
-- daemon's forge credentials can read, as before.
--
-- Additive and nullable: a replica of the build before (schema 11) still
-- running names the columns it reads and writes, so it neither reads
-- this one nor sets it. It therefore does not enforce a repos scope
-- either: create tokens with repos once every replica runs this build.

-- +goose Up
ALTER TABLE tokens ADD COLUMN repos TEXT;

-- +goose Down
ALTER TABLE tokens DROP COLUMN repos;
