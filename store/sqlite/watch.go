package sqlite

import (
	"cmp"
	"context"
	"database/sql"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/vigil-run/vigil"
	"github.com/vigil-run/vigil/internal/settlement"
	"github.com/vigil-run/vigil/internal/storecheck"
)

// WatchCreate registers p.Watch (SPEC §3). In order, in one transaction: a
// live idempotency ledger entry replays its watch (Replayed) or, for another
// request hash, is an idempotency_conflict; a pending watch with the same
// identity is returned (Existing); the caps are enforced (quota_exceeded);
// the watch and its ledger entry are inserted.
func (s *Store) WatchCreate(ctx context.Context, p vigil.WatchCreateParams) (*vigil.Watch, error) {
	w := p.Watch
	if err := storecheck.NewWatch(w, p.IdempotencyKey, p.RequestHash); err != nil {
		return nil, err
	}
	nw := *w
	nw.State = vigil.StatePending
	enc, err := encodeWatch(&nw)
	if err != nil {
		return nil, vigil.Errorf(vigil.CodeInvalidRequest, "watch %s: %v", w.ID, err)
	}
	stored, err := enc.stored(&nw)
	if err != nil {
		return nil, fmt.Errorf("sqlite: watch %s: %w", w.ID, err)
	}
	args := enc.args(&nw)
	var out *vigil.Watch
	// The writer may write this registration together with the others
	// waiting for the same commit (create), or run fn alone.
	c := &createOne{item: batchItem{p: p, stored: stored, args: args}}
	err = s.w.doOp(ctx, &op{create: c, fn: func(t *wtx) error {
		var err error
		out, err = createWatch(t, p, stored, args)
		return err
	}})
	if err != nil {
		return nil, err
	}
	if c.merged {
		return c.res.Watch, nil
	}
	return out, nil
}

// createWatch is the body of WatchCreate, run by the writer.
func createWatch(t *wtx, p vigil.WatchCreateParams, w *vigil.Watch, args []any) (*vigil.Watch, error) {
	key := p.IdempotencyKey
	created := w.CreatedAt.UnixMilli()
	if key != "" {
		var hash, id string
		var existing bool
		err := t.queryRow(t.ledgerGet, w.Recipient, key, sinceMS(p.IdempotencySince)).Scan(&hash, &id, &existing)
		switch {
		case err == nil:
			if hash != p.RequestHash {
				return nil, &vigil.Error{Code: vigil.CodeIdempotencyConflict, Field: "idempotency_key",
					Message: fmt.Sprintf("idempotency key %q was already used by recipient %s for a different request; use a new key for a new request", key, w.Recipient)}
			}
			got, err := scanWatch(t.queryRow(t.watchByID, id))
			if err != nil {
				return nil, wrap("replay idempotency key", err)
			}
			got.Replayed, got.Existing = true, existing
			return got, nil
		case !errors.Is(err, sql.ErrNoRows):
			return nil, wrap("read idempotency ledger", err)
		}
	}

	// The pending watch of the same identity, from the writer's index.
	got, err := pendingByIdentity(t, w.Identity)
	if err != nil {
		return nil, err
	}
	if got != nil {
		got.Existing = true
		if key != "" {
			if _, err := t.exec(t.ledgerPut, w.Recipient, key, p.RequestHash, got.ID, 1, created); err != nil {
				return nil, wrap("record idempotency key", err)
			}
		}
		return got, nil
	}

	if p.MaxActive > 0 || p.MaxActivePerRecipient > 0 {
		var total, mine int64
		if err := t.queryRow(t.counts, w.Recipient).Scan(&total, &mine); err != nil {
			return nil, wrap("read pending counts", err)
		}
		if p.MaxActive > 0 && total >= int64(p.MaxActive) {
			return nil, vigil.Errorf(vigil.CodeQuotaExceeded,
				"vigil already holds its max_active cap of %d pending watches: wait for some to settle, cancel some, or raise max_active", p.MaxActive)
		}
		if p.MaxActivePerRecipient > 0 && mine >= int64(p.MaxActivePerRecipient) {
			return nil, vigil.Errorf(vigil.CodeQuotaExceeded,
				"recipient %s already has its max_active_per_recipient cap of %d pending watches: wait for some to settle, cancel some, or raise max_active_per_recipient", w.Recipient, p.MaxActivePerRecipient)
		}
	}

	res, err := t.exec(t.watchInsert, args...)
	if err != nil {
		err = interpretError(err)
		if vigil.ErrorCode(err) == vigil.CodeConflict {
			return nil, &vigil.Error{Code: vigil.CodeConflict, Message: fmt.Sprintf("a watch with id %s already exists", w.ID), Err: err}
		}
		return nil, wrap("insert watch", err)
	}
	rowid, err := res.LastInsertId()
	if err != nil {
		return nil, wrap("insert watch", err)
	}
	t.setIdentity(w.Identity, rowid)
	if err := indexNew(t, rowid, w); err != nil {
		return nil, err
	}
	if err := addPending(t, 1); err != nil {
		return nil, err
	}
	if key != "" {
		if _, err := t.exec(t.ledgerPut, w.Recipient, key, p.RequestHash, w.ID, 0, created); err != nil {
			return nil, wrap("record idempotency key", err)
		}
	}
	out := *w
	return &out, nil
}

