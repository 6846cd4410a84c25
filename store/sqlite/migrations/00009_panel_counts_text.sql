-- Schema 9 of the vigil SQLite store: the web panel's counts and its text
-- filter answer without reading every watch (issue #15: both took longer
-- than a page may, 100 ms, over 100 000 watches). Numbered 9 because an
-- index numbered 8 was tried, merged and reverted before any release: a
-- development database that ran it still takes this schema.
--
-- watch_counts holds how many watches each recipient has in each (state,
-- kind), kept by triggers in the transaction that inserts, settles or
-- deletes the watch, so the counts over all watches sum a few rows.
-- Rows that fall to 0 stay until Prune removes them.
--
-- watch_text holds each watch's note and predicate, ASCII-lower-cased as
-- the text filter compares them, in the list's order (created_at, id): a
-- text filter that matches few watches walks these narrow rows, not the
-- watches' wide ones, and one that matches many stops when the page is
-- full. A watch whose note and predicate together pass 900 bytes has
-- NULL there, and the filter reads its own row instead: every row then
-- fits in its page (a WITHOUT ROWID row past about 1 000 bytes spills
-- into a page of its own, which a registration would write besides). It
-- is written once, with the watch; a note or predicate never changes.

-- +goose Up

CREATE TABLE watch_counts (
    recipient TEXT    NOT NULL,
    state     TEXT    NOT NULL,
    kind      TEXT    NOT NULL,
    n         INTEGER NOT NULL,
    PRIMARY KEY (recipient, state, kind)
) WITHOUT ROWID;

INSERT INTO watch_counts (recipient, state, kind, n)
    SELECT recipient, state, kind, count(*) FROM watches GROUP BY recipient, state, kind;

-- +goose StatementBegin
CREATE TRIGGER watch_counts_insert AFTER INSERT ON watches
BEGIN
    INSERT INTO watch_counts (recipient, state, kind, n) VALUES (new.recipient, new.state, new.kind, 1)
        ON CONFLICT DO UPDATE SET n = n + 1;
END;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE TRIGGER watch_counts_update AFTER UPDATE OF recipient, state, kind ON watches
WHEN old.recipient IS NOT new.recipient OR old.state IS NOT new.state OR old.kind IS NOT new.kind
BEGIN
    UPDATE watch_counts SET n = n - 1 WHERE recipient = old.recipient AND state = old.state AND kind = old.kind;
    INSERT INTO watch_counts (recipient, state, kind, n) VALUES (new.recipient, new.state, new.kind, 1)
        ON CONFLICT DO UPDATE SET n = n + 1;
END;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE TRIGGER watch_counts_delete AFTER DELETE ON watches
BEGIN
    UPDATE watch_counts SET n = n - 1 WHERE recipient = old.recipient AND state = old.state AND kind = old.kind;
END;
-- +goose StatementEnd

CREATE TABLE watch_text (
    created_at INTEGER NOT NULL,
    watch_id   TEXT    NOT NULL,
    note       TEXT,
    predicate  TEXT,
    PRIMARY KEY (created_at, watch_id)
) WITHOUT ROWID;

INSERT INTO watch_text (created_at, watch_id, note, predicate)
    SELECT created_at, id, iif(short, lower(coalesce(note, '')), NULL), iif(short, lower(coalesce(CAST(predicate AS TEXT), '')), NULL)
    FROM (SELECT created_at, id, note, predicate,
        coalesce(octet_length(note), 0) + coalesce(octet_length(predicate), 0) <= 900 AS short FROM watches);

-- +goose StatementBegin
CREATE TRIGGER watch_text_insert AFTER INSERT ON watches
BEGIN
    INSERT INTO watch_text (created_at, watch_id, note, predicate)
        SELECT new.created_at, new.id, iif(short, lower(coalesce(new.note, '')), NULL), iif(short, lower(coalesce(CAST(new.predicate AS TEXT), '')), NULL)
        FROM (SELECT coalesce(octet_length(new.note), 0) + coalesce(octet_length(new.predicate), 0) <= 900 AS short);
END;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE TRIGGER watch_text_update AFTER UPDATE OF created_at, id, note, predicate ON watches
BEGIN
    DELETE FROM watch_text WHERE created_at = old.created_at AND watch_id = old.id;
    INSERT INTO watch_text (created_at, watch_id, note, predicate)
        SELECT new.created_at, new.id, iif(short, lower(coalesce(new.note, '')), NULL), iif(short, lower(coalesce(CAST(new.predicate AS TEXT), '')), NULL)
        FROM (SELECT coalesce(octet_length(new.note), 0) + coalesce(octet_length(new.predicate), 0) <= 900 AS short);
END;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE TRIGGER watch_text_delete AFTER DELETE ON watches
BEGIN
    DELETE FROM watch_text WHERE created_at = old.created_at AND watch_id = old.id;
END;
-- +goose StatementEnd

-- +goose Down

DROP TRIGGER watch_text_delete;
DROP TRIGGER watch_text_update;
DROP TRIGGER watch_text_insert;
DROP TABLE watch_text;
DROP TRIGGER watch_counts_delete;
DROP TRIGGER watch_counts_update;
DROP TRIGGER watch_counts_insert;
DROP TABLE watch_counts;
