package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"math/bits"
	"strings"

	"github.com/vigil-run/vigil"
	"github.com/vigil-run/vigil/internal/storecheck"
)

// insertChunks are the row counts of the multi-row inserts (of watches,
// of a settlement's messages), largest first: rows are cut into as many
// of the largest as fit, then the next, down to one row (see forChunks).
// 256 rows of 30 columns stay well inside SQLite's limit on bound values
// (32 766).
var insertChunks = [...]int{256, 64, 16, 4, 1}

// forChunks cuts total rows into insertChunks and calls fn with each
// chunk's first row and size, in order, until fn fails.
func forChunks(total int, fn func(from, n int) error) error {
	from := 0
	for _, n := range insertChunks {
		for ; total-from >= n; from += n {
			if err := fn(from, n); err != nil {
				return err
			}
		}
	}
	return nil
}

// batchItem is one item of WatchCreateMany while it is resolved.
type batchItem struct {
	p      vigil.WatchCreateParams
	stored *vigil.Watch
	args   []any
	create bool // to insert
}

// ledgerRow is an idempotency ledger entry read for a batch.
type ledgerRow struct {
	hash, id  string
	existing  bool
	createdAt int64
}

// WatchCreateMany implements vigil.Store: every item resolved as
// createWatch resolves one, in one op of the writer, so in one commit.
// What createWatch asks of the database per item is asked once for the
// whole batch: the ledger entries of its keys, the pending watches of its
// identities, the ids already taken, the pending counts; the rows are then
// written with multi-row inserts.
func (s *Store) WatchCreateMany(ctx context.Context, ps []vigil.WatchCreateParams) ([]vigil.WatchCreateResult, error) {
	out := make([]vigil.WatchCreateResult, len(ps))
	items := make([]batchItem, len(ps))
	for i, p := range ps {
		if err := storecheck.NewWatch(p.Watch, p.IdempotencyKey, p.RequestHash); err != nil {
			out[i].Err = err
			continue
		}
		nw := *p.Watch
		nw.State = vigil.StatePending
		enc, err := encodeWatch(&nw)
		if err != nil {
			out[i].Err = vigil.Errorf(vigil.CodeInvalidRequest, "watch %s: %v", nw.ID, err)
			continue
		}
		stored, err := enc.stored(&nw)
		if err != nil {
			return nil, fmt.Errorf("sqlite: watch %s: %w", nw.ID, err)
		}
		items[i] = batchItem{p: p, stored: stored, args: enc.args(&nw)}
	}
	var res []vigil.WatchCreateResult
	err := s.w.do(ctx, func(t *wtx) error {
		var err error
		// A retry of the op (never today) must start from the same items.
		res = make([]vigil.WatchCreateResult, len(out))
		copy(res, out)
		err = createMany(t, items, res)
		return err
	})
	if err != nil {
		return nil, err
	}
	return res, nil
}