// pendingByIdentity returns the pending watch with identity, nil if there
// is none. The writer's index names its row; a row that is not that
// pending watch (never, unless the index and the table disagree) is not
// returned, and its entry is dropped.
func pendingByIdentity(t *wtx, identity string) (*vigil.Watch, error) {
	x, err := t.identities()
	if err != nil {
		return nil, err
	}
	rowid, ok := x.get(identity)
	if !ok {
		return nil, nil
	}
	got, err := scanWatch(t.queryRow(t.watchByRowid, rowid))
	switch {
	case errors.Is(err, sql.ErrNoRows):
		x.remove(identity, rowid)
		return nil, nil
	case err != nil:
		return nil, wrap("read pending watch by identity", err)
	case got.State != vigil.StatePending || got.Identity != identity:
		x.remove(identity, rowid)
		return nil, nil
	}
	return got, nil
}

// indexNew writes what the watches ws, inserted from rowid on, add beside
// their rows: their counts (watch_counts, from ws: the caller has them, and
// reading the rows back to group them cost a sort), their text
// (watch_text) and their labels (watch_labels), which the panel's list
// reads. It runs after every insert into watches, in the same transaction
// (schema 10: no trigger does it, which made a multi-row insert go through
// a temporary table). A new row's rowid is larger than every rowid before
// it: watches has no AUTOINCREMENT, so SQLite gives a new row the largest
// rowid plus one.
func indexNew(t *wtx, rowid int64, ws ...*vigil.Watch) error {
	var moves countMoves
	for _, w := range ws {
		moves.move(w.Recipient, string(w.Kind), "", w.State, 1)
	}
	if err := moves.write(t); err != nil {
		return err
	}
	if _, err := t.exec(t.newText, rowid); err != nil {
		return wrap("index the text of new watches", err)
	}
	if _, err := t.exec(t.newLabels, rowid); err != nil {
		return wrap("index the labels of new watches", err)
	}
	return nil
}

// addPending moves the total of pending watches (the counters row) by
// delta. A recipient's own count is the sum of its pending rows of
// watch_counts (schema 12), which the same transaction moves.
func addPending(t *wtx, delta int) error {
	if delta == 0 {
		return nil
	}
	if _, err := t.exec(t.pendingTotalAdd, delta); err != nil {
		return wrap("count pending watches", err)
	}
	return nil
}

// countStates are the states watch_counts has a column for, in the
// table's order (schema 15: one row for each recipient and kind).
var countStates = [...]vigil.State{vigil.StatePending, vigil.StateFired, vigil.StateFailed, vigil.StateExpired,
	vigil.StateCancelled, vigil.StateErrored, vigil.StateUnwatchable}

// countColumn is the index in countStates of state, or -1.
func countColumn(state vigil.State) int {
	for i, s := range countStates {
		if s == state {
			return i
		}
	}
	return -1
}

// countKey is one row of watch_counts.
type countKey struct{ recipient, kind string }

// countMoves adds up how one write moves watches between the states of
// the rows of watch_counts, so that it writes each row once however many
// watches moved (schema 11: no trigger follows an update or a deletion of
// a watch). Every statement that changes a watch's state, or deletes a
// watch, notes its moves here, and write runs before the op returns. A
// watch that settles moves within its row (schema 15): one row written,
// not two. The zero value is ready to use.
type countMoves struct {
	rows map[countKey]*[len(countStates)]int
}

// move notes n watches of recipient and kind gone from state from to
// state to; an empty to is a deletion. A state that is none of a watch's
// (a row written by hand) has no column: no count ever held its watches,
// so none is taken from or added to.
func (m *countMoves) move(recipient, kind string, from, to vigil.State, n int) {
	f, t := countColumn(from), countColumn(to)
	if f == t || n == 0 {
		return
	}
	if m.rows == nil {
		m.rows = map[countKey]*[len(countStates)]int{}
	}
	row := m.rows[countKey{recipient, kind}]
	if row == nil {
		row = new([len(countStates)]int)
		m.rows[countKey{recipient, kind}] = row
	}
	if f >= 0 {
		row[f] -= n
	}
	if t >= 0 {
		row[t] += n
	}
}

// write applies the moves in the table's key order, in multi-row upserts
// of bound values (insertChunks rows each). The rows that move the same
// states go together, in an upsert that names only those states' columns:
// a settlement's row moves two of the seven. A row that falls to 0 stays
// until Prune removes it. Bound values, not one JSON array read back with
// json_each: extracting each row's fields from JSON cost twice as much.
func (m *countMoves) write(t *wtx) error {
	// The rows by the states they move (a bit per column), in key order.
	byCols := map[uint8][]countKey{}
	for k, row := range m.rows {
		var cols uint8
		for i, d := range row {
			if d != 0 {
				cols |= 1 << i
			}
		}
		if cols != 0 {
			byCols[cols] = append(byCols[cols], k)
		}
	}
	for _, cols := range slices.Sorted(maps.Keys(byCols)) {
		keys := byCols[cols]
		slices.SortFunc(keys, func(a, b countKey) int {
			return cmp.Or(cmp.Compare(a.recipient, b.recipient), cmp.Compare(a.kind, b.kind))
		})
		head, tail, width := countsUpsert(cols)
		err := forChunks(len(keys), func(from, n int) error {
			st, err := t.multiStmt(head, tail, width, n)
			if err != nil {
				return err
			}
			args := make([]any, 0, width*n)
			for _, k := range keys[from : from+n] {
				args = append(args, k.recipient, k.kind)
				for i, d := range m.rows[k] {
					if cols&(1<<i) != 0 {
						args = append(args, int64(d))
					}
				}
			}
			_, err = t.exec(st, args...)
			return err
		})
		if err != nil {
			return wrap("count watches", err)
		}
	}
	return nil
}

