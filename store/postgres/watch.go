package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"maps"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/vigil-run/vigil"
	"github.com/vigil-run/vigil/internal/settlement"
)

const (
	sqlWatchByID   = `SELECT ` + watchColumns + ` FROM watches WHERE id = $1`
	sqlWatchInsert = `INSERT INTO watches (` + watchColumns + `) VALUES (` + "%s" + `)`
	sqlLedgerGet   = `SELECT request_hash, watch_id, existing FROM idempotency WHERE recipient = $1 AND key = $2 AND created_at >= $3`
)

var sqlWatchInsertFull = fmt.Sprintf(sqlWatchInsert, placeholders(1, watchColumnCount))

// stripes is how many rows totals has.
const stripes = 64

// stripe is the stripe of totals a watch counts in.
func stripe(id string) int32 {
	h := fnv.New32a()
	h.Write([]byte(id))
	return int32(h.Sum32() % stripes)
}

// unpend moves the counters down for watches that left pending: the total
// first, then each recipient's counter in name order (see createOne), in
// one pipelined batch: one round trip however many recipients settle.
//
// The total moves down in one stripe, the stripe of the smallest id: the
// cap reads only the sum of the stripes, and a stripe alone may go below
// zero. Moving each watch's own stripe locked most of the 64 for a batch
// of timers, so that every settlement of every replica waited for the
// one before it to commit.
func unpend(ctx context.Context, tx pgx.Tx, settled map[string][]string) error {
	n, first := 0, ""
	for _, ids := range settled {
		for _, id := range ids {
			if n++; first == "" || id < first {
				first = id
			}
		}
	}
	var b pgx.Batch
	if n > 0 {
		b.Queue(`UPDATE totals SET pending = pending - $2 WHERE stripe = $1`, stripe(first), n)
	}
	// The recipients' counters in two statements, however many there
	// are: their rows locked in recipient order (as every writer locks
	// them, so that two cannot deadlock), then moved by one UPDATE.
	var (
		recipients []string
		counts     []int64
	)
	for _, r := range slices.Sorted(maps.Keys(settled)) {
		if len(settled[r]) > 0 {
			recipients, counts = append(recipients, r), append(counts, int64(len(settled[r])))
		}
	}
	if len(recipients) == 1 {
		b.Queue(`UPDATE counters SET pending = pending - $2 WHERE recipient = $1`, recipients[0], counts[0])
	} else if len(recipients) > 1 {
		b.Queue(`SELECT count(*) FROM (SELECT 1 FROM counters WHERE recipient = ANY($1) ORDER BY recipient FOR UPDATE) AS l`, recipients)
		b.Queue(`UPDATE counters c SET pending = c.pending - u.n FROM unnest($1::text[], $2::bigint[]) AS u(recipient, n)
			WHERE c.recipient = ANY($1) AND c.recipient = u.recipient`, recipients, counts)
	}
	if b.Len() == 0 {
		return nil
	}
	br := tx.SendBatch(ctx, &b)
	for range b.Len() {
		if _, err := br.Exec(); err != nil {
			br.Close()
			return fmt.Errorf("count pending watches: %w", err)
		}
	}
	return br.Close()
}

// WatchGet returns one watch, or a not_found error.
func (s *Store) WatchGet(ctx context.Context, id string) (*vigil.Watch, error) {
	w, err := scanWatch(s.pool.QueryRow(ctx, sqlWatchByID, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, notFound(id)
	}
	if err != nil {
		return nil, wrap("get watch "+id, err)
	}
	return w, nil
}

// IdempotencyReplay implements vigil.Store: the ledger entry, then its
// watch.
func (s *Store) IdempotencyReplay(ctx context.Context, p vigil.IdempotencyReplayParams) (*vigil.Watch, error) {
	var hash, id string
	var existing bool
	err := s.pool.QueryRow(ctx, sqlLedgerGet, p.Recipient, p.Key, sinceMS(p.Since)).Scan(&hash, &id, &existing)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return nil, nil
	case err != nil:
		return nil, wrap("read idempotency ledger", err)
	case hash != p.RequestHash:
		return nil, nil
	}
	w, err := s.WatchGet(ctx, id)
	if vigil.ErrorCode(err) == vigil.CodeNotFound {
		return nil, nil // gone since (its entry with it)
	}
	if err != nil {
		return nil, err
	}
	w.Replayed, w.Existing = true, existing
	return w, nil
}

