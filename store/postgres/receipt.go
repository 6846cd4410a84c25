package postgres

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/vigil-run/vigil"
)

// ReceiptUpsert writes one receipt and rewrites the watch's receipts column
// from the receipts table, in one transaction, with the watch's row locked
// so that two writers of its receipts cannot leave the column stale.
func (s *Store) ReceiptUpsert(ctx context.Context, p vigil.ReceiptUpsertParams) error {
	r := p.ReceiptRecord
	if r.WatchID == "" || r.Channel == "" || r.Status == "" {
		return vigil.Errorf(vigil.CodeInvalidRequest, "a receipt needs a watch id, a channel and a status")
	}
	return wrap("write receipt", s.write(ctx, func(tx pgx.Tx) error {
		// Fenced: a receipt (the "sending" written before an attempt goes
		// out above all) only for a watch whose shard this replica holds.
		if ok, err := s.fenceIDs(ctx, tx, []string{r.WatchID}); err != nil {
			return err
		} else if len(ok) == 0 {
			return ErrFenced
		}
		var one int
		err := tx.QueryRow(ctx, `SELECT 1 FROM watches WHERE id = $1 FOR UPDATE`, r.WatchID).Scan(&one)
		if errors.Is(err, pgx.ErrNoRows) {
			return notFound(r.WatchID)
		}
		if err != nil {
			return err
		}
		if p.Claim || p.Ends {
			// The watch's row is locked: every writer of its receipts
			// waits here, and reads what the one before committed.
			var status string
			var attempts int
			err := tx.QueryRow(ctx, `SELECT status, attempts FROM receipts WHERE watch_id = $1 AND channel = $2`,
				r.WatchID, r.Channel).Scan(&status, &attempts)
			if err != nil && !errors.Is(err, pgx.ErrNoRows) {
				return err
			}
			if !p.Accepts(err == nil, status, attempts) {
				return vigil.ErrClaimed
			}
		}
		if _, err := tx.Exec(ctx, `INSERT INTO receipts
			(watch_id, channel, message_id, status, attempts, detail, next_at, updated_at)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
			ON CONFLICT (watch_id, channel) DO UPDATE SET message_id = excluded.message_id,
				status = excluded.status, attempts = excluded.attempts, detail = excluded.detail,
				next_at = excluded.next_at, updated_at = excluded.updated_at`,
			r.WatchID, r.Channel, r.MessageID, r.Status, r.Attempts, nullStr(r.Detail), ms(r.NextAt), r.UpdatedAt.UnixMilli()); err != nil {
			return err
		}
		return refreshReceipts(ctx, tx, r.WatchID)
	}))
}

