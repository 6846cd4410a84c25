-- Schema 3 of the vigil SQLite store: scoped API tokens (SPEC §9).
--
-- A token is kept as the hex SHA-256 of its plaintext, never the plaintext.
-- recipients and kinds are JSON arrays of strings.

-- +goose Up

CREATE TABLE tokens (
    id         TEXT    NOT NULL PRIMARY KEY,
    hash       TEXT    NOT NULL UNIQUE,
    recipients TEXT    NOT NULL,
    kinds      TEXT,
    exec       INTEGER NOT NULL DEFAULT 0,
    created_at INTEGER NOT NULL,
    expires_at INTEGER,
    revoked_at INTEGER
) WITHOUT ROWID;

-- +goose Down

DROP TABLE tokens;
