-- Schema 14: the recipients' default channels (a default webhook, the
-- daemon's webhooks setting) and since when each has been configured.
--
-- ReceiptsResume records them from the configuration at each start: a new
-- or changed default (its key is a digest of the URL) since that start, a
-- removed one deleted. A settled watch with no receipt owes its
-- recipient's default only if it settled at or after since: a default
-- added to the configuration applies to the outcomes that settle from
-- then on, never to those of the days before it, which owed it nothing.

-- +goose Up
CREATE TABLE recipient_defaults (
    channel   TEXT    NOT NULL,
    recipient TEXT    NOT NULL,
    key       TEXT    NOT NULL,
    since     INTEGER NOT NULL,
    PRIMARY KEY (channel, recipient)
) WITHOUT ROWID;

-- +goose Down
DROP TABLE recipient_defaults;
