package postgres

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/vigil-run/vigil"
	"github.com/vigil-run/vigil/internal/storecheck"
)

// insertMessages appends ms in order and returns their seqs. It first
// takes the mailbox's advisory transaction lock, held until the
// transaction ends, so the seqs of concurrent transactions become visible
// in their order: a reader that saw seq n never later finds a new message
// below n. Every transaction takes it after any row lock it needs, so it
// closes no cycle.
func (s *Store) insertMessages(ctx context.Context, tx pgx.Tx, ms ...*vigil.Message) ([]int64, error) {
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, s.lockKey); err != nil {
		return nil, err
	}
	// One statement, however many messages: the lock above is held by
	// every mailbox write of every replica until its commit, so the time
	// between it and the commit is what a storm's settlements queue on.
	// The rows are inserted in the order of ms, and their seqs drawn in
	// that order.
	ids, recipients, watches, types, texts, data, created := make([]string, len(ms)), make([]string, len(ms)),
		make([]*string, len(ms)), make([]string, len(ms)), make([]string, len(ms)), make([]*string, len(ms)), make([]int64, len(ms))
	for j, m := range ms {
		ids[j], recipients[j], watches[j], types[j], texts[j], data[j], created[j] =
			m.ID, m.Recipient, nullStr(m.WatchID), string(m.Type), m.Text, rawText(m.Data), m.CreatedAt.UnixMilli()
	}
	rows, err := tx.Query(ctx, `INSERT INTO messages (id, recipient, watch_id, type, text, data, created_at)
		SELECT id, recipient, watch_id, type, text, data, created_at
		FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::bigint[])
			WITH ORDINALITY AS m(id, recipient, watch_id, type, text, data, created_at, n)
		ORDER BY n RETURNING seq`, ids, recipients, watches, types, texts, data, created)
	if err != nil {
		return nil, err
	}
	seqs, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		if constraint(err) == "messages_outcome" {
			return nil, &vigil.Error{Code: vigil.CodeConflict, Err: err,
				Message: fmt.Sprintf("watch %s already has its outcome message", outcomeConflict(err, ms))}
		}
		return nil, err
	}
	if len(seqs) != len(ms) {
		return nil, fmt.Errorf("insert messages: %d rows inserted, want %d", len(seqs), len(ms))
	}
	slices.Sort(seqs)
	evs := make([]Event, len(ms))
	for i, m := range ms {
		evs[i] = Event{Kind: EventMessage, Recipient: m.Recipient, WatchID: m.WatchID, Seq: seqs[i]}
	}
	return seqs, s.notify(ctx, tx, evs...)
}

