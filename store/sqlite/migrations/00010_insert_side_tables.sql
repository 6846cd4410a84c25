-- Schema 10 of the vigil SQLite store: the rows a new watch adds to
-- watch_counts, watch_text and watch_labels are written by the store, one
-- statement per table for all the watches a transaction inserts, instead of
-- by a trigger per inserted row (issue #18).
--
-- A row trigger on watches made SQLite write every row of a multi-row
-- INSERT into a temporary table first and run each trigger's program once
-- per row: in a batch of 1 000 registrations that was about a third of the
-- store's CPU per watch. The store now follows each insert of watches with
-- the same three statements the triggers ran, over the rows it just
-- inserted (their rowids, which only grow: watches has no AUTOINCREMENT,
-- so a new row takes the largest rowid plus one). What the tables hold is
-- unchanged; the triggers that follow a settlement, an update and a
-- deletion stay.

-- +goose Up

DROP TRIGGER watch_counts_insert;
DROP TRIGGER watch_text_insert;
DROP TRIGGER watch_labels_insert;

-- +goose Down

-- +goose StatementBegin
CREATE TRIGGER watch_labels_insert AFTER INSERT ON watches
WHEN new.labels IS NOT NULL AND json_valid(new.labels)
BEGIN
    INSERT OR IGNORE INTO watch_labels (key, value, created_at, watch_id)
        SELECT l.key, l.value, new.created_at, new.id FROM json_each(new.labels) AS l WHERE l.type = 'text';
END;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE TRIGGER watch_counts_insert AFTER INSERT ON watches
BEGIN
    INSERT INTO watch_counts (recipient, state, kind, n) VALUES (new.recipient, new.state, new.kind, 1)
        ON CONFLICT DO UPDATE SET n = n + 1;
END;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE TRIGGER watch_text_insert AFTER INSERT ON watches
BEGIN
    INSERT INTO watch_text (created_at, watch_id, note, predicate)
        SELECT new.created_at, new.id, iif(short, lower(coalesce(new.note, '')), NULL), iif(short, lower(coalesce(CAST(new.predicate AS TEXT), '')), NULL)
        FROM (SELECT coalesce(octet_length(new.note), 0) + coalesce(octet_length(new.predicate), 0) <= 900 AS short);
END;
-- +goose StatementEnd
