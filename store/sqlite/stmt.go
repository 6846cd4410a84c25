package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
)

// watchColumns are the columns of a watch, in the order scanWatch and
// watchArgs use.
const watchColumns = `id, recipient, kind, state, identity, created_at, predicate, mode, every_ms,
	deadline, start_at, settled_at, polls, standing, note, labels, deliver, stable, stable_for_ms,
	max_polls, max_errors, chain_depth, token_id, answered_at_creation, last_observation, outcome, receipts,
	errors, consecutive_errors, checked_at`

// watchColumnCount is how many watchColumns there are.
const watchColumnCount = 30

// pendingColumns are what WatchListPending reads of a pending watch.
const pendingColumns = `id, kind, every_ms, deadline, start_at, created_at, polls, standing, errors, consecutive_errors`

// identityColumns are a row's rowid and identity as identities.addRaw
// takes them.
const identityColumns = `rowid, identity, typeof(identity) = 'blob'`

const messageColumns = `seq, id, recipient, watch_id, type, text, data, created_at`

// rowsBound is a bound on the number of rows the database holds, to size
// what is read by the counts it keeps, which a damaged file (or one
// written by hand) may hold wrong: a row of watches takes more than 32
// bytes of the file (a leaf cell's pointer and header, the record's
// header of a byte a column, the id's 26).
const rowsBound = `(SELECT page_count * page_size / 32 FROM pragma_page_count(), pragma_page_size())`

// pendingCountSQL reads the pending total the counters row keeps, the
// largest rowid and rowsBound; pendingSize makes a size of them.
const pendingCountSQL = `SELECT coalesce((SELECT pending FROM counters WHERE recipient = ''), 0),
	coalesce((SELECT max(rowid) FROM watches), 0), ` + rowsBound

// pendingSize is the number of pending watches to size a read of them by:
// the counters row's total, never above the rows whatever it says (a
// damaged file, one written by hand).
func pendingSize(pending, rowids, bound int64) int64 {
	return max(0, min(pending, rowids, bound))
}

// placeholders returns "?, ?, …" with n marks.
func placeholders(n int) string {
	return strings.TrimSuffix(strings.Repeat("?, ", n), ", ")
}

// writeStmts are prepared once on the writer connection: the hot paths of
// every write.
type writeStmts struct {
	begin, commitTx, rollbackTx    *sql.Stmt
	savepoint, release, rollbackTo *sql.Stmt
	dataVersionGet                 *sql.Stmt

	watchInsert, watchByID, watchByRowid, watchHead, watchesPending *sql.Stmt
	watchCancel, watchObserve, watchDelete, watchDeliverSet         *sql.Stmt
	watchJoin                                                       *sql.Stmt
	watchBaseline                                                   *sql.Stmt
	counts, recipientClose                                          *sql.Stmt
	ledgerGet, ledgerPut                                            *sql.Stmt
	// WatchCreateMany's: each takes a JSON array.
	ledgerGetMany, watchesByRowids, watchIDsTaken, countsMany, watchesByIDs *sql.Stmt
	pendingTotalAdd                                                         *sql.Stmt
	// What a new watch adds beside its row (schema 10), for the rows from
	// a rowid on; and the largest rowid so far.
	newText, newLabels, watchMaxRowid *sql.Stmt
	messageInsert, readerAck          *sql.Stmt
}

// messageInsertHead is the insert of a message up to its rows; each row is
// messageColumnCount values, in messageArgs' order.
const (
	messageInsertHead  = `INSERT INTO messages (id, recipient, watch_id, type, text, data, created_at) VALUES `
	messageColumnCount = 7
)

type stmtDef struct {
	dst   **sql.Stmt
	query string
}