// outcomeConflict is the watch whose second outcome message err refused:
// the one the violation's detail names, else the first of ms.
func outcomeConflict(err error, ms []*vigil.Message) string {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		for _, m := range ms {
			if m.WatchID != "" && strings.Contains(pe.Detail, "("+m.WatchID+")") {
				return m.WatchID
			}
		}
	}
	return ms[0].WatchID
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
	err := s.write(ctx, func(tx pgx.Tx) error {
		seqs, err := s.insertMessages(ctx, tx, &out)
		if err != nil {
			return err
		}
		out.Seq = seqs[0]
		return nil
	})
	if err != nil {
		return nil, wrap("create message", err)
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
		err := s.pool.QueryRow(ctx, `SELECT cursor FROM readers WHERE recipient = $1 AND reader = $2`, p.Recipient, p.Reader).Scan(&page.Cursor)
		if err != nil && !errors.Is(err, pgx.ErrNoRows) {
			return page, wrap("read cursor of "+p.Reader, err)
		}
	}
	after := page.Cursor
	if p.After != nil {
		after = *p.After
	}
	limit := pageLimit(p.Limit)
	var (
		rows pgx.Rows
		err  error
	)
	if p.AllRecipients {
		rows, err = s.pool.Query(ctx, `SELECT `+messageColumns+` FROM messages WHERE seq > $1 ORDER BY seq LIMIT $2`, after, limit)
	} else {
		rows, err = s.pool.Query(ctx, `SELECT `+messageColumns+` FROM messages WHERE recipient = $1 AND seq > $2 ORDER BY seq LIMIT $3`,
			p.Recipient, after, limit)
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
// vigil.MaxWatchMessages), oldest first, through messages_watch: never a
// walk of its recipient's mailbox. (OFFSET 0 keeps the watch's rows a
// subquery of their own: for a watch with thousands of changes the planner
// otherwise walks messages_pkey backwards from the newest message of any
// mailbox, filtering, every newer message when the watch's are old.)
func (s *Store) MessagesOfWatch(ctx context.Context, watchID string, limit int) ([]*vigil.Message, error) {
	if limit <= 0 || limit > vigil.MaxWatchMessages {
		limit = vigil.MaxWatchMessages
	}
	rows, err := s.pool.Query(ctx, `SELECT `+messageColumns+` FROM (SELECT `+messageColumns+` FROM messages WHERE watch_id = $1 OFFSET 0) m
		ORDER BY seq DESC LIMIT $2`, watchID, limit)
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

// MessagesAck moves a reader's cursor forward to p.Seq, never back,
// creating the reader on first use.
func (s *Store) MessagesAck(ctx context.Context, p vigil.MessagesAckParams) error {
	if p.Recipient == "" || p.Reader == "" {
		return vigil.Errorf(vigil.CodeInvalidRequest, "an ack needs a recipient and a reader")
	}
	_, err := s.pool.Exec(ctx, `INSERT INTO readers (recipient, reader, cursor) VALUES ($1, $2, $3)
		ON CONFLICT (recipient, reader) DO UPDATE SET cursor = greatest(readers.cursor, excluded.cursor)`,
		p.Recipient, p.Reader, p.Seq)
	return wrap("ack messages", err)
}

// Prune deletes settled watches settled before p.WatchesBefore (with their
// idempotency entries and receipts), messages created before
// p.MessagesBefore and idempotency entries created before
// p.IdempotencyBefore; a zero cut-off prunes nothing of its kind. It
// deletes in steps of a few thousand rows, each its own transaction. Keys
// counts the entries that expired, not those that went with their watch.
func (s *Store) Prune(ctx context.Context, p vigil.PruneParams) (vigil.PruneResult, error) {
	var res vigil.PruneResult
	for _, step := range []struct {
		before time.Time
		query  string
		count  *int
	}{
		{p.WatchesBefore, `DELETE FROM watches WHERE id IN (SELECT id FROM watches
			WHERE settled_at < $1 AND state <> 'pending' LIMIT $2)`, &res.Watches},
		{p.MessagesBefore, `DELETE FROM messages WHERE seq IN (SELECT seq FROM messages
			WHERE created_at < $1 LIMIT $2)`, &res.Messages},
		{p.IdempotencyBefore, `DELETE FROM idempotency WHERE (recipient, key) IN (SELECT recipient, key
			FROM idempotency WHERE created_at < $1 LIMIT $2)`, &res.Keys},
	} {
		if step.before.IsZero() {
			continue
		}
		for {
			tag, err := s.pool.Exec(ctx, step.query, step.before.UnixMilli(), pruneChunk)
			if err != nil {
				return res, wrap("prune", err)
			}
			*step.count += int(tag.RowsAffected())
			if tag.RowsAffected() < pruneChunk {
				break
			}
		}
	}
	var settled, message, key *int64
	err := s.pool.QueryRow(ctx, `SELECT
		(SELECT min(settled_at) FROM watches WHERE settled_at IS NOT NULL),
		(SELECT min(created_at) FROM messages),
		(SELECT min(created_at) FROM idempotency)`).Scan(&settled, &message, &key)
	if err != nil {
		return res, wrap("prune: find oldest rows", err)
	}
	res.OldestSettled, res.OldestMessage, res.OldestKey = msTime(settled), msTime(message), msTime(key)
	return res, nil
}

// MessagesLastSeq returns the seq of the newest message of every mailbox
// (0 when there is none): where a reader of what comes next starts.
func (s *Store) MessagesLastSeq(ctx context.Context) (int64, error) {
	var seq int64
	if err := s.pool.QueryRow(ctx, `SELECT coalesce(max(seq), 0) FROM messages`).Scan(&seq); err != nil {
		return 0, wrap("read the last message seq", err)
	}
	return seq, nil
}