// createMany is the body of WatchCreateMany, run by the writer. Items
// whose out entry already holds an error are skipped.
func createMany(t *wtx, items []batchItem, out []vigil.WatchCreateResult) error {
	var keys [][2]string
	var identities, ids []string
	recipients := map[string]bool{}
	caps := false
	for i, it := range items {
		if out[i].Err != nil {
			continue
		}
		w := it.stored
		if it.p.IdempotencyKey != "" {
			keys = append(keys, [2]string{w.Recipient, it.p.IdempotencyKey})
		}
		identities = append(identities, w.Identity)
		ids = append(ids, w.ID)
		recipients[w.Recipient] = true
		caps = caps || it.p.MaxActive > 0 || it.p.MaxActivePerRecipient > 0
	}
	if len(ids) == 0 {
		return nil
	}

	ledger, err := readLedger(t, keys)
	if err != nil {
		return err
	}
	pendingByIdentity, err := readPendingIdentities(t, identities)
	if err != nil {
		return err
	}
	taken, err := readStrings(t, t.watchIDsTaken, ids)
	if err != nil {
		return wrap("find taken watch ids", err)
	}
	takenIDs := make(map[string]bool, len(taken))
	for _, id := range taken {
		takenIDs[id] = true
	}
	var total int64
	pending := map[string]int64{}
	if caps {
		if total, pending, err = readCounts(t, recipients); err != nil {
			return err
		}
	}
	// The rows the items will answer with, read once: the watches the
	// ledger and the identities point at.
	var want []string
	for _, l := range ledger {
		want = append(want, l.id)
	}
	for _, id := range pendingByIdentity {
		want = append(want, id)
	}
	rows, err := readWatches(t, want)
	if err != nil {
		return err
	}

	type ledgerPut struct {
		recipient, key, hash, id string
		existing                 int
		created                  int64
	}
	var puts []ledgerPut
	created := map[string]*vigil.Watch{} // by id, in this batch
	added := map[string]int{}            // pending added, by recipient
	var nAdded int64
	for i := range items {
		if out[i].Err != nil {
			continue
		}
		it := &items[i]
		w, p := it.stored, it.p
		key := p.IdempotencyKey
		createdMS := w.CreatedAt.UnixMilli()
		if key != "" {
			if l, ok := ledger[[2]string{w.Recipient, key}]; ok && l.createdAt >= sinceMS(p.IdempotencySince) {
				if l.hash != p.RequestHash {
					out[i].Err = &vigil.Error{Code: vigil.CodeIdempotencyConflict, Field: "idempotency_key",
						Message: fmt.Sprintf("idempotency key %q was already used by recipient %s for a different request; use a new key for a new request", key, w.Recipient)}
					continue
				}
				got := answer(rows, created, l.id)
				if got == nil {
					out[i].Err = wrap("replay idempotency key", fmt.Errorf("watch %s of the ledger is gone", l.id))
					continue
				}
				got.Replayed, got.Existing = true, l.existing
				out[i].Watch = got
				continue
			}
		}
		if id, ok := pendingByIdentity[w.Identity]; ok {
			got := answer(rows, created, id)
			if got == nil {
				out[i].Err = wrap("read pending watch by identity", fmt.Errorf("watch %s is gone", id))
				continue
			}
			got.Existing = true
			if key != "" {
				puts = append(puts, ledgerPut{w.Recipient, key, p.RequestHash, got.ID, 1, createdMS})
				ledger[[2]string{w.Recipient, key}] = ledgerRow{p.RequestHash, got.ID, true, createdMS}
			}
			out[i].Watch = got
			continue
		}
		if p.MaxActive > 0 && total+nAdded >= int64(p.MaxActive) {
			out[i].Err = vigil.Errorf(vigil.CodeQuotaExceeded,
				"vigil already holds its max_active cap of %d pending watches: wait for some to settle, cancel some, or raise max_active", p.MaxActive)
			continue
		}
		if p.MaxActivePerRecipient > 0 && pending[w.Recipient]+int64(added[w.Recipient]) >= int64(p.MaxActivePerRecipient) {
			out[i].Err = vigil.Errorf(vigil.CodeQuotaExceeded,
				"recipient %s already has its max_active_per_recipient cap of %d pending watches: wait for some to settle, cancel some, or raise max_active_per_recipient", w.Recipient, p.MaxActivePerRecipient)
			continue
		}
		if takenIDs[w.ID] {
			out[i].Err = &vigil.Error{Code: vigil.CodeConflict, Message: fmt.Sprintf("a watch with id %s already exists", w.ID)}
			continue
		}
		it.create = true
		takenIDs[w.ID] = true
		created[w.ID] = w
		pendingByIdentity[w.Identity] = w.ID
		added[w.Recipient]++
		nAdded++
		if key != "" {
			puts = append(puts, ledgerPut{w.Recipient, key, p.RequestHash, w.ID, 0, createdMS})
			ledger[[2]string{w.Recipient, key}] = ledgerRow{p.RequestHash, w.ID, false, createdMS}
		}
		c := *w
		out[i].Watch = &c
	}

	if err := insertWatches(t, items); err != nil {
		return err
	}
	if err := addPending(t, int(nAdded)); err != nil {
		return err
	}
	for _, l := range puts {
		if _, err := t.exec(t.ledgerPut, l.recipient, l.key, l.hash, l.id, l.existing, l.created); err != nil {
			return wrap("record idempotency key", err)
		}
	}
	return nil
}

