-- Schema 12 of the vigil SQLite store: a recipient's count of pending
-- watches, which its max_active_per_recipient cap reads, is the sum of
-- its pending rows of watch_counts (schema 9), not a counters row of its
-- own (issue #18). Both were kept in the same transaction as every
-- create, settle, cancel and deletion, so the counters row said again
-- what watch_counts already held, and cost every registration and every
-- settlement one more row to write, on a page of its own when recipients
-- are many (a fleet's agents, a storm's watches each with its own): a
-- page more in the WAL at each commit. counters keeps the row of the
-- empty name, the total of pending watches, which the max_active cap and
-- the scheduler's priming read; it is taken again from the watches here.

-- +goose Up

DELETE FROM counters WHERE recipient <> '';
INSERT INTO counters (recipient, pending, created_at)
    SELECT '', count(*), 0 FROM watches WHERE state = 'pending'
    ON CONFLICT (recipient) DO UPDATE SET pending = excluded.pending;

-- +goose Down

INSERT INTO counters (recipient, pending, created_at)
    SELECT recipient, count(*), min(created_at) FROM watches WHERE state = 'pending' GROUP BY recipient
    ON CONFLICT (recipient) DO UPDATE SET pending = excluded.pending;
