-- Schema 5 of the vigil PostgreSQL store: the text the panel's list
-- filters read (a watch's note, predicate and labels) moves to a narrow
-- table of its own, written once when the watch is inserted, as SQLite's
-- watch_text. A settlement rewrites the watch's row, and as that UPDATE
-- changes indexed columns (state, settled_at) it is never a HOT update:
-- every index of watches gets an entry for the new row version, the three
-- GIN indexes of schema 4 among them (a trigram per three letters of the
-- note and of the predicate). Here those indexes are on watch_text, whose
-- rows a settlement never touches.
--
-- Triggers keep watch_text in step with the watches, whichever release
-- writes them (an older replica during a rolling upgrade inserts watches
-- without knowing of this table). The note, predicate and labels of a
-- watch never change after its insert; it is deleted with the watch.
--
-- The three GIN indexes of schema 4 are dropped: no release names them in
-- a statement, so an older replica runs on without them; until it is
-- upgraded its text and label filters read the watches (slower), and if
-- it restarts it logs that the trigram indexes are missing.

-- +goose Up

CREATE TABLE watch_text (
    id        TEXT  NOT NULL PRIMARY KEY,
    -- The note and the predicate with ASCII letters lower-cased ('' for
    -- none), as the text filter compares them (store/postgres WatchList).
    note      TEXT  NOT NULL,
    predicate TEXT  NOT NULL,
    -- The labels (NULL: none), for the label filter's @>.
    labels    JSONB
);

-- +goose StatementBegin
CREATE FUNCTION watch_text_add() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO watch_text (id, note, predicate, labels)
    SELECT id,
        translate(coalesce(note, ''), 'ABCDEFGHIJKLMNOPQRSTUVWXYZ', 'abcdefghijklmnopqrstuvwxyz'),
        translate(coalesce(predicate, ''), 'ABCDEFGHIJKLMNOPQRSTUVWXYZ', 'abcdefghijklmnopqrstuvwxyz'),
        labels::jsonb
    FROM watch_text_new;
    RETURN NULL;
END
$$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE FUNCTION watch_text_remove() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM watch_text AS t USING watch_text_old AS o WHERE t.id = o.id;
    RETURN NULL;
END
$$;
-- +goose StatementEnd

-- One trigger call per statement (a batch's multi-row INSERT is one).
CREATE TRIGGER watch_text_add AFTER INSERT ON watches
    REFERENCING NEW TABLE AS watch_text_new FOR EACH STATEMENT EXECUTE FUNCTION watch_text_add();
CREATE TRIGGER watch_text_remove AFTER DELETE ON watches
    REFERENCING OLD TABLE AS watch_text_old FOR EACH STATEMENT EXECUTE FUNCTION watch_text_remove();

-- The watches that exist.
INSERT INTO watch_text (id, note, predicate, labels)
SELECT id,
    translate(coalesce(note, ''), 'ABCDEFGHIJKLMNOPQRSTUVWXYZ', 'abcdefghijklmnopqrstuvwxyz'),
    translate(coalesce(predicate, ''), 'ABCDEFGHIJKLMNOPQRSTUVWXYZ', 'abcdefghijklmnopqrstuvwxyz'),
    labels::jsonb
FROM watches;

CREATE INDEX watch_text_labels ON watch_text USING gin (labels jsonb_path_ops);

-- The trigram indexes, where pg_trgm is (schema 4 installed it if it
-- could; see there).
-- +goose StatementBegin
DO $$
DECLARE
    nsp TEXT;
BEGIN
    SELECT n.nspname INTO nsp FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace
        WHERE e.extname = 'pg_trgm';
    IF nsp IS NOT NULL THEN
        EXECUTE format('CREATE INDEX watch_text_note_trgm ON watch_text USING gin (note %I.gin_trgm_ops)', nsp);
        EXECUTE format('CREATE INDEX watch_text_predicate_trgm ON watch_text USING gin (predicate %I.gin_trgm_ops)', nsp);
    END IF;
END
$$;
-- +goose StatementEnd

DROP INDEX IF EXISTS watches_predicate_trgm;
DROP INDEX IF EXISTS watches_note_trgm;
DROP INDEX watches_labels;

-- Statistics now, not at autovacuum's next pass: without them the planner
-- joins the filters' matches to the watches blind (a label filter over
-- 100 000 watches took 105 ms instead of 2 ms in BenchmarkWatchListFilters).
ANALYZE watch_text;

-- +goose Down

CREATE INDEX watches_labels ON watches USING gin ((labels::jsonb) jsonb_path_ops);
-- +goose StatementBegin
DO $$
DECLARE
    nsp TEXT;
BEGIN
    SELECT n.nspname INTO nsp FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace
        WHERE e.extname = 'pg_trgm';
    IF nsp IS NOT NULL THEN
        EXECUTE format('CREATE INDEX watches_note_trgm ON watches USING gin '
            '((translate(coalesce(note, ''''), ''ABCDEFGHIJKLMNOPQRSTUVWXYZ'', ''abcdefghijklmnopqrstuvwxyz'')) %I.gin_trgm_ops)', nsp);
        EXECUTE format('CREATE INDEX watches_predicate_trgm ON watches USING gin '
            '((translate(coalesce(predicate, ''''), ''ABCDEFGHIJKLMNOPQRSTUVWXYZ'', ''abcdefghijklmnopqrstuvwxyz'')) %I.gin_trgm_ops)', nsp);
    END IF;
END
$$;
-- +goose StatementEnd
DROP TRIGGER watch_text_remove ON watches;
DROP TRIGGER watch_text_add ON watches;
DROP FUNCTION watch_text_remove();
DROP FUNCTION watch_text_add();
DROP TABLE watch_text;
