-- Schema 8 of the vigil SQLite store: the counts per state and kind
-- (WatchCounts, shown above the web panel's list) read one small index
-- instead of every row. Without it the GROUP BY walked
-- watches_state_created and looked each row up for its kind: about 75 ms
-- over 100 000 watches, most of the panel's 100 ms budget. A
-- registration writes one index entry more; a settlement moves it.

-- +goose Up

CREATE INDEX watches_state_kind ON watches (state, kind);

-- +goose Down

DROP INDEX watches_state_kind;
