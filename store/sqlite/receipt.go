package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/vigil-run/vigil"
)

// ReceiptUpsert writes one receipt and rewrites the watch's receipts column
// from the receipts table, in one transaction.
func (s *Store) ReceiptUpsert(ctx context.Context, p vigil.ReceiptUpsertParams) error {
	r := p.ReceiptRecord
	if r.WatchID == "" || r.Channel == "" || r.Status == "" {
		return vigil.Errorf(vigil.CodeInvalidRequest, "a receipt needs a watch id, a channel and a status")
	}
	return s.w.do(ctx, func(t *wtx) error {
		bg := context.Background()
		var one int
		err := t.conn.QueryRowContext(bg, `SELECT 1 FROM watches WHERE id = ?`, r.WatchID).Scan(&one)
		if errors.Is(err, sql.ErrNoRows) {
			return notFound(r.WatchID)
		}
		if err != nil {
			return wrap("write receipt", err)
		}
		if p.Claim || p.Ends {
			var status string
			var attempts int
			err := t.conn.QueryRowContext(bg, `SELECT status, attempts FROM receipts WHERE watch_id = ? AND channel = ?`,
				r.WatchID, r.Channel).Scan(&status, &attempts)
			if err != nil && !errors.Is(err, sql.ErrNoRows) {
				return wrap("write receipt", err)
			}
			if !p.Accepts(err == nil, status, attempts) {
				return vigil.ErrClaimed
			}
		}
		if _, err := t.conn.ExecContext(bg, `INSERT INTO receipts
			(watch_id, channel, message_id, status, attempts, detail, next_at, updated_at)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?)
			ON CONFLICT (watch_id, channel) DO UPDATE SET message_id = excluded.message_id,
				status = excluded.status, attempts = excluded.attempts, detail = excluded.detail,
				next_at = excluded.next_at, updated_at = excluded.updated_at`,
			r.WatchID, r.Channel, r.MessageID, r.Status, r.Attempts, nullStr(r.Detail), ms(r.NextAt), r.UpdatedAt.UnixMilli()); err != nil {
			return wrap("write receipt", err)
		}
		return refreshReceipts(t, r.WatchID)
	})
}

// refreshReceipts rewrites a watch's receipts column from the receipts
// table, ordered by channel.
func refreshReceipts(t *wtx, watchID string) error {
	bg := context.Background()
	rows, err := t.conn.QueryContext(bg, `SELECT channel, status, attempts, detail, updated_at
		FROM receipts WHERE watch_id = ? ORDER BY channel`, watchID)
	if err != nil {
		return wrap("read receipts", err)
	}
	var rs []vigil.Receipt
	for rows.Next() {
		var (
			r      vigil.Receipt
			detail sql.NullString
			at     int64
		)
		if err := rows.Scan(&r.Channel, &r.Status, &r.Attempts, &detail, &at); err != nil {
			rows.Close()
			return wrap("read receipts", err)
		}
		r.Detail, r.UpdatedAt = detail.String, time.UnixMilli(at).UTC()
		rs = append(rs, r)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return wrap("read receipts", err)
	}
	var v any
	if len(rs) > 0 {
		b, err := json.Marshal(rs)
		if err != nil {
			return fmt.Errorf("sqlite: encode receipts: %w", err)
		}
		v = string(b)
	}
	if _, err := t.conn.ExecContext(bg, `UPDATE watches SET receipts = ? WHERE id = ?`, v, watchID); err != nil {
		return wrap("write receipts", err)
	}
	return nil
}

// ReceiptsResume turns sending receipts into unknown and returns what the
// dispatcher must pick up again after a start.
func (s *Store) ReceiptsResume(ctx context.Context, p vigil.ReceiptsResumeParams) (vigil.ReceiptsResumeResult, error) {
	var res vigil.ReceiptsResumeResult
	err := s.w.do(ctx, func(t *wtx) error {
		res = vigil.ReceiptsResumeResult{}
		bg := context.Background()
		if err := recordDefaults(t, p); err != nil {
			return err
		}
		var err error
		sending, err := openReceipts(t, vigil.ReceiptSending)
		if err != nil {
			return err
		}
		if res.Retrying, err = openReceipts(t, vigil.ReceiptRetrying); err != nil {
			return err
		}
		now := time.UnixMilli(p.Now.UnixMilli()).UTC()
		for _, r := range sending {
			if vigil.ResumeSending(&r, now) {
				res.Retrying = append(res.Retrying, r)
			} else {
				res.Unknown = append(res.Unknown, r)
			}
			if _, err := t.conn.ExecContext(bg, `UPDATE receipts SET status = ?, detail = ?, next_at = ?, updated_at = ?
				WHERE watch_id = ? AND channel = ?`, r.Status, r.Detail, ms(r.NextAt), r.UpdatedAt.UnixMilli(), r.WatchID, r.Channel); err != nil {
				return wrap("resume receipts", err)
			}
		}
		seen := map[string]bool{}
		for _, r := range sending {
			if !seen[r.WatchID] {
				seen[r.WatchID] = true
				if err := refreshReceipts(t, r.WatchID); err != nil {
					return err
				}
			}
		}
		if res.Undispatched, err = undispatched(t, p); err != nil {
			return err
		}
		return nil
	})
	return res, err
}

