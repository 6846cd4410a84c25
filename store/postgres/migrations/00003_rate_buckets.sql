-- Schema 3 of the vigil PostgreSQL store: the registration rate limit's
-- token buckets, shared by every daemon on the database.
--
-- One row per scoped token that registered (tokens are revoked, never
-- deleted, so the table is no larger than tokens). A take is one
-- conditional UPDATE (... WHERE refilled >= n), which PostgreSQL re-checks
-- under the row lock, so concurrent takes on any number of replicas never
-- together exceed the bucket. Additive: a build that predates it never
-- reads it.

-- +goose Up
CREATE TABLE rate_buckets (
    key     TEXT             NOT NULL PRIMARY KEY,
    tokens  DOUBLE PRECISION NOT NULL,
    last_ms BIGINT           NOT NULL
);

-- +goose Down
DROP TABLE rate_buckets;
