-- Schema 4 of the vigil PostgreSQL store: the web panel's list filters and
-- counts answer without reading every watch (issue #15: the first page
-- under any one filter, and the counts above it, within 100 ms over
-- 100 000 watches; SQLite's schemas 7 and 9 do the same there). Numbered 4
-- because 2 and 3 are taken by other changes. Additive only: a replica of
-- an older build keeps working beside it (it never reads what this adds,
-- and the triggers keep the counts whoever writes).
--
-- The indexes build inside the migration's transaction, so writes to the
-- watches wait while they build (4 s at 100 000 watches, 3.4 s of it the
-- trigram indexes, on a loaded 2-core machine).

-- +goose Up

-- The state and kind filters walk the watches in the list's order
-- (created_at DESC, id DESC) among the rows that match, and stop when the
-- page is full; a value no watch has costs one index probe.
CREATE INDEX watches_state_created ON watches (state, created_at, id);
CREATE INDEX watches_kind_created ON watches (kind, created_at, id);

-- The label filter (labels::jsonb @> {"key": "value"}) finds its watches
-- here. Labels are stored as JSON text written by the store, so the cast
-- never fails on a stored row.
CREATE INDEX watches_labels ON watches USING gin ((labels::jsonb) jsonb_path_ops);

-- The text filter compares the ASCII-lower-cased note and predicate with
-- LIKE '%text%' (store/postgres WatchList); pg_trgm's trigram indexes on
-- exactly those expressions find the few watches that contain the text.
-- The extension goes into schema public (not the store's schema: dropping
-- one store's schema would drop it, and with it every other schema's
-- trigram indexes). Where it cannot be had (not installed on the server,
-- or the role may not create it), the migration still succeeds without
-- these two indexes, with a WARNING in the server's log: the filter gives
-- the same answers, by reading the watches, and Open logs a warning saying
-- so (store/postgres trigramWarning). A DBA can add the extension later
-- and re-create the indexes as below.
-- +goose StatementBegin
DO $$
DECLARE
    nsp TEXT;
BEGIN
    IF NOT EXISTS (SELECT FROM pg_extension WHERE extname = 'pg_trgm') THEN
        BEGIN
            CREATE EXTENSION IF NOT EXISTS pg_trgm SCHEMA public;
        EXCEPTION WHEN OTHERS THEN
            RAISE WARNING 'vigil: pg_trgm is unavailable (%): the panel''s text filter will read every watch', SQLERRM;
        END;
    END IF;
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

-- +goose Down

DROP INDEX IF EXISTS watches_predicate_trgm;
DROP INDEX IF EXISTS watches_note_trgm;
DROP INDEX watches_labels;
DROP INDEX watches_kind_created;
DROP INDEX watches_state_created;
