package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/vigil-run/vigil"
	"github.com/vigil-run/vigil/internal/storecheck"
)

// insertMessage appends m and returns its seq.
func insertMessage(t *wtx, m *vigil.Message) (int64, error) {
	res, err := t.exec(t.messageInsert, messageArgs(m)...)
	if err != nil {
		return 0, err
	}
	return res.LastInsertId()
}

// insertMessages appends ms to their mailboxes in their order, with as
// few statements as forChunks allows (a settlement of a storm's batch
// writes hundreds), and sets seqs[i] to ms[i]'s seq. The rows of one
// statement take consecutive seqs, in order: messages.seq is the rowid,
// which SQLite gives each new row as one more than the largest so far
// (AUTOINCREMENT: ever), and only this connection writes.
func insertMessages(t *wtx, ms []*vigil.Message, seqs []int64) error {
	return forChunks(len(ms), func(from, n int) error {
		st, err := t.insertMessagesStmt(n)
		if err != nil {
			return err
		}
		args := make([]any, 0, n*messageColumnCount)
		for _, m := range ms[from : from+n] {
			args = append(args, messageArgs(m)...)
		}
		res, err := t.exec(st, args...)
		if err != nil {
			return err
		}
		last, err := res.LastInsertId()
		if err != nil {
			return err
		}
		for i := range n {
			seqs[from+i] = last - int64(n-1-i)
		}
		return nil
	})
}

// MessageCreate appends m to its recipient's mailbox and returns it as
// stored, with its Seq. A second outcome message (fired, failed, expired,
// errored, cancelled) for the same watch is refused with conflict.
func (s *Store) MessageCreate(ctx context.Context, m *vigil.Message) (*vigil.Message, error) {
	if err := storecheck.Message(m); err != nil {
		return nil, err
	}
	out := *m
	out.CreatedAt = truncTime(out.CreatedAt)
	if len(out.Data) == 0 {
		out.Data = nil
	}
	err := s.w.do(ctx, func(t *wtx) error {
		seq, err := insertMessage(t, &out)
		if err != nil {
			err = interpretError(err)
			if vigil.ErrorCode(err) == vigil.CodeConflict {
				return &vigil.Error{Code: vigil.CodeConflict, Err: err,
					Message: fmt.Sprintf("watch %s already has its outcome message", m.WatchID)}
			}
			return wrap("create message", err)
		}
		out.Seq = seq
		return nil
	})
	if err != nil {
		return nil, err
	}
	return &out, nil
}

// MessagesRead returns up to p.Limit messages of p.Recipient with a seq
// after p.After, if set, else after the reader's stored cursor (0 for a new
// reader, which therefore sees the backlog), in seq order. Cursor is the
// reader's stored cursor; reading does not move it (MessagesAck does).
func (s *Store) MessagesRead(ctx context.Context, p vigil.MessagesReadParams) (vigil.MessagesPage, error) {
	var page vigil.MessagesPage
	if p.AllRecipients {
		p.Reader = ""
	}
	if p.Reader != "" {
		err := s.r.readerCursor.QueryRowContext(ctx, p.Recipient, p.Reader).Scan(&page.Cursor)
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return page, wrap("read cursor of "+p.Reader, err)
		}
	}
	after := page.Cursor
	if p.After != nil {
		after = *p.After
	}
	limit := pageLimit(p.Limit)
	var (
		rows *sql.Rows
		err  error
	)
	if p.AllRecipients {
		rows, err = s.r.messagesAfterAll.QueryContext(ctx, after, limit)
	} else {
		rows, err = s.r.messagesAfter.QueryContext(ctx, p.Recipient, after, limit)
	}
	if err != nil {
		return page, wrap("read messages", err)
	}
	defer rows.Close()
	page.Messages = make([]*vigil.Message, 0, min(limit, 64))
	for rows.Next() {
		m, err := scanMessage(rows)
		if err != nil {
			return page, wrap("read messages", err)
		}
		page.Messages = append(page.Messages, m)
	}
	if err := rows.Err(); err != nil {
		return page, wrap("read messages", err)
	}
	return page, nil
}

// MessagesOfWatch returns the newest limit messages of one watch (at most
// vigil.MaxWatchMessages), oldest first: its outcome through
// messages_outcome and its other messages through messages_watch_other
// (schema 18), never a walk of its recipient's mailbox.
func (s *Store) MessagesOfWatch(ctx context.Context, watchID string, limit int) ([]*vigil.Message, error) {
	if limit <= 0 || limit > vigil.MaxWatchMessages {
		limit = vigil.MaxWatchMessages
	}
	rows, err := s.r.messagesOfWatch.QueryContext(ctx, watchID, watchID, limit, limit)
	if err != nil {
		return nil, wrap("read messages of "+watchID, err)
	}
	defer rows.Close()
	out := []*vigil.Message{}
	for rows.Next() {
		m, err := scanMessage(rows)
		if err != nil {
			return nil, wrap("read messages of "+watchID, err)
		}
		out = append(out, m)
	}
	if err := rows.Err(); err != nil {
		return nil, wrap("read messages of "+watchID, err)
	}
	slices.Reverse(out)
	return out, nil
}