// answer returns a copy of the watch id: one created earlier in the batch,
// or one read from the database; nil if neither.
func answer(rows, created map[string]*vigil.Watch, id string) *vigil.Watch {
	w := created[id]
	if w == nil {
		w = rows[id]
	}
	if w == nil {
		return nil
	}
	c := *w
	return &c
}

// insertWatches inserts the items to create with as few statements as
// insertChunks allows.
func insertWatches(t *wtx, items []batchItem) error {
	var batch []*batchItem
	for i := range items {
		if items[i].create {
			batch = append(batch, &items[i])
		}
	}
	if len(batch) == 0 {
		return nil
	}
	var last int64
	if err := t.queryRow(t.watchMaxRowid).Scan(&last); err != nil {
		return wrap("insert watches", err)
	}
	err := forChunks(len(batch), func(from, n int) error {
		rows := batch[from : from+n]
		cols := t.watchColumnsOf(rows)
		st, err := t.insertMany(n, cols)
		if err != nil {
			return err
		}
		args := make([]any, 0, n*bits.OnesCount32(cols))
		for _, it := range rows {
			for c, a := range it.args {
				if cols&(1<<c) != 0 {
					args = append(args, a)
				}
			}
		}
		if _, err := t.exec(st, args...); err != nil {
			return wrap("insert watches", interpretError(err))
		}
		return nil
	})
	if err != nil {
		return err
	}
	if err := noteIdentities(t, batch, last); err != nil {
		return err
	}
	ws := make([]*vigil.Watch, len(batch))
	for k, it := range batch {
		ws[k] = it.stored
	}
	return indexNew(t, last+1, ws...)
}

// noteIdentities puts the watches of batch, just inserted after rowid
// last, in the writer's index of identities. SQLite gave them the rowids
// after last, in order: watches has no AUTOINCREMENT, so a new row takes
// the largest rowid plus one (as indexNew counts on), which the largest
// rowid now confirms; were it otherwise (a table whose largest rowid is
// SQLite's largest), the write fails whole.
func noteIdentities(t *wtx, batch []*batchItem, last int64) error {
	var top int64
	if err := t.queryRow(t.watchMaxRowid).Scan(&top); err != nil {
		return wrap("insert watches", err)
	}
	if top != last+int64(len(batch)) {
		return fmt.Errorf("sqlite: insert watches: %d rows took rowids up to %d, not %d to %d", len(batch), top, last+1, last+int64(len(batch)))
	}
	for k, it := range batch {
		t.setIdentity(it.stored.Identity, last+1+int64(k))
	}
	return nil
}

// allWatchColumns is the set of every column of watchColumns, a bit per
// column in their order.
const allWatchColumns = 1<<watchColumnCount - 1

// zeroDefaults are the columns of watches whose default is 0, not NULL
// (polls, standing, answered_at_creation): left out of an insert when 0.
const zeroDefaults = 1<<12 | 1<<13 | 1<<23

// maxWatchHeads bounds the sets of columns the multi-row inserts of
// watches are prepared for: past it, a set not seen yet writes every
// column.
const maxWatchHeads = 32