// WatchGetMany returns the watches found among ids, in any order.
func (s *Store) WatchGetMany(ctx context.Context, ids []string) ([]*vigil.Watch, error) {
	out := make([]*vigil.Watch, 0, len(ids))
	for c := range slices.Chunk(ids, 1000) {
		rows, err := s.pool.Query(ctx, `SELECT `+watchColumns+` FROM watches WHERE id = ANY($1)`, c)
		if err != nil {
			return nil, wrap("get watches", err)
		}
		if out, err = collectWatches(out, rows); err != nil {
			return nil, wrap("get watches", err)
		}
	}
	return out, nil
}

// WatchList returns one page of watches, newest first (created_at, then id,
// descending). p.After is the opaque Next of the previous page.
func (s *Store) WatchList(ctx context.Context, p vigil.WatchListParams) (vigil.WatchPage, error) {
	var (
		where []string
		args  []any
	)
	arg := func(v any) string {
		args = append(args, v)
		return fmt.Sprintf("$%d", len(args))
	}
	if p.Recipient != "" {
		where = append(where, "recipient = "+arg(p.Recipient))
	}
	if len(p.Recipients) > 0 {
		where = append(where, "recipient = ANY("+arg(p.Recipients)+")")
	}
	switch p.State {
	case "":
	case vigil.StatePending:
		// The literal lets watches_state_created serve the list in its order.
		where = append(where, "state = 'pending'")
	default:
		where = append(where, "state = "+arg(string(p.State)))
	}
	if p.Kind != "" {
		where = append(where, "kind = "+arg(string(p.Kind)))
	}
	// The labels and the text are those of watch_text (schema 5), which
	// holds them with their GIN indexes apart from the watches, so that a
	// settlement's UPDATE adds no entry to those indexes.
	var text []string
	for _, k := range slices.Sorted(maps.Keys(p.Labels)) {
		text = append(text, "labels @> jsonb_build_object("+arg(k)+"::text, "+arg(p.Labels[k])+"::text)")
	}
	if p.Text != "" {
		// The note and predicate are stored with ASCII letters folded
		// (translate), as the Store's Text folds (lower would fold others
		// too, by the database's locale); LIKE (not strpos) is what their
		// trigram indexes answer.
		// The predicate holds &, < and > as encoding/json escapes them
		// (vigil.PredicateText).
		t := arg("%" + likeEscaper.Replace(asciiLower(p.Text)) + "%")
		pt := arg("%" + likeEscaper.Replace(vigil.PredicateText(asciiLower(p.Text))) + "%")
		text = append(text, "(note LIKE "+t+" OR predicate LIKE "+pt+")")
	}
	if len(text) > 0 {
		where = append(where, "id IN (SELECT id FROM watch_text WHERE "+strings.Join(text, " AND ")+")")
	}
	if p.After != "" {
		at, id, err := decodeCursor(p.After)
		if err != nil {
			return vigil.WatchPage{}, err
		}
		where = append(where, "(created_at, id) < ("+arg(at)+", "+arg(id)+")")
	}
	limit := pageLimit(p.Limit)
	q := `SELECT ` + watchColumns + ` FROM watches`
	if len(where) > 0 {
		q += " WHERE " + strings.Join(where, " AND ")
	}
	q += " ORDER BY created_at DESC, id DESC LIMIT " + arg(limit+1)
	// Planned for these values on every call (an unnamed statement), not
	// once for any (a cached statement's generic plan): which index serves
	// best depends on the values (a state that few watches have is read
	// from its index, one that most have in the list's order; a text is
	// found by its trigrams), and a generic plan chose the list's order
	// for a text that matches nothing, reading every watch (2 s at 100 000
	// instead of 5 ms).
	rows, err := s.pool.Query(ctx, q, append([]any{pgx.QueryExecModeExec}, args...)...)
	if err != nil {
		return vigil.WatchPage{}, wrap("list watches", err)
	}
	ws, err := collectWatches(make([]*vigil.Watch, 0, min(limit+1, 128)), rows)
	if err != nil {
		return vigil.WatchPage{}, wrap("list watches", err)
	}
	page := vigil.WatchPage{Watches: ws}
	if len(ws) > limit {
		page.Watches = ws[:limit]
		last := ws[limit-1]
		page.Next = encodeCursor(last.CreatedAt, last.ID)
	}
	return page, nil
}