// countsUpsert returns the head and tail of the upsert of watch_counts
// rows that moves the states of the columns set in cols (a bit per index
// in countStates), and how many values a row binds: each row adds its
// numbers to the row of its key. Every set's text is made once, not at
// each write.
func countsUpsert(cols uint8) (head, tail string, width int) {
	u := &countUpserts[cols]
	return u.head, u.tail, u.width
}

// countUpserts is countsUpsert's answer for every set of columns.
var countUpserts = func() (all [1 << len(countStates)]struct {
	head, tail string
	width      int
}) {
	for cols := range all {
		var names, set []string
		for i, s := range countStates {
			if cols&(1<<i) != 0 {
				names = append(names, string(s))
				set = append(set, string(s)+" = "+string(s)+" + excluded."+string(s))
			}
		}
		all[cols].head = `INSERT INTO watch_counts (recipient, kind, ` + strings.Join(names, ", ") + `) VALUES `
		all[cols].tail = ` ON CONFLICT DO UPDATE SET ` + strings.Join(set, ", ")
		all[cols].width = 2 + len(names)
	}
	return all
}()

// WatchGet returns one watch, or a not_found error.
func (s *Store) WatchGet(ctx context.Context, id string) (*vigil.Watch, error) {
	w, err := scanWatch(s.r.watchByID.QueryRowContext(ctx, id))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, notFound(id)
	}
	if err != nil {
		return nil, wrap("get watch "+id, err)
	}
	return w, nil
}

