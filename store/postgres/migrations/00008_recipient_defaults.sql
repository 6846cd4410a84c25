-- Schema 8 of the vigil PostgreSQL store: the recipients' default
-- channels (a default webhook, the daemon's webhooks setting) and since
-- when each has been configured, as SQLite's schema 14.
--
-- ReceiptsResume records them from the configuration at each start (and
-- each shard takeover): a new or changed default (its key is a digest of
-- the URL) since then, a removed one deleted. A settled watch with no
-- receipt owes its recipient's default only if it settled at or after
-- since: a default added to the configuration applies to the outcomes
-- that settle from then on, never to those of the days before it.
-- Additive: an older build never names the table.

-- +goose Up
CREATE TABLE recipient_defaults (
    channel   TEXT   NOT NULL,
    recipient TEXT   NOT NULL,
    key       TEXT   NOT NULL,
    since     BIGINT NOT NULL,
    PRIMARY KEY (channel, recipient)
);

-- +goose Down
DROP TABLE recipient_defaults;