func (s *writeStmts) defs() []stmtDef {
	return []stmtDef{
		{&s.begin, `BEGIN IMMEDIATE`},
		{&s.commitTx, `COMMIT`},
		{&s.rollbackTx, `ROLLBACK`},
		{&s.savepoint, `SAVEPOINT op`},
		{&s.release, `RELEASE op`},
		{&s.rollbackTo, `ROLLBACK TO op`},
		{&s.dataVersionGet, `PRAGMA data_version`},

		{&s.watchInsert, `INSERT INTO watches (` + watchColumns + `) VALUES (` + placeholders(watchColumnCount) + `)`},
		{&s.watchByID, `SELECT ` + watchColumns + ` FROM watches WHERE id = ?`},
		// The rows schema 9's insert triggers wrote for each new watch,
		// written for all the watches from rowid ?1 on (see indexNew).
		{&s.newText, `INSERT INTO watch_text (created_at, watch_id, note, predicate)
			SELECT created_at, id, iif(short, lower(coalesce(note, '')), NULL), iif(short, lower(coalesce(CAST(predicate AS TEXT), '')), NULL)
			FROM (SELECT created_at, id, note, predicate,
				coalesce(octet_length(note), 0) + coalesce(octet_length(predicate), 0) <= 900 AS short
				FROM watches WHERE rowid >= ?1)`},
		{&s.newLabels, `INSERT OR IGNORE INTO watch_labels (key, value, created_at, watch_id)
			SELECT l.key, l.value, w.created_at, w.id FROM watches AS w, json_each(w.labels) AS l
			WHERE w.rowid >= ?1 AND w.labels IS NOT NULL AND json_valid(w.labels) AND l.type = 'text'`},
		{&s.watchMaxRowid, `SELECT coalesce(max(rowid), 0) FROM watches`},
		{&s.watchByRowid, `SELECT ` + watchColumns + ` FROM watches WHERE rowid = ?`},
		{&s.watchHead, `SELECT recipient, state, kind, rowid, identity FROM watches WHERE id = ?`},
		// CROSS JOIN: the ids drive, each one probe of the primary key.
		// Without it, the planner walked every pending watch in
		// watches_state_created and kept those named: a storm's batches
		// read the whole pending part of the index, each.
		{&s.watchesPending, `SELECT w.rowid, w.id, w.recipient, w.kind, w.identity, w.joined FROM json_each(?) AS j CROSS JOIN watches AS w
			WHERE w.id = j.value AND w.state = 'pending'`},
		// ?4 (checked_at) is NULL when the caller has no live counts:
		// then the stored ones stay.
		{&s.watchCancel, `UPDATE watches SET state = 'cancelled', outcome = ?1, settled_at = ?2,
			polls = iif(?4 IS NULL, polls, ?5), errors = iif(?4 IS NULL, errors, ?6),
			consecutive_errors = iif(?4 IS NULL, consecutive_errors, ?7), checked_at = coalesce(?4, checked_at)
			WHERE id = ?3 AND state = 'pending'`},
		{&s.watchObserve, `UPDATE watches SET last_observation = ?, polls = ?,
			errors = ?, consecutive_errors = ?, checked_at = coalesce(?, checked_at)
			WHERE id = ? AND state = 'pending'`},
		{&s.watchBaseline, `SELECT state, last_observation FROM watches WHERE id = ?`},
		{&s.watchDelete, `DELETE FROM watches WHERE id = ?`},
		{&s.watchDeliverSet, `UPDATE watches SET deliver = ? WHERE id = ?`},
		{&s.watchJoin, `UPDATE watches SET joined = 1 WHERE id = ? AND state = 'pending'`},

		{&s.counts, `SELECT (SELECT pending FROM counters WHERE recipient = ''),
			coalesce((SELECT sum(pending) FROM watch_counts WHERE recipient = ?), 0)`},
		{&s.recipientClose, `UPDATE watches SET state = 'cancelled', outcome = ?, settled_at = ?
			WHERE recipient = ? AND state = 'pending' RETURNING id, kind, rowid, identity`},

		{&s.ledgerGet, `SELECT request_hash, watch_id, existing FROM idempotency
			WHERE recipient = ? AND key = ? AND created_at >= ?`},
		{&s.ledgerPut, `INSERT INTO idempotency (recipient, key, request_hash, watch_id, existing, created_at)
			VALUES (?, ?, ?, ?, ?, ?)
			ON CONFLICT (recipient, key) DO UPDATE SET request_hash = excluded.request_hash,
				watch_id = excluded.watch_id, existing = excluded.existing, created_at = excluded.created_at`},

		{&s.ledgerGetMany, `SELECT recipient, key, request_hash, watch_id, existing, created_at FROM idempotency
			WHERE (recipient, key) IN (SELECT value ->> 0, value ->> 1 FROM json_each(?))`},
		// The rows identities (the writer's, in memory) name. CROSS JOIN:
		// the rowids drive, each one probe of the table.
		{&s.watchesByRowids, `SELECT w.rowid, w.id, w.state, w.identity FROM json_each(?) AS j CROSS JOIN watches AS w
			WHERE w.rowid = j.value`},
		{&s.watchIDsTaken, `SELECT w.id FROM json_each(?) AS j CROSS JOIN watches AS w WHERE w.id = j.value`},
		{&s.countsMany, `SELECT '', pending FROM counters WHERE recipient = ''
			UNION ALL
			SELECT recipient, sum(pending) FROM watch_counts
			WHERE recipient IN (SELECT value FROM json_each(?)) GROUP BY recipient`},
		{&s.pendingTotalAdd, `INSERT INTO counters (recipient, pending, created_at) VALUES ('', ?, 0)
			ON CONFLICT (recipient) DO UPDATE SET pending = pending + excluded.pending`},
		{&s.watchesByIDs, `SELECT ` + watchColumns + ` FROM watches WHERE id IN (SELECT value FROM json_each(?))`},

		{&s.messageInsert, messageInsertHead + "(" + placeholders(messageColumnCount) + ")"},
		{&s.readerAck, `INSERT INTO readers (recipient, reader, cursor) VALUES (?, ?, ?)
			ON CONFLICT (recipient, reader) DO UPDATE SET cursor = max(cursor, excluded.cursor)`},
	}
}

