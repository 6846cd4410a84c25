-- Schema 16 of the vigil SQLite store: watches_identity_pending goes
-- (issue #18). An identity is a hash, so that index took each new watch's
-- entry on one of its pages at random, and each settled watch's off one:
-- a commit wrote a page of WAL for each registration or settlement in it
-- on top of the pages they shared. The store's writer keeps the pending
-- watches' identities in memory instead (store/sqlite identities), read
-- from the pending rows at Open and kept with every write; uniqueness
-- among pending watches is the writer's, as the caps already were. A
-- build that knows only schema 15 refuses the database as newer, so none
-- registers without the index.

-- +goose Up

DROP INDEX watches_identity_pending;

-- +goose Down

CREATE UNIQUE INDEX watches_identity_pending ON watches (identity) WHERE state = 'pending';