// IdempotencyReplay implements vigil.Store: the ledger entry, then its
// watch, on the read pool.
func (s *Store) IdempotencyReplay(ctx context.Context, p vigil.IdempotencyReplayParams) (*vigil.Watch, error) {
	var hash, id string
	var existing bool
	err := s.readDB.QueryRowContext(ctx, `SELECT request_hash, watch_id, existing FROM idempotency
		WHERE recipient = ? AND key = ? AND created_at >= ?`, p.Recipient, p.Key, sinceMS(p.Since)).Scan(&hash, &id, &existing)
	switch {
	case errors.Is(err, sql.ErrNoRows):
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
	// A prepared statement taking the ids as one JSON array: compiling a
	// statement with a placeholder per id cost more than reading the rows
	// for the small batches of a steady flow of timers.
	const chunk = 1000
	out := make([]*vigil.Watch, 0, len(ids))
	for c := range slices.Chunk(ids, chunk) {
		arr, err := json.Marshal(c)
		if err != nil {
			return nil, wrap("get watches", err)
		}
		rows, err := s.r.watchesByIDs.QueryContext(ctx, string(arr))
		if err != nil {
			return nil, wrap("get watches", err)
		}
		out, err = appendWatches(out, rows)
		if err != nil {
			return nil, wrap("get watches", err)
		}
	}
	return out, nil
}

func appendWatches(out []*vigil.Watch, rows *sql.Rows) ([]*vigil.Watch, error) {
	defer rows.Close()
	for rows.Next() {
		w, err := scanWatch(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, w)
	}
	return out, rows.Err()
}

// WatchList returns one page of watches, newest first (created_at, then id,
// descending). p.After is the opaque Next of the previous page.
func (s *Store) WatchList(ctx context.Context, p vigil.WatchListParams) (vigil.WatchPage, error) {
	q, args, limit, err := listQuery(p)
	if err != nil {
		return vigil.WatchPage{}, err
	}
	rows, err := s.readDB.QueryContext(ctx, q, args...)
	if err != nil {
		return vigil.WatchPage{}, wrap("list watches", err)
	}
	ws, err := appendWatches(make([]*vigil.Watch, 0, min(limit+1, 128)), rows)
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

// WatchCounts implements vigil.Store: it sums the rows of watch_counts
// (schema 15: one for each recipient and kind, a column for each state),
// which the store keeps in step with the watches in the transaction that
// changes them (indexNew, countMoves), so it reads a few rows per
// recipient, not every watch. The counts come in the order of their state,
// then kind.
func (s *Store) WatchCounts(ctx context.Context, recipients []string) ([]vigil.WatchCount, error) {
	q := `SELECT kind, sum(pending), sum(fired), sum(failed), sum(expired), sum(cancelled), sum(errored), sum(unwatchable)
		FROM watch_counts`
	var args []any
	if len(recipients) > 0 {
		q += " WHERE recipient IN (" + placeholders(len(recipients)) + ")"
		for _, r := range recipients {
			args = append(args, r)
		}
	}
	rows, err := s.readDB.QueryContext(ctx, q+" GROUP BY kind", args...)
	if err != nil {
		return nil, wrap("count watches", err)
	}
	defer rows.Close()
	out := []vigil.WatchCount{}
	for rows.Next() {
		var (
			kind vigil.Kind
			n    [len(countStates)]int
		)
		if err := rows.Scan(&kind, &n[0], &n[1], &n[2], &n[3], &n[4], &n[5], &n[6]); err != nil {
			return nil, wrap("count watches", err)
		}
		for i, state := range countStates {
			if n[i] > 0 {
				out = append(out, vigil.WatchCount{State: state, Kind: kind, N: n[i]})
			}
		}
	}
	if err := rows.Err(); err != nil {
		return nil, wrap("count watches", err)
	}
	slices.SortFunc(out, func(a, b vigil.WatchCount) int {
		return cmp.Or(cmp.Compare(a.State, b.State), cmp.Compare(a.Kind, b.Kind))
	})
	return out, nil
}

// listQuery builds WatchList's query: its SQL, its arguments and the page
// size.
func listQuery(p vigil.WatchListParams) (q string, args []any, limit int, err error) {
	// With a label, the first (in key order) drives the query: its rows
	// of watch_labels are walked in the list's order, so a page needs
	// only as many as it shows, and a label no watch has costs nothing.
	//
	// Without a label, a text drives it: the narrow rows of watch_text
	// (schema 9) are walked in the list's order, so a text that matches
	// few watches reads a fifth of the pages that the watches' rows take,
	// and one that matches many stops when the page is full. So does the
	// list without any filter (schema 13: watch_text is the only index of
	// every watch in the list's order).
	from, order, at, id := "watches", "created_at DESC, id DESC", "created_at", "id"
	keys := slices.Sorted(maps.Keys(p.Labels))
	text := asciiLower(p.Text)
	var where []string
	unfiltered := p.Recipient == "" && len(p.Recipients) == 0 && p.State == "" && p.Kind == ""
	switch {
	case len(keys) > 0:
		from = "watch_labels AS lb JOIN watches ON watches.id = lb.watch_id"
		order, at, id = "lb.created_at DESC, lb.watch_id DESC", "lb.created_at", "lb.watch_id"
		where, args = append(where, "lb.key = ? AND lb.value = ?"), append(args, keys[0], p.Labels[keys[0]])
		keys = keys[1:]
	case text != "" || unfiltered:
		// A row of watch_text without its text (a long one) is looked
		// up in watches; the others are never read there but for the
		// page's.
		// With a recipient, state or kind as well, their index may
		// drive instead, in its order (the planner picks): the list's
		// order is then named by the watch's columns.
		from = "watch_text AS tx JOIN watches ON watches.created_at = tx.created_at AND watches.id = tx.watch_id"
		if unfiltered {
			order, at, id = "tx.created_at DESC, tx.watch_id DESC", "tx.created_at", "tx.watch_id"
		} else {
			order, at, id = "watches.created_at DESC, watches.id DESC", "watches.created_at", "watches.id"
		}
		if text != "" {
			where = append(where, `CASE WHEN tx.note IS NULL THEN EXISTS (SELECT 1 FROM watches AS lw WHERE lw.id = tx.watch_id
			AND (instr(lower(lw.note), ?) > 0 OR instr(lower(CAST(lw.predicate AS TEXT)), ?) > 0))
			ELSE instr(tx.note, ?) > 0 OR instr(tx.predicate, ?) > 0 END`)
			args = append(args, text, vigil.PredicateText(text), text, vigil.PredicateText(text))
			text = ""
		}
	}
	if p.Recipient != "" {
		where, args = append(where, "recipient = ?"), append(args, p.Recipient)
	}
	if len(p.Recipients) > 0 {
		where = append(where, "recipient IN ("+placeholders(len(p.Recipients))+")")
		for _, r := range p.Recipients {
			args = append(args, r)
		}
	}
	switch p.State {
	case "":
	case vigil.StatePending:
		// watches_state_created holds the pending rows in the list's
		// order.
		where = append(where, "state = 'pending'")
	default:
		// watches_state_created holds each state's rows in the list's
		// order.
		where, args = append(where, "state = ?"), append(args, string(p.State))
	}
	if p.Kind != "" {
		where, args = append(where, "kind = ?"), append(args, string(p.Kind))
	}
	for _, k := range keys {
		where = append(where, "EXISTS (SELECT 1 FROM watch_labels AS l WHERE l.key = ? AND l.value = ? AND l.created_at = watches.created_at AND l.watch_id = watches.id)")
		args = append(args, k, p.Labels[k])
	}
	if text != "" {
		// With a label, which drives: the watch's own row, read anyway.
		// SQLite's lower() folds ASCII letters only, as the Store's Text
		// does (and as it filled watch_text); instr is a plain substring
		// search, faster than LIKE.
		where, args = append(where, `(instr(lower(watches.note), ?) > 0 OR instr(lower(CAST(watches.predicate AS TEXT)), ?) > 0)`), append(args, text, vigil.PredicateText(text))
	}
	if p.After != "" {
		cat, cid, err := decodeCursor(p.After)
		if err != nil {
			return "", nil, 0, err
		}
		where, args = append(where, "("+at+", "+id+") < (?, ?)"), append(args, cat, cid)
	}
	limit = pageLimit(p.Limit)
	q = `SELECT ` + qualified(watchColumns) + ` FROM ` + from
	if len(where) > 0 {
		q += " WHERE " + strings.Join(where, " AND ")
	}
	q += " ORDER BY " + order + " LIMIT ?"
	return q, append(args, limit+1), limit, nil
}

// qualified prefixes each of a list of watches' columns with the table,
// so a join with watch_labels reads them unambiguously.
func qualified(cols string) string {
	parts := strings.Split(cols, ",")
	for i, c := range parts {
		parts[i] = "watches." + strings.TrimSpace(c)
	}
	return strings.Join(parts, ", ")
}

// asciiLower folds ASCII letters to lower case, as SQLite's lower() does.
func asciiLower(s string) string {
	return strings.Map(func(r rune) rune {
		if 'A' <= r && r <= 'Z' {
			return r + 'a' - 'A'
		}
		return r
	}, s)
}

func pageLimit(n int) int {
	if n <= 0 {
		return listLimit
	}
	return min(n, listLimitMax)
}

// A list cursor is the (created_at, id) of the last watch of a page.
func encodeCursor(at time.Time, id string) string {
	return base64.RawURLEncoding.EncodeToString([]byte(strconv.FormatInt(at.UnixMilli(), 10) + ":" + id))
}

func decodeCursor(c string) (int64, string, error) {
	bad := vigil.FieldErrorf(vigil.CodeInvalidRequest, "after", "the list cursor %q is not one this server gave out", c)
	b, err := base64.RawURLEncoding.DecodeString(c)
	if err != nil {
		return 0, "", bad
	}
	at, id, ok := strings.Cut(string(b), ":")
	if !ok {
		return 0, "", bad
	}
	n, err := strconv.ParseInt(at, 10, 64)
	if err != nil || !cursorID(id) {
		return 0, "", bad
	}
	return n, id, nil
}

// cursorID reports whether a cursor's id could be a watch's: 1 to 128
// bytes of printable ASCII. A tampered cursor's id of other bytes (not
// UTF-8, a NUL, which PostgreSQL refuses as a text) is refused as the
// cursor it is, not answered as an internal error.
func cursorID(id string) bool {
	if id == "" || len(id) > 128 {
		return false
	}
	for i := 0; i < len(id); i++ {
		if id[i] <= ' ' || id[i] > '~' {
			return false
		}
	}
	return true
}

// WatchListPending returns what the scheduler needs to re-arm every pending
// watch, whatever its kind: the store never interprets kinds.
func (s *Store) WatchListPending(ctx context.Context) ([]vigil.ScheduleEntry, error) {
	var out []vigil.ScheduleEntry
	err := s.WatchListPendingFunc(ctx, func(rows []vigil.ScheduleEntry, total int) error {
		if out == nil {
			out = make([]vigil.ScheduleEntry, 0, total)
		}
		out = append(out, rows...)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// pendingPart is how many rows WatchListPendingFunc hands over at a time.
const pendingPart = 4096

// WatchListPendingFunc is WatchListPending a part at a time: fn gets each
// part of the pending watches as they are read (it may keep it), with the
// number of pending watches the store counts, to size what is built from
// them (a count a damaged file holds wrong may be off, never above the
// rows); an error from fn ends the read with it. The daemon's priming
// loads each part while the next is read.
func (s *Store) WatchListPendingFunc(ctx context.Context, fn func(rows []vigil.ScheduleEntry, total int) error) error {
	// Read the table straight through, unless pending watches are few
	// among many settled ones: then visit just them through the pending
	// part of watches_state_created, at a random read each (about five
	// times a row of the scan).
	var pending, rowids, bound int64
	if err := s.r.pendingCount.QueryRowContext(ctx).Scan(&pending, &rowids, &bound); err != nil {
		return wrap("count pending watches", err)
	}
	pending = pendingSize(pending, rowids, bound)
	st := s.r.pendingScan
	if pending*5 < rowids {
		st = s.r.pendingByIndex
	}
	// Until the writer holds the pending watches' identities, this read,
	// which walks them all, takes them too, and offers them to it: the
	// daemon's priming spares it a second walk (offerIdentities). seq
	// comes before the read's snapshot, which holds every commit up to it.
	var idents *identityFill
	seq := s.w.commitSeq.Load()
	if !s.w.hasIdents.Load() {
		idents = newIdentityFill(pending)
		defer idents.stop()
	}
	rows, err := st.QueryContext(ctx)
	if err != nil {
		return wrap("list pending watches", err)
	}
	defer rows.Close()
	var (
		part  = make([]vigil.ScheduleEntry, 0, min(pending, pendingPart))
		kinds = map[string]vigil.Kind{}
		c     [10]any
		dst   = make([]any, len(c), len(c)+3)
		rowid int64
		raw   sql.RawBytes
		blob  bool
	)
	for i := range c {
		dst[i] = &c[i]
	}
	dst = append(dst, &rowid, &raw, &blob) // identityColumns
	for rows.Next() {
		if err := rows.Scan(dst...); err != nil {
			return wrap("list pending watches", err)
		}
		// A column that does not decode leaves its field zero and names
		// itself in Unreadable: the scheduler settles such a row errored
		// rather than fail the start.
		var (
			e vigil.ScheduleEntry
			d rowDecoder
		)
		e.ID = d.id(c[0])
		kind := d.text("kind", c[1], false)
		// Kinds are few: share one string per kind.
		k, ok := kinds[kind]
		if !ok {
			k = vigil.Kind(kind)
			kinds[kind] = k
		}
		e.Kind = k
		e.Every = d.duration("every_ms", c[2])
		e.Deadline, e.StartAt = d.time("deadline", c[3], true), d.time("start_at", c[4], true)
		e.CreatedAt = d.time("created_at", c[5], false)
		e.Polls, e.Standing = int(d.integer("polls", c[6], false)), d.boolean("standing", c[7])
		e.Errors, e.ConsecutiveErrors = int(d.integer("errors", c[8], true)), int(d.integer("consecutive_errors", c[9], true))
		e.Unreadable = d.reason()
		part = append(part, e)
		if idents != nil {
			idents.add(rowid, raw, blob)
		}
		if len(part) == pendingPart {
			if err := fn(part, int(pending)); err != nil {
				return err
			}
			part = make([]vigil.ScheduleEntry, 0, pendingPart)
		}
	}
	if err := rows.Err(); err != nil {
		return wrap("list pending watches", err)
	}
	if len(part) > 0 {
		if err := fn(part, int(pending)); err != nil {
			return err
		}
	}
	if idents != nil {
		s.w.offerIdentities(idents.finish(), seq)
	}
	return nil
}

// WatchObserve records a pending watch's latest observation and poll count;
// it reports false, writing nothing, if the watch is not pending.
func (s *Store) WatchObserve(ctx context.Context, p vigil.WatchObserveParams) (bool, error) {
	var obs any
	if p.Observation != nil {
		var err error
		if obs, err = jsonText(p.Observation); err != nil {
			return false, fmt.Errorf("sqlite: watch %s: encode observation: %w", p.ID, err)
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
	var won bool
	var seq int64
	err := s.w.do(ctx, func(t *wtx) error {
		won = false
		if msg != nil || p.CheckBaseline {
			var (
				state  string
				stored *string
			)
			switch err := t.queryRow(t.watchBaseline, p.ID).Scan(&state, &stored); {
			case errors.Is(err, sql.ErrNoRows):
				return nil
			case err != nil:
				return wrap("observe watch "+p.ID+": read its baseline", err)
			case state != string(vigil.StatePending):
				return nil
			case !settlement.BaselineHolds(stored, p.Baseline):
				return vigil.ErrBaselineMoved
			}
		}
		res, err := t.exec(t.watchObserve, obs, p.Polls, nullInt(p.Errors), nullInt(p.ConsecutiveErrors), ms(p.CheckedAt), p.ID)
		if err != nil {
			return wrap("observe watch "+p.ID, err)
		}
		n, err := res.RowsAffected()
		if err != nil {
			return err
		}
		won = n == 1
		if won && msg != nil {
			if seq, err = insertMessage(t, msg); err != nil {
				return wrap("observe watch "+p.ID+": insert message", err)
			}
		}
		return nil
	})
	if err == nil && won && p.Message != nil {
		p.Message.Seq = seq
	}
	return won, err
}

// WatchSettle settles each watch of ps that is still pending, with its
// outcome message, all in one transaction, and reports per entry whether it
// won the compare-and-set. Each message it inserts gets its Seq set. A
// message's WatchID, Recipient, Type and CreatedAt default to the watch's
// id and recipient, the outcome type and SettledAt.
func (s *Store) WatchSettle(ctx context.Context, ps []vigil.WatchSettleParams) ([]bool, error) {
	enc, err := settlement.Prepare("sqlite", ps)
	if err != nil {
		return nil, err
	}
	ids, err := json.Marshal(settleIDs(ps))
	if err != nil {
		return nil, fmt.Errorf("sqlite: settle: %w", err)
	}
	won := make([]bool, len(ps))
	seqs := make([]int64, len(ps))
	err = s.w.do(ctx, func(t *wtx) error {
		clear(won)
		// Compare-and-set: find which of the watches are still pending, in
		// one query, then settle those, up to 256 in a statement. The
		// writer is the only one, so nothing moves in between; the UPDATE
		// checks the state anyway, and must change every row it names.
		pending, err := pendingRows(t, ids)
		if err != nil {
			return err
		}
		settled := 0
		moves := countMoves{}
		var msgs []*vigil.Message // the winners' messages, in ps' order
		var at []int              // their indexes in ps
		var args []any            // the winners' settleColumns values, in ps' order
		for i := range ps {
			p := &ps[i]
			row, ok := pending[p.ID]
			if !ok {
				continue // already settled, no such watch, or settled earlier in ps: lost
			}
			delete(pending, p.ID)
			// The last observation is the outcome's (settlement.Prepare):
			// the row says so rather than holding it twice.
			var lastObs any
			if enc[i].LastObs != nil {
				lastObs = observationInOutcome
			}
			// Answered at creation, the message is written only when a
			// registration joined the watch (WatchJoin); then it is not
			// answered at creation.
			m, answered := enc[i].Message, p.AnsweredAtCreation && !row.joined
			if answered {
				m = nil
			}
			args = append(args, row.rowid, string(p.State), textOrNull(enc[i].Outcome), p.SettledAt.UnixMilli(), p.Polls,
				lastObs, b2i(answered), nullInt(p.Errors), nullInt(p.ConsecutiveErrors), ms(p.CheckedAt))
			won[i] = true
			settled++
			t.removeIdentity(row.identity, row.rowid)
			moves.move(row.recipient, row.kind, vigil.StatePending, p.State, 1)
			if m != nil {
				m.Recipient = cmpOr(m.Recipient, row.recipient)
				msgs, at = append(msgs, m), append(at, i)
			}
		}
		if err := forChunks(settled, func(from, n int) error {
			st, err := t.multiStmt(settleHead, settleTail, settleColumns, n)
			if err != nil {
				return err
			}
			res, err := t.exec(st, args[from*settleColumns:(from+n)*settleColumns]...)
			if err != nil {
				return wrap("settle watches", err)
			}
			if got, err := res.RowsAffected(); err != nil || got != int64(n) {
				return fmt.Errorf("sqlite: settle: %d rows changed (%v), want %d", got, err, n)
			}
			return nil
		}); err != nil {
			return err
		}
		got := make([]int64, len(msgs))
		if err := insertMessages(t, msgs, got); err != nil {
			return wrap("settle: insert outcome messages", err)
		}
		for j, i := range at {
			seqs[i] = got[j]
		}
		if err := addPending(t, -settled); err != nil {
			return err
		}
		return moves.write(t)
	})
	if err != nil {
		return nil, err
	}
	for i := range ps {
		if won[i] && ps[i].Message != nil && seqs[i] != 0 {
			ps[i].Message.Seq = seqs[i]
		}
	}
	return won, nil
}

// WatchJoin marks pending watch id joined by a registration answered with
// it as existing: a settlement answered at creation then mails its outcome
// all the same (see WatchSettle). The writer runs it and the settlements
// one after another; false when the watch is no longer pending, or gone.
func (s *Store) WatchJoin(ctx context.Context, id string) (bool, error) {
	var joined bool
	err := s.w.do(ctx, func(t *wtx) error {
		res, err := t.exec(t.watchJoin, id)
		if err != nil {
			return wrap("join watch "+id, err)
		}
		n, err := res.RowsAffected()
		if err != nil {
			return wrap("join watch "+id, err)
		}
		joined = n == 1
		return nil
	})
	if err != nil {
		return false, err
	}
	return joined, nil
}

// settleHead and settleTail make the settlement of many watches in one
// statement (multiStmt): each row of settleColumns values is the watch's
// rowid, state, outcome, settled_at, polls, last observation (NULL keeps
// the stored one), answered_at_creation, errors, consecutive_errors and
// checked_at (NULL keeps the stored one). One statement for a batch, not
// one a watch: 8 % less of the store's CPU a settlement in a storm
// (BenchmarkWatchSettleStorm).
const (
	settleHead = `UPDATE watches SET state = v.column2, outcome = v.column3, settled_at = v.column4, polls = v.column5,
		last_observation = coalesce(v.column6, last_observation), answered_at_creation = v.column7,
		errors = v.column8, consecutive_errors = v.column9, checked_at = coalesce(v.column10, checked_at) FROM (VALUES `
	settleTail    = `) AS v WHERE watches.rowid = v.column1 AND watches.state = 'pending'`
	settleColumns = 10
)

func settleIDs(ps []vigil.WatchSettleParams) []string {
	ids := make([]string, len(ps))
	for i := range ps {
		ids[i] = ps[i].ID
	}
	return ids
}

type pendingRow struct {
	rowid           int64
	recipient, kind string
	identity        any  // as stored (identityString)
	joined          bool // a registration joined it (WatchJoin)
}

// pendingRows returns the pending watches among ids (a JSON array), by id.
func pendingRows(t *wtx, ids []byte) (map[string]pendingRow, error) {
	rows, err := t.query(t.watchesPending, string(ids))
	if err != nil {
		return nil, wrap("find pending watches", err)
	}
	defer rows.Close()
	out := map[string]pendingRow{}
	for rows.Next() {
		var (
			id string
			r  pendingRow
		)
		if err := rows.Scan(&r.rowid, &id, &r.recipient, &r.kind, &r.identity, &r.joined); err != nil {
			return nil, wrap("find pending watches", err)
		}
		out[id] = r
	}
	if err := rows.Err(); err != nil {
		return nil, wrap("find pending watches", err)
	}
	return out, nil
}

func cmpOr[T comparable](v, fallback T) T {
	var zero T
	if v == zero {
		return fallback
	}
	return v
}

// WatchCancel cancels a pending watch, with its optional neutral message in
// the same transaction. It returns the watch as it is afterwards and whether
// this call cancelled it; a watch already settled comes back unchanged with
// false. not_found if there is no such watch, or it belongs to a recipient
// outside a non-empty p.Recipients.
func (s *Store) WatchCancel(ctx context.Context, p vigil.WatchCancelParams) (*vigil.Watch, bool, error) {
	prep, err := settlement.Cancel("sqlite", p)
	if err != nil {
		return nil, false, err
	}
	outcome, msg := prep.Outcome, prep.Message
	var (
		out *vigil.Watch
		won bool
		seq int64
	)
	err = s.w.do(ctx, func(t *wtx) error {
		won = false
		var recipient, state, kind string
		var rowid int64
		var identity any
		err := t.queryRow(t.watchHead, p.ID).Scan(&recipient, &state, &kind, &rowid, &identity)
		if errors.Is(err, sql.ErrNoRows) || (err == nil && len(p.Recipients) > 0 && !slices.Contains(p.Recipients, recipient)) {
			return notFound(p.ID)
		}
		if err != nil {
			return wrap("cancel watch "+p.ID, err)
		}
		if vigil.State(state) == vigil.StatePending {
			res, err := t.exec(t.watchCancel, textOrNull(outcome), p.SettledAt.UnixMilli(), p.ID, ms(p.CheckedAt),
				p.Polls, nullInt(p.Errors), nullInt(p.ConsecutiveErrors))
			if err != nil {
				return wrap("cancel watch "+p.ID, err)
			}
			n, err := res.RowsAffected()
			if err != nil {
				return wrap("cancel watch "+p.ID, err)
			}
			won = n == 1
			if won {
				t.removeIdentity(identity, rowid)
				if err := addPending(t, -1); err != nil {
					return err
				}
				moves := countMoves{}
				moves.move(recipient, kind, vigil.StatePending, vigil.StateCancelled, 1)
				if err := moves.write(t); err != nil {
					return err
				}
			}
			if won && msg != nil {
				msg.Recipient = cmpOr(msg.Recipient, recipient)
				if seq, err = insertMessage(t, msg); err != nil {
					return wrap("cancel watch "+p.ID+": insert message", err)
				}
			}
		}
		if out, err = scanWatch(t.queryRow(t.watchByID, p.ID)); err != nil {
			return wrap("cancel watch "+p.ID, err)
		}
		return nil
	})
	if err != nil {
		return nil, false, err
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
	return s.w.do(ctx, func(t *wtx) error {
		var recipient, state, kind string
		var rowid int64
		var identity any
		err := t.queryRow(t.watchHead, id).Scan(&recipient, &state, &kind, &rowid, &identity)
		if errors.Is(err, sql.ErrNoRows) {
			return notFound(id)
		}
		if err != nil {
			return wrap("delete watch "+id, err)
		}
		if vigil.State(state) == vigil.StatePending {
			return vigil.Errorf(vigil.CodeConflict, "watch %s is still pending: cancel it before deleting it", id)
		}
		if _, err := t.exec(t.watchDelete, id); err != nil {
			return wrap("delete watch "+id, err)
		}
		moves := countMoves{}
		moves.move(recipient, kind, vigil.State(state), "", 1)
		return moves.write(t)
	})
}

// WatchDeliverSet replaces a watch's delivery options, whatever its state;
// not_found if there is no such watch.
func (s *Store) WatchDeliverSet(ctx context.Context, p vigil.WatchDeliverSetParams) error {
	if len(p.Deliver) > 0 && !json.Valid(p.Deliver) {
		return vigil.Errorf(vigil.CodeInvalidRequest, "watch %s: the delivery options are not JSON", p.ID)
	}
	return s.w.do(ctx, func(t *wtx) error {
		res, err := t.exec(t.watchDeliverSet, rawText(p.Deliver), p.ID)
		if err != nil {
			return wrap("set delivery options of watch "+p.ID, err)
		}
		if n, err := res.RowsAffected(); err != nil || n == 0 {
			if err != nil {
				return wrap("set delivery options of watch "+p.ID, err)
			}
			return notFound(p.ID)
		}
		return nil
	})
}

// RecipientClose cancels every pending watch of p.Recipient silently (no
// messages) and returns their ids.
func (s *Store) RecipientClose(ctx context.Context, p vigil.RecipientCloseParams) ([]string, error) {
	var outcome any
	if p.Outcome != nil {
		var err error
		if outcome, err = jsonText(p.Outcome); err != nil {
			return nil, fmt.Errorf("sqlite: close recipient %s: encode outcome: %w", p.Recipient, err)
		}
	}
	if p.SettledAt.IsZero() {
		return nil, vigil.Errorf(vigil.CodeInvalidRequest, "closing recipient %s needs the time its watches settled", p.Recipient)
	}
	var ids []string
	err := s.w.do(ctx, func(t *wtx) error {
		ids = ids[:0]
		moves := countMoves{}
		rows, err := t.query(t.recipientClose, outcome, p.SettledAt.UnixMilli(), p.Recipient)
		if err != nil {
			return wrap("close recipient "+p.Recipient, err)
		}
		defer rows.Close()
		for rows.Next() {
			var id, kind string
			var rowid int64
			var identity any
			if err := rows.Scan(&id, &kind, &rowid, &identity); err != nil {
				return wrap("close recipient "+p.Recipient, err)
			}
			t.removeIdentity(identity, rowid)
			ids = append(ids, id)
			moves.move(p.Recipient, kind, vigil.StatePending, vigil.StateCancelled, 1)
		}
		if err := rows.Err(); err != nil {
			return wrap("close recipient "+p.Recipient, err)
		}
		rows.Close()
		if err := moves.write(t); err != nil {
			return err
		}
		return addPending(t, -len(ids))
	})
	if err != nil {
		return nil, err
	}
	return ids, nil
}
