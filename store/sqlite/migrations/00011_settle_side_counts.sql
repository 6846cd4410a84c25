-- Schema 11 of the vigil SQLite store: watch_counts follows a settlement,
-- a cancel, a recipient's close and a deletion by the store's own
-- statement, one per write for all the watches it moves, instead of by a
-- trigger per changed row (issue #18: a storm of 20 000 watches due at one
-- instant settled in about 1 600 ms over HTTP at schema 9, 820 ms before).
--
-- watch_counts_update made every settling UPDATE of a watch a statement
-- that may abort halfway: SQLite then opens a statement journal for it,
-- copies each page the statement changes into it first, and frees it at
-- the statement's end, which modernc's allocator hands back to the system
-- (a madvise call per settled watch). In a storm's profile that, not the
-- trigger's two writes, was half the writer's CPU. The store now adds up
-- what each write moves, by (recipient, state, kind), and writes it in one
-- statement (countMoves in watch.go); a single-row UPDATE without a
-- trigger needs no statement journal. What the table holds is unchanged;
-- the counts are taken again from the watches here, so a database opened
-- by this build starts right whatever it held. The triggers on watch_text
-- and watch_labels stay: no settlement runs them (they follow a watch's
-- text, labels and deletion).

-- +goose Up

DROP TRIGGER watch_counts_update;
DROP TRIGGER watch_counts_delete;

DELETE FROM watch_counts;
INSERT INTO watch_counts (recipient, state, kind, n)
    SELECT recipient, state, kind, count(*) FROM watches GROUP BY recipient, state, kind;

-- +goose Down

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