// likeEscaper escapes LIKE's wildcards and its escape character, so a
// pattern '%'+escaped+'%' matches exactly the strings that contain the text.
var likeEscaper = strings.NewReplacer(`\`, `\\`, `%`, `\%`, `_`, `\_`)

// asciiLower folds ASCII letters to lower case.
func asciiLower(s string) string {
	return strings.Map(func(r rune) rune {
		if 'A' <= r && r <= 'Z' {
			return r + 'a' - 'A'
		}
		return r
	}, s)
}

// WatchCounts implements vigil.Store. It counts the watches: counts kept
// by triggers on the watches (as SQLite's schema 9 does) deadlocked
// settlements of several recipients racing on other replicas.
func (s *Store) WatchCounts(ctx context.Context, recipients []string) ([]vigil.WatchCount, error) {
	q, args := `SELECT state, kind, count(*) FROM watches`, []any{}
	if len(recipients) > 0 {
		q, args = q+` WHERE recipient = ANY($1)`, append(args, recipients)
	}
	rows, err := s.pool.Query(ctx, q+` GROUP BY state, kind`, args...)
	if err != nil {
		return nil, wrap("count watches", err)
	}
	defer rows.Close()
	out := []vigil.WatchCount{}
	for rows.Next() {
		var (
			c           vigil.WatchCount
			state, kind string
			n           int64
		)
		if err := rows.Scan(&state, &kind, &n); err != nil {
			return nil, wrap("count watches", err)
		}
		c.State, c.Kind, c.N = vigil.State(state), vigil.Kind(kind), int(n)
		out = append(out, c)
	}
	if err := rows.Err(); err != nil {
		return nil, wrap("count watches", err)
	}
	return out, nil
}

// WatchListPending returns what the scheduler needs to re-arm every pending
// watch, whatever its kind: the store never interprets kinds. With a fence
// (SetFence), only the watches of the shards it holds.
func (s *Store) WatchListPending(ctx context.Context) ([]vigil.ScheduleEntry, error) {
	if held, ok := s.heldShards(); ok {
		return s.listPending(ctx, ` AND shard = ANY($1)`, held)
	}
	return s.listPending(ctx, ``)
}

// listPending lists the pending watches that the condition where (with
// args) keeps.
func (s *Store) listPending(ctx context.Context, where string, args ...any) ([]vigil.ScheduleEntry, error) {
	rows, err := s.pool.Query(ctx, `SELECT id, kind, every_ms, deadline, start_at, created_at, polls, standing,
		errors, consecutive_errors FROM watches WHERE state = 'pending'`+where, args...)
	if err != nil {
		return nil, wrap("list pending watches", err)
	}
	defer rows.Close()
	var (
		out   []vigil.ScheduleEntry
		kinds = map[string]vigil.Kind{}
	)
	for rows.Next() {
		var (
			id, kind                                    string
			every, deadline, startAt, errs, consecutive *int64
			created, polls                              int64
			standing                                    bool
		)
		if err := rows.Scan(&id, &kind, &every, &deadline, &startAt, &created, &polls, &standing, &errs, &consecutive); err != nil {
			return nil, wrap("list pending watches", err)
		}
		k, ok := kinds[kind]
		if !ok {
			k = vigil.Kind(kind)
			kinds[kind] = k
		}
		out = append(out, vigil.ScheduleEntry{
			ID: id, Kind: k, Every: durOf(every), Deadline: msTime(deadline), StartAt: msTime(startAt),
			CreatedAt: msTime(&created), Polls: int(polls), Standing: standing,
			Errors: int(deref(errs)), ConsecutiveErrors: int(deref(consecutive)),
		})
	}
	if err := rows.Err(); err != nil {
		return nil, wrap("list pending watches", err)
	}
	return out, nil
}

// WatchObserve records a pending watch's latest observation and poll count,
// with its change message in the same transaction; it reports false,
// writing nothing, if the watch is not pending.
func (s *Store) WatchObserve(ctx context.Context, p vigil.WatchObserveParams) (bool, error) {
	var obs *string
	if p.Observation != nil {
		var err error
		if obs, err = jsonText(p.Observation); err != nil {
			return false, fmt.Errorf("postgres: watch %s: encode observation: %w", p.ID, err)
		}
	}
	var msg *vigil.Message
	if p.Message != nil {
		m := *p.Message
		m.WatchID = cmpOr(m.WatchID, p.ID)
		if m.ID == "" || m.Recipient == "" || m.Type == "" || m.CreatedAt.IsZero() {
			return false, vigil.Errorf(vigil.CodeInvalidRequest, "watch %s: a change message needs an id, recipient, type and time", p.ID)
		}
		msg = &m
	}
	var (
		won bool
		seq int64
	)
	err := s.write(ctx, func(tx pgx.Tx) error {
		won = false
		if ok, err := s.fenceIDs(ctx, tx, []string{p.ID}); err != nil || len(ok) == 0 {
			return err // fenced: another replica holds its shard now
		}
		if msg != nil || p.CheckBaseline {
			var (
				state  string
				stored *string
			)
			switch err := tx.QueryRow(ctx, `SELECT state, last_observation FROM watches WHERE id = $1 FOR UPDATE`, p.ID).Scan(&state, &stored); {
			case errors.Is(err, pgx.ErrNoRows):
				return nil
			case err != nil:
				return err
			case state != string(vigil.StatePending):
				return nil
			case !settlement.BaselineHolds(stored, p.Baseline):
				return vigil.ErrBaselineMoved
			}
		}
		tag, err := tx.Exec(ctx, `UPDATE watches SET last_observation = $1, polls = $2, errors = $3, consecutive_errors = $4,
			checked_at = coalesce($5, checked_at) WHERE id = $6 AND state = 'pending'`,
			obs, p.Polls, nullInt(p.Errors), nullInt(p.ConsecutiveErrors), ms(p.CheckedAt), p.ID)
		if err != nil {
			return err
		}
		won = tag.RowsAffected() == 1
		if won && msg != nil {
			var seqs []int64
			if seqs, err = s.insertMessages(ctx, tx, msg); err != nil {
				return err
			}
			seq = seqs[0]
		}
		return nil
	})
	if err != nil {
		return false, wrap("observe watch "+p.ID, err)
	}
	if won && p.Message != nil {
		p.Message.Seq = seq
	}
	return won, nil
}

// WatchSettle settles each watch of ps that is still pending, with its
// outcome message, all in one transaction, and reports per entry whether it
// won the compare-and-set. The watches are locked (FOR UPDATE) before their
// state is read, so two daemons settling the same watch cannot both win.
// Each message it inserts gets its Seq set.
func (s *Store) WatchSettle(ctx context.Context, ps []vigil.WatchSettleParams) ([]bool, error) {
	enc, err := settlement.Prepare("postgres", ps)
	if err != nil {
		return nil, err
	}
	ids := make([]string, len(ps))
	for i := range ps {
		ids[i] = ps[i].ID
	}
	won := make([]bool, len(ps))
	seqs := make([]int64, len(ps))
	err = s.write(ctx, func(tx pgx.Tx) error {
		clear(won)
		clear(seqs)
		// Fenced: only the watches whose shards this replica still
		// holds; the others report not won. An answer from outside a
		// probe (Answered) is anyone's to write, as a cancel is.
		var fenced, open []string
		for i := range ps {
			if ps[i].Answered {
				open = append(open, ids[i])
			} else {
				fenced = append(fenced, ids[i])
			}
		}
		// An answer's shard is asked about too, in the same statement (the
		// lease rows locked in one order), though it is settled whoever
		// holds it: one this replica's fence names but the database says it
		// lost (its lease lapsed, the shard taken over) is the holder's to
		// deliver, which must be told (quiet), as for a shard not named.
		mine := slices.Clip(open)
		heldOpen := map[string]bool{}
		if len(ps) > 0 {
			unkept := make(map[string]bool, len(open))
			for _, id := range open {
				unkept[id] = true
			}
			kept, err := s.fenceIDsBut(ctx, tx, slices.Concat(fenced, open), unkept)
			if err != nil {
				return err
			}
			for _, id := range kept {
				if unkept[id] {
					heldOpen[id] = true
				} else {
					mine = append(mine, id)
				}
			}
		}
		if len(mine) == 0 {
			return nil
		}
		f := s.fence.Load()
		// By the primary key alone: with "AND state = 'pending'" in the
		// query, a table not analyzed yet (a storm into a new database)
		// was read through the pending partial index, all of it, id
		// checked entry by entry (three times the CPU of the settlement
		// itself). A row already settled is locked and left alone.
		// joined is read under the same lock as the state: a join
		// (WatchJoin) on any replica either committed before and is
		// seen, or waits for this commit and finds the watch settled.
		rows, err := tx.Query(ctx, `SELECT id, recipient, state, joined FROM watches WHERE id = ANY($1) ORDER BY id FOR UPDATE`, mine)
		if err != nil {
			return err
		}
		type lockedRow struct {
			recipient string
			joined    bool
		}
		pending := map[string]lockedRow{}
		for rows.Next() {
			var (
				id, state string
				r         lockedRow
			)
			if err := rows.Scan(&id, &r.recipient, &state, &r.joined); err != nil {
				rows.Close()
				return err
			}
			if state == string(vigil.StatePending) {
				pending[id] = r
			}
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		var (
			settled = map[string][]string{}
			msgs    []*vigil.Message
			at      []int
			quiet   []Event // settled with no message: said otherwise
		)
		// One statement settles them all, by the primary key alone (see
		// above): the rows are locked and were read pending under the
		// lock. "id = ANY" keeps the plan on the primary key: joined to
		// the unnest alone, a storm's table was read whole for each
		// batch. A statement per watch cost PostgreSQL a quarter more CPU
		// (an executor started and stopped 512 times for a storm's
		// batch).
		var (
			order                      []int
			uIDs, uStates              []string
			uOutcomes, uLastObs        []*string
			uSettled, uPolls, uChecked []int64
			uErrors, uConsecutive      []*int64
			uAnswered, uHasChecked     []bool
		)
		for i := range ps {
			p := &ps[i]
			row, ok := pending[p.ID]
			if !ok {
				continue // already settled, no such watch, or earlier in ps: lost
			}
			delete(pending, p.ID)
			recipient := row.recipient
			// Answered at creation, the message is written only when a
			// registration joined the watch; then it is not answered at
			// creation.
			m, answered := enc[i].Message, p.AnsweredAtCreation && !row.joined
			if answered {
				m = nil
			}
			order = append(order, i)
			uIDs, uStates = append(uIDs, p.ID), append(uStates, string(p.State))
			uOutcomes, uLastObs = append(uOutcomes, enc[i].Outcome), append(uLastObs, enc[i].LastObs)
			uSettled, uPolls = append(uSettled, p.SettledAt.UnixMilli()), append(uPolls, int64(p.Polls))
			uErrors, uConsecutive = append(uErrors, nullInt(p.Errors)), append(uConsecutive, nullInt(p.ConsecutiveErrors))
			uAnswered = append(uAnswered, answered)
			uHasChecked, uChecked = append(uHasChecked, !p.CheckedAt.IsZero()), append(uChecked, p.CheckedAt.UnixMilli())
			won[i] = true
			settled[recipient] = append(settled[recipient], p.ID)
			if m != nil {
				m.Recipient = cmpOr(m.Recipient, recipient)
				msgs, at = append(msgs, m), append(at, i)
				if sh := ShardOf(p.ID); p.Answered && f != nil && !heldOpen[p.ID] {
					// Settled here for another replica's shard: its
					// holder delivers it (the fence refuses this
					// replica's receipts).
					quiet = append(quiet, Event{Kind: EventWatch, WatchID: p.ID, Recipient: recipient, Shard: sh, Origin: s.origin, Gone: true, Message: m.ID})
				}
			} else {
				// Answered at creation: no message tells the other
				// replicas, whose waits on it and event streams read
				// the watch on this (as after a cancel).
				quiet = append(quiet, Event{Kind: EventWatch, WatchID: p.ID, Recipient: recipient, Shard: ShardOf(p.ID), Origin: s.origin, Gone: true})
			}
		}
		if len(order) > 0 {
			tag, err := tx.Exec(ctx, `UPDATE watches w SET state = u.state, outcome = u.outcome, settled_at = u.settled_at,
				polls = u.polls, last_observation = coalesce(u.last_observation, w.last_observation),
				answered_at_creation = u.answered, errors = u.errors, consecutive_errors = u.consecutive,
				checked_at = CASE WHEN u.has_checked THEN u.checked_at ELSE w.checked_at END, settled_by = $12
				FROM unnest($1::text[], $2::text[], $3::text[], $4::bigint[], $5::bigint[], $6::text[], $7::boolean[],
					$8::bigint[], $9::bigint[], $10::boolean[], $11::bigint[])
					AS u(id, state, outcome, settled_at, polls, last_observation, answered, errors, consecutive, has_checked, checked_at)
				WHERE w.id = ANY($1) AND w.id = u.id`,
				uIDs, uStates, uOutcomes, uSettled, uPolls, uLastObs, uAnswered, uErrors, uConsecutive, uHasChecked, uChecked,
				nullStr(s.replica))
			if err != nil {
				return err
			}
			if n := tag.RowsAffected(); n != int64(len(order)) {
				return fmt.Errorf("settle watches: %d rows changed, want %d", n, len(order))
			}
		}
		if err := unpend(ctx, tx, settled); err != nil {
			return err
		}
		if err := s.notify(ctx, tx, quiet...); err != nil {
			return err
		}
		if len(msgs) == 0 {
			return nil
		}
		got, err := s.insertMessages(ctx, tx, msgs...)
		if err != nil {
			return err
		}
		for j, i := range at {
			seqs[i] = got[j]
		}
		return nil
	})
	if err != nil {
		return nil, wrap("settle watches", err)
	}
	for i := range ps {
		if won[i] && ps[i].Message != nil && seqs[i] != 0 {
			ps[i].Message.Seq = seqs[i]
		}
	}
	return won, nil
}

// WatchJoin marks pending watch id joined by a registration answered with
// it as existing, on whichever replica (not fenced: the join is not the
// holder's): a settlement answered at creation then mails its outcome all
// the same (see WatchSettle). The UPDATE waits for the lock of a
// settlement in flight and, under READ COMMITTED, checks the state of the
// row it committed: false when the watch is no longer pending, or gone.
func (s *Store) WatchJoin(ctx context.Context, id string) (bool, error) {
	tag, err := s.pool.Exec(ctx, `UPDATE watches SET joined = true WHERE id = $1 AND state = 'pending'`, id)
	if err != nil {
		return false, wrap("join watch "+id, err)
	}
	return tag.RowsAffected() == 1, nil
}

// WatchCancel cancels a pending watch, with its optional neutral message in
// the same transaction. It returns the watch as it is afterwards and whether
// this call cancelled it; a watch already settled comes back unchanged with
// false. not_found if there is no such watch, or it belongs to a recipient
// outside a non-empty p.Recipients.
func (s *Store) WatchCancel(ctx context.Context, p vigil.WatchCancelParams) (*vigil.Watch, bool, error) {
	prep, err := settlement.Cancel("postgres", p)
	if err != nil {
		return nil, false, err
	}
	outcome, msg := prep.Outcome, prep.Message
	var (
		out *vigil.Watch
		won bool
		seq int64
	)
	err = s.write(ctx, func(tx pgx.Tx) error {
		won = false
		var recipient, state string
		err := tx.QueryRow(ctx, `SELECT recipient, state FROM watches WHERE id = $1 FOR UPDATE`, p.ID).Scan(&recipient, &state)
		if errors.Is(err, pgx.ErrNoRows) || (err == nil && len(p.Recipients) > 0 && !slices.Contains(p.Recipients, recipient)) {
			return notFound(p.ID)
		}
		if err != nil {
			return err
		}
		if vigil.State(state) == vigil.StatePending {
			live := !p.CheckedAt.IsZero()
			tag, err := tx.Exec(ctx, `UPDATE watches SET state = 'cancelled', outcome = $1, settled_at = $2,
				polls = CASE WHEN $4 THEN $5 ELSE polls END,
				errors = CASE WHEN $4 THEN $6 ELSE errors END,
				consecutive_errors = CASE WHEN $4 THEN $7 ELSE consecutive_errors END,
				checked_at = coalesce($8, checked_at)
				WHERE id = $3 AND state = 'pending'`,
				outcome, p.SettledAt.UnixMilli(), p.ID, live, int64(p.Polls), nullInt(p.Errors), nullInt(p.ConsecutiveErrors), ms(p.CheckedAt))
			if err != nil {
				return err
			}
			won = tag.RowsAffected() == 1
			if won {
				if err := unpend(ctx, tx, map[string][]string{recipient: {p.ID}}); err != nil {
					return err
				}
				if err := s.notify(ctx, tx, Event{Kind: EventWatch, WatchID: p.ID, Recipient: recipient, Shard: ShardOf(p.ID), Origin: s.origin, Gone: true}); err != nil {
					return err
				}
				if msg != nil {
					msg.Recipient = cmpOr(msg.Recipient, recipient)
					seqs, err := s.insertMessages(ctx, tx, msg)
					if err != nil {
						return err
					}
					seq = seqs[0]
				}
			}
		}
		out, err = scanWatch(tx.QueryRow(ctx, sqlWatchByID, p.ID))
		return err
	})
	if err != nil {
		return nil, false, wrap("cancel watch "+p.ID, err)
	}
	if won && p.Message != nil {
		p.Message.Seq = seq
	}
	return out, won, nil
}

// WatchDelete removes a settled watch (and its receipts and idempotency
// entries); its mailbox messages stay. conflict if it is still pending,
// not_found if there is no such watch.
func (s *Store) WatchDelete(ctx context.Context, id string) error {
	return wrap("delete watch "+id, s.write(ctx, func(tx pgx.Tx) error {
		var state string
		err := tx.QueryRow(ctx, `SELECT state FROM watches WHERE id = $1 FOR UPDATE`, id).Scan(&state)
		if errors.Is(err, pgx.ErrNoRows) {
			return notFound(id)
		}
		if err != nil {
			return err
		}
		if vigil.State(state) == vigil.StatePending {
			return vigil.Errorf(vigil.CodeConflict, "watch %s is still pending: cancel it before deleting it", id)
		}
		_, err = tx.Exec(ctx, `DELETE FROM watches WHERE id = $1`, id)
		return err
	}))
}

// WatchDeliverSet replaces a watch's delivery options, whatever its state;
// not_found if there is no such watch.
func (s *Store) WatchDeliverSet(ctx context.Context, p vigil.WatchDeliverSetParams) error {
	if len(p.Deliver) > 0 && !json.Valid(p.Deliver) {
		return vigil.Errorf(vigil.CodeInvalidRequest, "watch %s: the delivery options are not JSON", p.ID)
	}
	tag, err := s.pool.Exec(ctx, `UPDATE watches SET deliver = $1 WHERE id = $2`, rawText(p.Deliver), p.ID)
	if err != nil {
		return wrap("set delivery options of watch "+p.ID, err)
	}
	if tag.RowsAffected() == 0 {
		return notFound(p.ID)
	}
	return nil
}

// RecipientClose cancels every pending watch of p.Recipient silently (no
// messages) and returns their ids.
func (s *Store) RecipientClose(ctx context.Context, p vigil.RecipientCloseParams) ([]string, error) {
	var outcome *string
	if p.Outcome != nil {
		var err error
		if outcome, err = jsonText(p.Outcome); err != nil {
			return nil, fmt.Errorf("postgres: close recipient %s: encode outcome: %w", p.Recipient, err)
		}
	}
	if p.SettledAt.IsZero() {
		return nil, vigil.Errorf(vigil.CodeInvalidRequest, "closing recipient %s needs the time its watches settled", p.Recipient)
	}
	var ids []string
	err := s.write(ctx, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, `UPDATE watches SET state = 'cancelled', outcome = $1, settled_at = $2
			WHERE recipient = $3 AND state = 'pending' RETURNING id`, outcome, p.SettledAt.UnixMilli(), p.Recipient)
		if err != nil {
			return err
		}
		if ids, err = pgx.CollectRows(rows, pgx.RowTo[string]); err != nil {
			return err
		}
		if err := unpend(ctx, tx, map[string][]string{p.Recipient: ids}); err != nil {
			return err
		}
		if len(ids) == 0 {
			return nil
		}
		// Each watch gone, as a cancel announces it: the holder of its
		// shard forgets it and stops what its probes started (a run's
		// program), which the close of the recipient alone did not tell
		// it. Then the close, for the waits on them.
		evs := make([]Event, 0, len(ids)+1)
		for _, id := range ids {
			evs = append(evs, Event{Kind: EventWatch, WatchID: id, Recipient: p.Recipient, Shard: ShardOf(id), Origin: s.origin, Gone: true})
		}
		return s.notify(ctx, tx, append(evs, Event{Kind: EventClose, Recipient: p.Recipient})...)
	})
	if err != nil {
		return nil, wrap("close recipient "+p.Recipient, err)
	}
	return ids, nil
}