// refreshReceipts rewrites a watch's receipts column from the receipts
// table, ordered by channel.
func refreshReceipts(ctx context.Context, tx pgx.Tx, watchID string) error {
	rows, err := tx.Query(ctx, `SELECT channel, status, attempts, detail, updated_at
		FROM receipts WHERE watch_id = $1 ORDER BY channel`, watchID)
	if err != nil {
		return err
	}
	var rs []vigil.Receipt
	for rows.Next() {
		var (
			r      vigil.Receipt
			detail *string
			at     int64
		)
		if err := rows.Scan(&r.Channel, &r.Status, &r.Attempts, &detail, &at); err != nil {
			rows.Close()
			return err
		}
		r.Detail, r.UpdatedAt = deref(detail), time.UnixMilli(at).UTC()
		rs = append(rs, r)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	var v *string
	if len(rs) > 0 {
		if v, err = jsonText(rs); err != nil {
			return fmt.Errorf("encode receipts: %w", err)
		}
	}
	_, err = tx.Exec(ctx, `UPDATE watches SET receipts = $1 WHERE id = $2`, v, watchID)
	return err
}

// ReceiptsResume turns sending receipts into unknown and returns what the
// dispatcher must pick up again after a start.
func (s *Store) ReceiptsResume(ctx context.Context, p vigil.ReceiptsResumeParams) (vigil.ReceiptsResumeResult, error) {
	return s.receiptsResume(ctx, p, nil)
}

// ReceiptsResumeShards is ReceiptsResume for the watches of shards only:
// what a replica that gained them resumes (the receipts of the shards it
// held already are its own deliveries, in flight).
func (s *Store) ReceiptsResumeShards(ctx context.Context, p vigil.ReceiptsResumeParams, shards []int) (vigil.ReceiptsResumeResult, error) {
	if len(shards) == 0 {
		return vigil.ReceiptsResumeResult{}, nil
	}
	sh := make([]int16, len(shards))
	for i, v := range shards {
		sh[i] = int16(v)
	}
	return s.receiptsResume(ctx, p, sh)
}

// receiptsResume is ReceiptsResume over the watches of shards (nil: all).
func (s *Store) receiptsResume(ctx context.Context, p vigil.ReceiptsResumeParams, shards []int16) (vigil.ReceiptsResumeResult, error) {
	var res vigil.ReceiptsResumeResult
	err := s.write(ctx, func(tx pgx.Tx) error {
		res = vigil.ReceiptsResumeResult{}
		if err := recordDefaults(ctx, tx, p); err != nil {
			return err
		}
		var err error
		shards := shards
		if f := s.fence.Load(); f != nil && shards != nil {
			// Fenced: only the shards this replica still holds.
			if shards, err = s.fenceShards(ctx, tx, f, shards); err != nil || len(shards) == 0 {
				return err
			}
		}
		// Lock them first, in a fixed order, as the receipts' writers do.
		if _, err := tx.Exec(ctx, `SELECT 1 FROM watches WHERE id IN (SELECT watch_id FROM receipts WHERE status = 'sending')
			AND ($1::smallint[] IS NULL OR shard = ANY($1)) ORDER BY id FOR UPDATE`, shards); err != nil {
			return err
		}
		sending, err := openReceipts(ctx, tx, vigil.ReceiptSending, shards)
		if err != nil {
			return err
		}
		if res.Retrying, err = openReceipts(ctx, tx, vigil.ReceiptRetrying, shards); err != nil {
			return err
		}
		now := time.UnixMilli(p.Now.UnixMilli()).UTC()
		for _, r := range sending {
			if vigil.ResumeSending(&r, now) {
				res.Retrying = append(res.Retrying, r)
			} else {
				res.Unknown = append(res.Unknown, r)
			}
			if _, err := tx.Exec(ctx, `UPDATE receipts SET status = $1, detail = $2, next_at = $3, updated_at = $4
				WHERE watch_id = $5 AND channel = $6`, r.Status, r.Detail, ms(r.NextAt), r.UpdatedAt.UnixMilli(), r.WatchID, r.Channel); err != nil {
				return err
			}
		}
		seen := map[string]bool{}
		for _, r := range sending {
			if !seen[r.WatchID] {
				seen[r.WatchID] = true
				if err := refreshReceipts(ctx, tx, r.WatchID); err != nil {
					return err
				}
			}
		}
		res.Undispatched, err = undispatched(ctx, tx, p, shards)
		return err
	})
	if err != nil {
		return vigil.ReceiptsResumeResult{}, wrap("resume receipts", err)
	}
	return res, nil
}

// recordDefaults records p.Defaults in recipient_defaults (see
// vigil.ReceiptsResumeParams): a new or changed default since p.Now, an
// unchanged one as it was, one gone deleted. Replicas starting together
// with the same configuration write the same rows: the first keeps its
// time.
func recordDefaults(ctx context.Context, tx pgx.Tx, p vigil.ReceiptsResumeParams) error {
	if p.DefaultChannel == "" {
		return nil
	}
	rs := make([]string, 0, len(p.Defaults))
	keys := make([]string, 0, len(p.Defaults))
	for r, k := range p.Defaults {
		rs, keys = append(rs, r), append(keys, k)
	}
	if _, err := tx.Exec(ctx, `DELETE FROM recipient_defaults WHERE channel = $1 AND NOT (recipient = ANY($2::text[]))`, p.DefaultChannel, rs); err != nil {
		return err
	}
	if len(rs) == 0 {
		return nil
	}
	_, err := tx.Exec(ctx, `INSERT INTO recipient_defaults (channel, recipient, key, since)
		SELECT $1, d.recipient, d.key, $4 FROM unnest($2::text[], $3::text[]) AS d(recipient, key)
		ON CONFLICT (channel, recipient) DO UPDATE SET key = excluded.key, since = excluded.since
			WHERE recipient_defaults.key <> excluded.key`, p.DefaultChannel, rs, keys, p.Now.UnixMilli())
	return err
}

// undispatched finds the settled watches that may owe a channel its first
// attempt: a channel their deliver names among p.Channels, or their
// recipient's default channel if they settled while it was recorded
// (recipient_defaults), with no receipt. A deliver that is not a JSON
// object names nothing.
func undispatched(ctx context.Context, tx pgx.Tx, p vigil.ReceiptsResumeParams, shards []int16) ([]vigil.Undispatched, error) {
	return undispatchedBy(ctx, tx, p, shards, nil)
}

// UndispatchedElsewhere reads, and writes nothing, the settled watches of
// shards that ReceiptsResume would find undispatched and that a daemon
// other than this replica settled since p.SettledSince: the outcomes of
// completions made on other replicas (vigil.WatchSettleParams.Answered),
// which the holder of their shard delivers when it hears of them, for a
// holder that may not have (its listener reconnected, or it had more to
// take than it could queue). What this replica settled it delivers itself.
func (s *Store) UndispatchedElsewhere(ctx context.Context, p vigil.ReceiptsResumeParams, shards []int) ([]vigil.Undispatched, error) {
	if len(shards) == 0 {
		return nil, nil
	}
	sh := make([]int16, len(shards))
	for i, v := range shards {
		sh[i] = int16(v)
	}
	var out []vigil.Undispatched
	err := pgx.BeginTxFunc(ctx, s.pool, pgx.TxOptions{AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		var err error
		out, err = undispatchedBy(ctx, tx, p, sh, &s.replica)
		return err
	})
	if err != nil {
		return nil, wrap("read undispatched outcomes", err)
	}
	return out, nil
}

// undispatchedBy is undispatched, of the watches settled by a daemon other
// than notBy when it is set.
func undispatchedBy(ctx context.Context, tx pgx.Tx, p vigil.ReceiptsResumeParams, shards []int16, notBy *string) ([]vigil.Undispatched, error) {
	var owed []string
	// def: the watch settled while its recipient's default was configured.
	const def = `EXISTS (SELECT 1 FROM recipient_defaults AS d
		WHERE d.channel = $2 AND d.recipient = w.recipient AND d.since <= w.settled_at)`
	args := []any{p.SettledSince.UnixMilli(), p.DefaultChannel}
	inShards := ""
	if shards != nil {
		args = append(args, shards)
		inShards = fmt.Sprintf(" AND w.shard = ANY($%d)", len(args))
	}
	if notBy != nil {
		args = append(args, nullStr(*notBy))
		inShards += fmt.Sprintf(" AND w.settled_by IS DISTINCT FROM $%d", len(args))
	}
	if len(p.Channels) > 0 {
		args = append(args, p.Channels)
		owed = append(owed, fmt.Sprintf(`(w.deliver LIKE '{%%' AND EXISTS (
			SELECT 1 FROM jsonb_object_keys(w.deliver::jsonb) AS j(key)
			WHERE j.key = ANY($%d) AND NOT EXISTS (SELECT 1 FROM receipts AS r WHERE r.watch_id = w.id AND r.channel = j.key)))`, len(args)))
	}
	if p.DefaultChannel != "" && len(p.Defaults) > 0 {
		owed = append(owed, `(`+def+` AND NOT EXISTS (SELECT 1 FROM receipts AS r WHERE r.watch_id = w.id AND r.channel = $2))`)
	}
	if len(owed) == 0 {
		return nil, nil
	}
	q := `SELECT w.id, m.id, coalesce((SELECT array_agg(r.channel ORDER BY r.channel) FROM receipts AS r WHERE r.watch_id = w.id), '{}'), ` + def + `
		FROM watches AS w
		JOIN messages AS m ON m.watch_id = w.id AND m.type IN ('fired', 'failed', 'expired', 'errored')
		WHERE w.settled_at IS NOT NULL AND w.settled_at >= $1 AND NOT w.answered_at_creation` + inShards + `
			AND (` + strings.Join(owed, " OR ") + `)`
	rows, err := tx.Query(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []vigil.Undispatched
	for rows.Next() {
		var u vigil.Undispatched
		if err := rows.Scan(&u.WatchID, &u.MessageID, &u.Receipted, &u.Default); err != nil {
			return nil, err
		}
		if len(u.Receipted) == 0 {
			u.Receipted = nil
		}
		out = append(out, u)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	slices.SortFunc(out, func(a, b vigil.Undispatched) int { return strings.Compare(a.WatchID, b.WatchID) })
	return out, nil
}

func openReceipts(ctx context.Context, tx pgx.Tx, status string, shards []int16) ([]vigil.ReceiptRecord, error) {
	rows, err := tx.Query(ctx, `SELECT watch_id, channel, message_id, status, attempts, detail, next_at, updated_at
		FROM receipts WHERE status = $1
			AND ($2::smallint[] IS NULL OR watch_id IN (SELECT id FROM watches WHERE shard = ANY($2)))
		ORDER BY watch_id, channel`, status, shards)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []vigil.ReceiptRecord
	for rows.Next() {
		var (
			r      vigil.ReceiptRecord
			detail *string
			next   *int64
			at     int64
		)
		if err := rows.Scan(&r.WatchID, &r.Channel, &r.MessageID, &r.Status, &r.Attempts, &detail, &next, &at); err != nil {
			return nil, err
		}
		r.Detail, r.NextAt, r.UpdatedAt = deref(detail), msTime(next), time.UnixMilli(at).UTC()
		out = append(out, r)
	}
	return out, rows.Err()
}