func (s *writeStmts) close() { closeAll(s.defs()) }

// readStmts are prepared on the read pool (per connection, on first use).
type readStmts struct {
	watchByID, watchesByIDs, messagesAfter, readerCursor *sql.Stmt
	messagesAfterAll, messagesLastSeq, messagesOfWatch   *sql.Stmt
	pendingScan, pendingByIndex, pendingCount            *sql.Stmt
}

func (s *readStmts) defs() []stmtDef {
	return []stmtDef{
		{&s.watchByID, `SELECT ` + watchColumns + ` FROM watches WHERE id = ?`},
		// ids as one JSON array: one prepared statement for any number.
		{&s.watchesByIDs, `SELECT ` + watchColumns + ` FROM watches WHERE id IN (SELECT value FROM json_each(?))`},
		// With each row's rowid and identity, for the writer (offerIdentities).
		{&s.pendingScan, `SELECT ` + pendingColumns + `, ` + identityColumns + ` FROM watches NOT INDEXED WHERE state = 'pending'`},
		{&s.pendingByIndex, `SELECT ` + pendingColumns + `, ` + identityColumns + ` FROM watches INDEXED BY watches_state_created WHERE state = 'pending'`},
		{&s.pendingCount, pendingCountSQL},
		{&s.messagesAfter, `SELECT ` + messageColumns + ` FROM messages
			WHERE recipient = ? AND seq > ? ORDER BY seq LIMIT ?`},
		{&s.messagesAfterAll, `SELECT ` + messageColumns + ` FROM messages
			WHERE seq > ? ORDER BY seq LIMIT ?`},
		{&s.messagesLastSeq, `SELECT coalesce(max(seq), 0) FROM messages`},
		// A watch's outcome through messages_outcome, its newest other
		// messages through messages_watch_other: each WHERE names its
		// index's terms, so neither walks the mailbox. Arguments: the
		// watch, the watch, the limit, the limit.
		{&s.messagesOfWatch, `SELECT ` + messageColumns + ` FROM (
			SELECT ` + messageColumns + ` FROM messages WHERE watch_id = ?
				AND (type = 'fired' OR type = 'failed' OR type = 'expired' OR type = 'errored' OR type = 'cancelled')
			UNION ALL
			SELECT * FROM (SELECT ` + messageColumns + ` FROM messages WHERE watch_id = ? AND watch_id IS NOT NULL
				AND type <> 'fired' AND type <> 'failed' AND type <> 'expired' AND type <> 'errored' AND type <> 'cancelled'
				ORDER BY seq DESC LIMIT ?)
		) ORDER BY seq DESC LIMIT ?`},
		{&s.readerCursor, `SELECT cursor FROM readers WHERE recipient = ? AND reader = ?`},
	}
}

func (s *readStmts) prepare(ctx context.Context, db *sql.DB) error {
	return prepareAll(ctx, db, s.defs())
}

func (s *readStmts) close() { closeAll(s.defs()) }

type preparer interface {
	PrepareContext(ctx context.Context, query string) (*sql.Stmt, error)
}

func prepareAll(ctx context.Context, p preparer, defs []stmtDef) error {
	for _, d := range defs {
		st, err := p.PrepareContext(ctx, d.query)
		if err != nil {
			closeAll(defs)
			return fmt.Errorf("sqlite: prepare %q: %w", strings.Join(strings.Fields(d.query), " "), err)
		}
		*d.dst = st
	}
	return nil
}

func closeAll(defs []stmtDef) {
	for _, d := range defs {
		if *d.dst != nil {
			(*d.dst).Close()
			*d.dst = nil
		}
	}
}