// recordDefaults records p.Defaults in recipient_defaults (see
// vigil.ReceiptsResumeParams): a new or changed default since p.Now, an
// unchanged one as it was, one gone deleted.
func recordDefaults(t *wtx, p vigil.ReceiptsResumeParams) error {
	if p.DefaultChannel == "" {
		return nil
	}
	bg := context.Background()
	rows, err := t.conn.QueryContext(bg, `SELECT recipient, key FROM recipient_defaults WHERE channel = ?`, p.DefaultChannel)
	if err != nil {
		return wrap("record defaults", err)
	}
	old := map[string]string{}
	for rows.Next() {
		var r, k string
		if err := rows.Scan(&r, &k); err != nil {
			rows.Close()
			return wrap("record defaults", err)
		}
		old[r] = k
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return wrap("record defaults", err)
	}
	for r := range old {
		if _, ok := p.Defaults[r]; !ok {
			if _, err := t.conn.ExecContext(bg, `DELETE FROM recipient_defaults WHERE channel = ? AND recipient = ?`, p.DefaultChannel, r); err != nil {
				return wrap("record defaults", err)
			}
		}
	}
	for r, k := range p.Defaults {
		if ok, has := old[r]; has && ok == k {
			continue
		}
		if _, err := t.conn.ExecContext(bg, `INSERT OR REPLACE INTO recipient_defaults (channel, recipient, key, since) VALUES (?, ?, ?, ?)`,
			p.DefaultChannel, r, k, p.Now.UnixMilli()); err != nil {
			return wrap("record defaults", err)
		}
	}
	return nil
}

// undispatched finds the settled watches that may owe a channel its first
// attempt: a channel their deliver names among p.Channels, or their
// recipient's default channel if they settled while it was recorded
// (recipient_defaults), with no receipt. A deliver that is not valid JSON
// names nothing.
func undispatched(t *wtx, p vigil.ReceiptsResumeParams) ([]vigil.Undispatched, error) {
	var owed []string
	// def: the watch settled while its recipient's default was configured.
	const def = `EXISTS (SELECT 1 FROM recipient_defaults AS d
		WHERE d.channel = ?1 AND d.recipient = w.recipient AND d.since <= w.settled_at)`
	args := []any{p.DefaultChannel, p.SettledSince.UnixMilli()}
	if len(p.Channels) > 0 {
		owed = append(owed, `(w.deliver IS NOT NULL AND EXISTS (
			SELECT 1 FROM json_each(CASE WHEN json_valid(w.deliver) THEN w.deliver END) AS j
			WHERE j.key IN (`+numbered(len(args)+1, len(p.Channels))+`)
				AND NOT EXISTS (SELECT 1 FROM receipts AS r WHERE r.watch_id = w.id AND r.channel = j.key)))`)
		for _, c := range p.Channels {
			args = append(args, c)
		}
	}
	if p.DefaultChannel != "" && len(p.Defaults) > 0 {
		owed = append(owed, `(`+def+` AND NOT EXISTS (SELECT 1 FROM receipts AS r WHERE r.watch_id = w.id AND r.channel = ?1))`)
	}
	if len(owed) == 0 {
		return nil, nil
	}
	q := `SELECT w.id, m.id, (SELECT json_group_array(channel) FROM (
			SELECT r.channel FROM receipts AS r WHERE r.watch_id = w.id ORDER BY r.channel)), ` + def + `
		FROM watches AS w
		JOIN messages AS m ON m.watch_id = w.id
			AND (m.type = 'fired' OR m.type = 'failed' OR m.type = 'expired' OR m.type = 'errored')
		WHERE w.settled_at IS NOT NULL AND w.settled_at >= ?2 AND w.answered_at_creation = 0
			AND (` + strings.Join(owed, " OR ") + `)`
	rows, err := t.conn.QueryContext(context.Background(), q, args...)
	if err != nil {
		return nil, wrap("resume receipts", err)
	}
	defer rows.Close()
	var out []vigil.Undispatched
	for rows.Next() {
		var (
			u    vigil.Undispatched
			have string
		)
		if err := rows.Scan(&u.WatchID, &u.MessageID, &have, &u.Default); err != nil {
			return nil, wrap("resume receipts", err)
		}
		if err := json.Unmarshal([]byte(have), &u.Receipted); err != nil {
			return nil, fmt.Errorf("sqlite: resume receipts: %w", err)
		}
		if len(u.Receipted) == 0 {
			u.Receipted = nil
		}
		out = append(out, u)
	}
	if err := rows.Err(); err != nil {
		return nil, wrap("resume receipts", err)
	}
	// Sorted here, not by the query: an ORDER BY w.id would walk every
	// watch by its primary key instead of the settled ones by watches_settled.
	slices.SortFunc(out, func(a, b vigil.Undispatched) int { return strings.Compare(a.WatchID, b.WatchID) })
	return out, nil
}

// numbered returns n numbered parameters from ?first: "?3, ?4, ?5".
func numbered(first, n int) string {
	ps := make([]string, n)
	for i := range ps {
		ps[i] = "?" + strconv.Itoa(first+i)
	}
	return strings.Join(ps, ", ")
}

func openReceipts(t *wtx, status string) ([]vigil.ReceiptRecord, error) {
	rows, err := t.conn.QueryContext(context.Background(), `SELECT watch_id, channel, message_id, status, attempts, detail, next_at, updated_at
		FROM receipts WHERE status = ? ORDER BY watch_id, channel`, status)
	if err != nil {
		return nil, wrap("resume receipts", err)
	}
	defer rows.Close()
	var out []vigil.ReceiptRecord
	for rows.Next() {
		var (
			r      vigil.ReceiptRecord
			detail sql.NullString
			next   sql.NullInt64
			at     int64
		)
		if err := rows.Scan(&r.WatchID, &r.Channel, &r.MessageID, &r.Status, &r.Attempts, &detail, &next, &at); err != nil {
			return nil, wrap("resume receipts", err)
		}
		r.Detail, r.NextAt, r.UpdatedAt = detail.String, msTime(next), time.UnixMilli(at).UTC()
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, wrap("resume receipts", err)
	}
	return out, nil
}
