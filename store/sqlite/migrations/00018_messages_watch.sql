-- Schema 18 of the vigil SQLite store: messages_watch_other, an index of
-- a watch's messages other than its outcome (its changes, its notes), so
-- that the panel's page of a watch reads that watch's messages
-- (MessagesOfWatch) and not its recipient's whole mailbox. The outcome
-- message is found through messages_outcome; this index leaves it out, so
-- a settlement (a storm's thousands) writes no entry in it, and a note
-- without a watch none either. (type not an outcome type, spelled with
-- AND: SQLite evaluates a constant IN list of more than two items through
-- a temporary table built for every insert; a query names the same terms
-- for the planner to use it.) A build that knows only schema 17 refuses
-- the database as newer.

-- +goose Up

CREATE INDEX messages_watch_other ON messages (watch_id)
    WHERE watch_id IS NOT NULL AND type <> 'fired' AND type <> 'failed' AND type <> 'expired' AND type <> 'errored' AND type <> 'cancelled';

-- +goose Down

DROP INDEX messages_watch_other;