// watchColumnsOf returns the columns some row of rows holds a value for
// (a bit per column of watchColumns): the others are left to their
// defaults (NULL, or 0 for zeroDefaults), which is what their rows would
// have written. A timer's row binds 14 of the 30 columns: each bound
// value costs its binding and a step of the statement.
func (t *wtx) watchColumnsOf(rows []*batchItem) uint32 {
	var cols uint32
	for _, it := range rows {
		for c, a := range it.args {
			if a == nil || cols&(1<<c) != 0 {
				continue
			}
			if zeroDefaults&(1<<c) != 0 {
				if v, ok := a.(int); ok && v == 0 {
					continue
				}
			}
			cols |= 1 << c
		}
	}
	cols |= 1 // the id: never a statement of no column
	if _, ok := t.watchHeads[cols]; !ok && len(t.watchHeads) >= maxWatchHeads {
		return allWatchColumns
	}
	return cols
}

// insertMany returns the prepared insert of n watch rows of the columns
// cols, preparing it on first use.
func (t *wtx) insertMany(n int, cols uint32) (*sql.Stmt, error) {
	if n == 1 && cols == allWatchColumns {
		return t.watchInsert, nil
	}
	head, ok := t.watchHeads[cols]
	if !ok {
		names := strings.Split(watchColumns, ",")
		var use []string
		for c, name := range names {
			if cols&(1<<c) != 0 {
				use = append(use, strings.TrimSpace(name))
			}
		}
		head = "INSERT OR FAIL INTO watches (" + strings.Join(use, ", ") + ") VALUES "
		if t.watchHeads == nil {
			t.watchHeads = map[uint32]string{}
		}
		t.watchHeads[cols] = head
	}
	return t.multiInsert(head, bits.OnesCount32(cols), n)
}

// insertMessagesStmt returns the prepared insert of n message rows,
// preparing it on first use.
func (t *wtx) insertMessagesStmt(n int) (*sql.Stmt, error) {
	if n == 1 {
		return t.messageInsert, nil
	}
	return t.multiInsert(messageInsertHead, messageColumnCount, n)
}

// multiInsert returns head (an INSERT up to its VALUES) followed by n rows
// of cols placeholders each, prepared on the writer connection on first
// use and kept with its other statements.
func (t *wtx) multiInsert(head string, cols, n int) (*sql.Stmt, error) {
	return t.multiStmt(head, "", cols, n)
}

// multiStmt is multiInsert with tail (an upsert clause) after the rows.
func (t *wtx) multiStmt(head, tail string, cols, n int) (*sql.Stmt, error) {
	key := multiKey{head, tail, n}
	if st := t.inserts[key]; st != nil {
		return st, nil
	}
	row := "(" + placeholders(cols) + ")"
	q := make([]byte, 0, len(head)+(len(row)+2)*n+len(tail))
	q = append(q, head...)
	for i := range n {
		if i > 0 {
			q = append(q, ", "...)
		}
		q = append(q, row...)
	}
	q = append(q, tail...)
	st, err := t.conn.PrepareContext(context.Background(), string(q))
	if err != nil {
		return nil, fmt.Errorf("sqlite: prepare a multi-row insert of %d rows: %w", n, err)
	}
	if t.inserts == nil {
		t.inserts = map[multiKey]*sql.Stmt{}
	}
	t.inserts[key] = st
	return st, nil
}

// multiKey names a multi-row insert: its head, tail and number of rows.
type multiKey struct {
	head, tail string
	n          int
}

// readLedger reads the ledger entries of keys (recipient, key), whatever
// their age: each item applies its own cut-off.
func readLedger(t *wtx, keys [][2]string) (map[[2]string]ledgerRow, error) {
	out := map[[2]string]ledgerRow{}
	if len(keys) == 0 {
		return out, nil
	}
	arr, err := json.Marshal(keys)
	if err != nil {
		return nil, wrap("read idempotency ledger", err)
	}
	rows, err := t.query(t.ledgerGetMany, string(arr))
	if err != nil {
		return nil, wrap("read idempotency ledger", err)
	}
	defer rows.Close()
	for rows.Next() {
		var r, k string
		var l ledgerRow
		if err := rows.Scan(&r, &k, &l.hash, &l.id, &l.existing, &l.createdAt); err != nil {
			return nil, wrap("read idempotency ledger", err)
		}
		out[[2]string{r, k}] = l
	}
	if err := rows.Err(); err != nil {
		return nil, wrap("read idempotency ledger", err)
	}
	return out, nil
}

