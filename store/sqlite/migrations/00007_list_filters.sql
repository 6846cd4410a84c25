-- Schema 7 of the vigil SQLite store: the list's filters answer from an
-- index, so the first page of any one filter over 100 000 watches is read
-- without walking every row (the web panel lists with these filters).
--
-- watches_state_created and watches_kind_created serve a state or kind
-- filter in the list's order (newest first); the first also serves what
-- watches_pending_created (schema 4) did, which goes, so a registration
-- writes one index more than before, not two. watch_labels holds each
-- text label of each watch, kept by triggers: a label filter walks its
-- (key, value) in the list's order, and a second label, or the removal
-- of a watch, is a lookup by its primary key. Labels are written once,
-- with the watch.

-- +goose Up

CREATE INDEX watches_state_created ON watches (state, created_at, id);
DROP INDEX watches_pending_created;
CREATE INDEX watches_kind_created ON watches (kind, created_at, id);

CREATE TABLE watch_labels (
    key        TEXT    NOT NULL,
    value      TEXT    NOT NULL,
    created_at INTEGER NOT NULL,
    watch_id   TEXT    NOT NULL,
    PRIMARY KEY (key, value, created_at, watch_id)
) WITHOUT ROWID;

INSERT OR IGNORE INTO watch_labels (key, value, created_at, watch_id)
    SELECT l.key, l.value, w.created_at, w.id FROM watches AS w, json_each(w.labels) AS l
    WHERE w.labels IS NOT NULL AND json_valid(w.labels) AND l.type = 'text';

-- +goose StatementBegin
CREATE TRIGGER watch_labels_insert AFTER INSERT ON watches
WHEN new.labels IS NOT NULL AND json_valid(new.labels)
BEGIN
    INSERT OR IGNORE INTO watch_labels (key, value, created_at, watch_id)
        SELECT l.key, l.value, new.created_at, new.id FROM json_each(new.labels) AS l WHERE l.type = 'text';
END;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE TRIGGER watch_labels_delete AFTER DELETE ON watches
WHEN old.labels IS NOT NULL AND json_valid(old.labels)
BEGIN
    DELETE FROM watch_labels WHERE (key, value, created_at, watch_id) IN
        (SELECT l.key, l.value, old.created_at, old.id FROM json_each(old.labels) AS l WHERE l.type = 'text');
END;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE TRIGGER watch_labels_update AFTER UPDATE OF labels, created_at ON watches
BEGIN
    DELETE FROM watch_labels WHERE (key, value, created_at, watch_id) IN
        (SELECT l.key, l.value, old.created_at, old.id FROM json_each(old.labels) AS l
         WHERE old.labels IS NOT NULL AND json_valid(old.labels) AND l.type = 'text');
    INSERT OR IGNORE INTO watch_labels (key, value, created_at, watch_id)
        SELECT l.key, l.value, new.created_at, new.id FROM json_each(new.labels) AS l
        WHERE new.labels IS NOT NULL AND json_valid(new.labels) AND l.type = 'text';
END;
-- +goose StatementEnd

-- +goose Down


DROP TRIGGER watch_labels_update;
DROP TRIGGER watch_labels_delete;
DROP TRIGGER watch_labels_insert;
DROP TABLE watch_labels;
DROP INDEX watches_kind_created;
CREATE INDEX watches_pending_created ON watches (created_at, id) WHERE state = 'pending';
DROP INDEX watches_state_created;