// MessagesLastSeq returns the seq of the newest message of every mailbox
// (0 when there is none): where a reader of what comes next starts. Only
// the writer connection writes, so a message committed later has a
// greater seq.
func (s *Store) MessagesLastSeq(ctx context.Context) (int64, error) {
	var seq int64
	if err := s.r.messagesLastSeq.QueryRowContext(ctx).Scan(&seq); err != nil {
		return 0, wrap("read the last message seq", err)
	}
	return seq, nil
}

// MessagesAck moves a reader's cursor forward to p.Seq, never back,
// creating the reader on first use.
func (s *Store) MessagesAck(ctx context.Context, p vigil.MessagesAckParams) error {
	if p.Recipient == "" || p.Reader == "" {
		return vigil.Errorf(vigil.CodeInvalidRequest, "an ack needs a recipient and a reader")
	}
	return s.w.do(ctx, func(t *wtx) error {
		if _, err := t.exec(t.readerAck, p.Recipient, p.Reader, p.Seq); err != nil {
			return wrap("ack messages", err)
		}
		return nil
	})
}

// pruneWatches runs query, a deletion of up to pruneChunk watches settled
// before before, and takes what it deleted from watch_counts (schema 11:
// no trigger does); n is how many it deleted.
func pruneWatches(t *wtx, query string, before int64, n *int64) error {
	rows, err := t.conn.QueryContext(context.Background(), query, before, pruneChunk)
	if err != nil {
		return err
	}
	defer rows.Close()
	moves := countMoves{}
	*n = 0
	for rows.Next() {
		var recipient, state, kind string
		if err := rows.Scan(&recipient, &state, &kind); err != nil {
			return err
		}
		moves.move(recipient, kind, vigil.State(state), "", 1)
		*n++
	}
	if err := rows.Err(); err != nil {
		return err
	}
	rows.Close()
	return moves.write(t)
}

// Prune deletes settled watches settled before p.WatchesBefore (with their
// idempotency entries), messages created before p.MessagesBefore and
// idempotency entries created before p.IdempotencyBefore; a zero cut-off
// prunes nothing of its kind. It deletes in steps of a few thousand rows,
// each its own write, so a large prune never holds up other writes for
// long. Keys counts the entries that expired, not those that went with
// their watch.
func (s *Store) Prune(ctx context.Context, p vigil.PruneParams) (vigil.PruneResult, error) {
	var res vigil.PruneResult
	for _, step := range []struct {
		before time.Time
		query  string
		count  *int
	}{
		{p.WatchesBefore, `DELETE FROM watches WHERE rowid IN (SELECT rowid FROM watches
			WHERE settled_at < ? AND state <> 'pending' LIMIT ?) RETURNING recipient, state, kind`, &res.Watches},
		{p.MessagesBefore, `DELETE FROM messages WHERE seq IN (SELECT seq FROM messages
			WHERE created_at < ? LIMIT ?)`, &res.Messages},
		{p.IdempotencyBefore, `DELETE FROM idempotency WHERE (recipient, key) IN (SELECT recipient, key
			FROM idempotency WHERE created_at < ? LIMIT ?)`, &res.Keys},
	} {
		if step.before.IsZero() {
			continue
		}
		for {
			var n int64
			err := s.w.do(ctx, func(t *wtx) error {
				if step.count == &res.Watches {
					// It returns what it deleted, to count it out.
					return pruneWatches(t, step.query, step.before.UnixMilli(), &n)
				}
				r, err := t.conn.ExecContext(context.Background(), step.query, step.before.UnixMilli(), pruneChunk)
				if err != nil {
					return err
				}
				n, err = r.RowsAffected()
				return err
			})
			if err != nil {
				return res, wrap("prune", err)
			}
			*step.count += int(n)
			if n < pruneChunk {
				break
			}
		}
	}
	if !p.WatchesBefore.IsZero() {
		// The counts of (recipient, kind) that no watch has any more (see
		// schema 9 and 15), so the counts table keeps to what exists.
		err := s.w.do(ctx, func(t *wtx) error {
			_, err := t.conn.ExecContext(context.Background(), `DELETE FROM watch_counts
				WHERE pending = 0 AND fired = 0 AND failed = 0 AND expired = 0 AND cancelled = 0 AND errored = 0 AND unwatchable = 0`)
			return err
		})
		if err != nil {
			return res, wrap("prune: counts", err)
		}
	}
	var settled, message, key sql.NullInt64
	err := s.readDB.QueryRowContext(ctx, `SELECT
		(SELECT min(settled_at) FROM watches WHERE settled_at IS NOT NULL),
		(SELECT min(created_at) FROM messages),
		(SELECT min(created_at) FROM idempotency)`).Scan(&settled, &message, &key)
	if err != nil {
		return res, wrap("prune: find oldest rows", err)
	}
	res.OldestSettled, res.OldestMessage, res.OldestKey = msTime(settled), msTime(message), msTime(key)
	return res, nil
}