// readPendingIdentities returns the pending watches among identities, by
// identity: the writer's index names their rows, which are read to check
// that each is that pending watch (see pendingByIdentity).
func readPendingIdentities(t *wtx, identities []string) (map[string]string, error) {
	out := map[string]string{}
	x, err := t.identities()
	if err != nil {
		return nil, err
	}
	var rowids []int64
	for _, ident := range identities {
		if r, ok := x.get(ident); ok {
			rowids = append(rowids, r)
		}
	}
	if len(rowids) == 0 {
		return out, nil
	}
	arr, err := json.Marshal(rowids)
	if err != nil {
		return nil, wrap("find pending watches by identity", err)
	}
	rows, err := t.query(t.watchesByRowids, string(arr))
	if err != nil {
		return nil, wrap("find pending watches by identity", err)
	}
	defer rows.Close()
	found := map[int64]bool{}
	for rows.Next() {
		var rowid int64
		var id, state string
		var ident any
		if err := rows.Scan(&rowid, &id, &state, &ident); err != nil {
			return nil, wrap("find pending watches by identity", err)
		}
		s := identityString(ident)
		if r, ok := x.get(s); ok && r == rowid && vigil.State(state) == vigil.StatePending {
			out[s] = id
			found[rowid] = true
		}
	}
	if err := rows.Err(); err != nil {
		return nil, wrap("find pending watches by identity", err)
	}
	for _, ident := range identities {
		if r, ok := x.get(ident); ok && !found[r] {
			x.remove(ident, r) // not that pending watch (never, unless they disagree)
		}
	}
	return out, nil
}

// readStrings runs st with vs as one JSON array and returns the one
// column of its rows.
func readStrings(t *wtx, st *sql.Stmt, vs []string) ([]string, error) {
	arr, err := json.Marshal(vs)
	if err != nil {
		return nil, err
	}
	rows, err := t.query(st, string(arr))
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var v string
		if err := rows.Scan(&v); err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, rows.Err()
}

// readCounts returns the total of pending watches and each recipient's.
func readCounts(t *wtx, recipients map[string]bool) (int64, map[string]int64, error) {
	rs := make([]string, 0, len(recipients))
	for r := range recipients {
		rs = append(rs, r)
	}
	arr, err := json.Marshal(rs)
	if err != nil {
		return 0, nil, wrap("read pending counts", err)
	}
	rows, err := t.query(t.countsMany, string(arr))
	if err != nil {
		return 0, nil, wrap("read pending counts", err)
	}
	defer rows.Close()
	var total int64
	out := map[string]int64{}
	for rows.Next() {
		var r string
		var n int64
		if err := rows.Scan(&r, &n); err != nil {
			return 0, nil, wrap("read pending counts", err)
		}
		if r == "" {
			total = n
		} else {
			out[r] = n
		}
	}
	if err := rows.Err(); err != nil {
		return 0, nil, wrap("read pending counts", err)
	}
	return total, out, nil
}

// readWatches reads whole rows by id, on the writer (inside the batch's
// transaction).
func readWatches(t *wtx, ids []string) (map[string]*vigil.Watch, error) {
	out := map[string]*vigil.Watch{}
	if len(ids) == 0 {
		return out, nil
	}
	arr, err := json.Marshal(ids)
	if err != nil {
		return nil, wrap("read watches", err)
	}
	rows, err := t.query(t.watchesByIDs, string(arr))
	if err != nil {
		return nil, wrap("read watches", err)
	}
	ws, err := appendWatches(nil, rows)
	if err != nil {
		return nil, wrap("read watches", err)
	}
	for _, w := range ws {
		out[w.ID] = w
	}
	return out, nil
}
