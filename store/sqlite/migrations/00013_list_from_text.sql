-- Schema 13 of the vigil SQLite store: the list without a filter walks
-- watch_text (schema 9), whose key is the list's order (created_at, id),
-- and watches_created goes (issue #18). That list was its only reader,
-- and it held created_at alone, so every page also sorted its ties by id;
-- watch_text holds a row for every watch in exactly the list's order. A
-- registration writes one index fewer: one page fewer in the WAL at each
-- commit.

-- +goose Up

DROP INDEX watches_created;

-- +goose Down

CREATE INDEX watches_created ON watches (created_at);
