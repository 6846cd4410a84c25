package postgres

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/vigil-run/vigil"
)

const (
	sqlLedgerGetMany = `SELECT recipient, key, request_hash, watch_id, existing, created_at FROM idempotency
		WHERE (recipient, key) IN (SELECT * FROM unnest($1::text[], $2::text[]))`
	sqlLedgerWatches = `SELECT ` + watchColumns + ` FROM watches WHERE id IN (SELECT watch_id FROM idempotency
		WHERE (recipient, key) IN (SELECT * FROM unnest($1::text[], $2::text[])))`
	sqlPendingByIdentities = `SELECT ` + watchColumns + ` FROM watches WHERE identity = ANY($1) AND state = 'pending'`
	sqlIDsTaken            = `SELECT id FROM watches WHERE id = ANY($1)`
	// sqlMineTakeMany adds to each recipient's counter ($1 in name
	// order, so the rows are locked in the order every writer takes
	// them), making the ones there are not, and returns what they hold.
	sqlMineTakeMany = `INSERT INTO counters (recipient, pending, created_at)
		SELECT * FROM unnest($1::text[], $2::bigint[], $3::bigint[])
		ON CONFLICT (recipient) DO UPDATE SET pending = counters.pending + excluded.pending RETURNING recipient, pending`
	sqlMineSubMany = `UPDATE counters SET pending = counters.pending - d.n FROM unnest($1::text[], $2::bigint[]) AS d(recipient, n)
		WHERE counters.recipient = d.recipient`
	sqlLedgerExpireMany = `DELETE FROM idempotency USING unnest($1::text[], $2::text[], $3::bigint[]) AS d(recipient, key, since)
		WHERE idempotency.recipient = d.recipient AND idempotency.key = d.key AND idempotency.created_at < d.since`
	sqlLedgerInsertMany = `INSERT INTO idempotency (recipient, key, request_hash, watch_id, existing, created_at)
		SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::bool[], $6::bigint[])`
	sqlNotifyMany = `SELECT count(pg_notify($1, e)) FROM unnest($2::text[]) AS e`
)

// batchItem is one item of WatchCreateMany while it is resolved.
type batchItem struct {
	p      vigil.WatchCreateParams
	stored *vigil.Watch
	args   []any
	ev     string // the event of its registration, if the store sends them
}

// ledgerRow is an idempotency ledger entry read for a batch.
type ledgerRow struct {
	hash, id  string
	existing  bool
	createdAt int64
}

// WatchCreateMany implements vigil.Store: each item as WatchCreate would
// make it, in order, each seeing the ones before it, in one transaction of
// two pipelined round trips whatever the batch holds. What WatchCreate
// asks the database per item is asked once for the batch: the ledger
// entries of its keys and their watches, the pending watches of its
// identities, the ids already taken, the total under the cap lock, and the
// counters, locked; the items are then resolved in memory, in order, and
// the rows written with multi-row statements. An item refused (a cap, a
// key used for another request, an id taken) writes nothing and the
// others go on; a race lost to another transaction (an identity, a key or
// an id committed meanwhile) runs the whole batch again, as WatchCreate
// runs one item again.
//
// A batch with a global cap takes the cap lock exclusive (see createOne):
// the margin that lets holders of the shared lock run side by side counts
// one watch per transaction in flight, and a batch adds more.
func (s *Store) WatchCreateMany(ctx context.Context, ps []vigil.WatchCreateParams) ([]vigil.WatchCreateResult, error) {
	out := make([]vigil.WatchCreateResult, len(ps))
	items := make([]batchItem, len(ps))
	for i, p := range ps {
		it, err := s.prepare(p)
		var ve *vigil.Error
		switch {
		case errors.As(err, &ve):
			out[i].Err = err
			continue
		case err != nil:
			return nil, err
		}
		items[i] = it
	}
	var res []vigil.WatchCreateResult
	err := s.writeConn(ctx, func(c *pgx.Conn) error {
		res = slices.Clone(out)
		return s.createMany(ctx, c, items, res, nil)
	})
	if err != nil {
		return nil, wrap("create watches", err)
	}
	n := 0
	for _, r := range res {
		if r.Err == nil && r.Watch != nil && !r.Watch.Existing && !r.Watch.Replayed {
			n++
		}
	}
	s.wroteWatches(n)
	return res, nil
}

// createMany is WatchCreateMany's transaction. Items whose out entry
// already holds an error are skipped. With a global cap it takes the cap
// lock exclusive, unless excl says otherwise: a group of registrations
// (creates), at most maxGroup, takes it as createOne does, shared far
// below the cap.
func (s *Store) createMany(ctx context.Context, c *pgx.Conn, items []batchItem, out []vigil.WatchCreateResult, excl *bool) error {
	var (
		keyRecipients, keys []string
		identities, ids     []string
		capped              bool
		lowestCap           int64
		candidates          = map[string]int64{} // items per recipient
		firstAt             = map[string]int64{} // a recipient's first item's time
	)
	for i, it := range items {
		if out[i].Err != nil {
			continue
		}
		w := it.stored
		if it.p.IdempotencyKey != "" {
			keyRecipients, keys = append(keyRecipients, w.Recipient), append(keys, it.p.IdempotencyKey)
		}
		identities = append(identities, w.Identity)
		ids = append(ids, w.ID)
		if _, ok := firstAt[w.Recipient]; !ok {
			firstAt[w.Recipient] = w.CreatedAt.UnixMilli()
		}
		candidates[w.Recipient]++
		if it.p.MaxActive > 0 {
			if !capped || int64(it.p.MaxActive) < lowestCap {
				lowestCap = int64(it.p.MaxActive)
			}
			capped = true
		}
	}
	if len(ids) == 0 {
		return nil
	}
	// The total moves in one stripe, its first item's: as unpend moves
	// it down in one. Each item's own stripe locked a stripe for each
	// item, so that groups of registrations on different replicas (and
	// concurrent batches) waited on each other's commits for most of a
	// stripe they shared.
	st := stripe(ids[0])
	recipients := slices.Sorted(maps.Keys(candidates))
	deltas := make([]int64, len(recipients))
	firsts := make([]int64, len(recipients))
	for j, r := range recipients {
		deltas[j], firsts[j] = candidates[r], firstAt[r]
	}

	// Round trip 1: begin, the reads, the locks (the cap lock, the
	// total's stripe, the counters in name order, each moved up by every
	// candidate item: what the items that turn out not to be created
	// added is taken back in round trip 2).
	b := &pgx.Batch{}
	b.Queue("begin")
	if len(keys) > 0 {
		b.Queue(sqlLedgerGetMany, keyRecipients, keys)
		b.Queue(sqlLedgerWatches, keyRecipients, keys)
	}
	b.Queue(sqlPendingByIdentities, identities)
	b.Queue(sqlIDsTaken, ids)
	shared := capped && excl != nil && !*excl
	if capped {
		if shared {
			b.Queue(sqlCapLockShared, s.capKey)
		} else {
			b.Queue(sqlCapLock, s.capKey)
		}
		b.Queue(sqlTotalSum)
	}
	b.Queue(sqlTotalAdd, st, int64(len(ids)))
	b.Queue(sqlMineTakeMany, recipients, deltas, firsts)
	var (
		ledger            = map[[2]string]ledgerRow{}
		rows              = map[string]*vigil.Watch{} // by id: the ledger's and the identities' watches
		pendingByIdentity = map[string]string{}
		taken             = map[string]bool{}
		total             int64
		pending           = map[string]int64{} // by recipient, before this batch
	)
	err := func() error {
		br := c.SendBatch(ctx, b)
		defer br.Close()
		if _, err := br.Exec(); err != nil {
			return err
		}
		if len(keys) > 0 {
			r, err := br.Query()
			if err != nil {
				return err
			}
			for r.Next() {
				var rk [2]string
				var l ledgerRow
				if err := r.Scan(&rk[0], &rk[1], &l.hash, &l.id, &l.existing, &l.createdAt); err != nil {
					r.Close()
					return err
				}
				ledger[rk] = l
			}
			r.Close()
			if err := r.Err(); err != nil {
				return err
			}
			ws, err := br.Query()
			if err != nil {
				return err
			}
			got, err := collectWatches(nil, ws)
			if err != nil {
				return err
			}
			for _, w := range got {
				rows[w.ID] = w
			}
		}
		ws, err := br.Query()
		if err != nil {
			return err
		}
		got, err := collectWatches(nil, ws)
		if err != nil {
			return err
		}
		for _, w := range got {
			rows[w.ID] = w
			pendingByIdentity[w.Identity] = w.ID
		}
		r, err := br.Query()
		if err != nil {
			return err
		}
		takenIDs, err := pgx.CollectRows(r, pgx.RowTo[string])
		if err != nil {
			return err
		}
		for _, id := range takenIDs {
			taken[id] = true
		}
		if capped {
			if _, err := br.Exec(); err != nil {
				return err
			}
			if err := br.QueryRow().Scan(&total); err != nil {
				return err
			}
		}
		if _, err := br.Exec(); err != nil {
			return err
		}
		r, err = br.Query()
		if err != nil {
			return err
		}
		for r.Next() {
			var rc string
			var n int64
			if err := r.Scan(&rc, &n); err != nil {
				r.Close()
				return err
			}
			pending[rc] = n - candidates[rc]
		}
		r.Close()
		if err := r.Err(); err != nil {
			return err
		}
		return br.Close()
	}()
	if err != nil {
		return err
	}
	if capped && excl != nil {
		// As createOne: near the cap, run again holding the lock
		// exclusive (the margin counts maxGroup watches for every
		// transaction in flight); far from it again, say so.
		switch near := total+s.margin >= lowestCap; {
		case shared && near:
			*excl = true
			s.nearCap.Store(true)
			return errRetry
		case !shared && !near:
			s.nearCap.Store(false)
		}
	}

	// The items, in order, as createOne resolves one.
	var (
		create                  []*batchItem
		created                 = map[string]*vigil.Watch{}
		added                   = map[string]int64{}
		nAdded                  int64
		putR, putK, putH, putID []string
		putExisting             []bool
		putCreated, putSince    []int64
		events                  []string
	)
	putAt := map[[2]string]int{} // index in the put* slices, by (recipient, key)
	put := func(w *vigil.Watch, p vigil.WatchCreateParams, id string, existing bool) {
		rk := [2]string{w.Recipient, p.IdempotencyKey}
		at := w.CreatedAt.UnixMilli()
		ledger[rk] = ledgerRow{hash: p.RequestHash, id: id, existing: existing, createdAt: at}
		if j, ok := putAt[rk]; ok {
			// An entry this batch wrote, expired for this item's
			// cut-off: taken over, as WatchCreate would.
			putH[j], putID[j], putExisting[j], putCreated[j], putSince[j] = p.RequestHash, id, existing, at, sinceMS(p.IdempotencySince)
			return
		}
		putAt[rk] = len(putR)
		putR, putK, putH, putID = append(putR, w.Recipient), append(putK, p.IdempotencyKey), append(putH, p.RequestHash), append(putID, id)
		putExisting, putCreated, putSince = append(putExisting, existing), append(putCreated, at), append(putSince, sinceMS(p.IdempotencySince))
	}
	for i := range items {
		if out[i].Err != nil {
			continue
		}
		it := &items[i]
		w, p := it.stored, it.p
		key := p.IdempotencyKey
		if key != "" {
			if l, ok := ledger[[2]string{w.Recipient, key}]; ok && l.createdAt >= sinceMS(p.IdempotencySince) {
				if l.hash != p.RequestHash {
					out[i].Err = &vigil.Error{Code: vigil.CodeIdempotencyConflict, Field: "idempotency_key",
						Message: fmt.Sprintf("idempotency key %q was already used by recipient %s for a different request; use a new key for a new request", key, w.Recipient)}
					continue
				}
				got := answer(rows, created, l.id)
				if got == nil {
					return groupError{fmt.Errorf("replay idempotency key: watch %s of the ledger is gone", l.id)}
				}
				got.Replayed, got.Existing = true, l.existing
				out[i].Watch = got
				continue
			}
		}
		if id, ok := pendingByIdentity[w.Identity]; ok {
			got := answer(rows, created, id)
			if got == nil {
				return groupError{fmt.Errorf("read pending watch by identity: watch %s is gone", id)}
			}
			got.Existing = true
			if key != "" {
				put(w, p, got.ID, true)
			}
			out[i].Watch = got
			continue
		}
		if p.MaxActive > 0 && total+nAdded >= int64(p.MaxActive) {
			out[i].Err = vigil.Errorf(vigil.CodeQuotaExceeded,
				"vigil already holds its max_active cap of %d pending watches: wait for some to settle, cancel some, or raise max_active", p.MaxActive)
			continue
		}
		if p.MaxActivePerRecipient > 0 && pending[w.Recipient]+added[w.Recipient] >= int64(p.MaxActivePerRecipient) {
			out[i].Err = vigil.Errorf(vigil.CodeQuotaExceeded,
				"recipient %s already has its max_active_per_recipient cap of %d pending watches: wait for some to settle, cancel some, or raise max_active_per_recipient", w.Recipient, p.MaxActivePerRecipient)
			continue
		}
		if taken[w.ID] {
			out[i].Err = &vigil.Error{Code: vigil.CodeConflict, Message: fmt.Sprintf("a watch with id %s already exists", w.ID)}
			continue
		}
		create = append(create, it)
		taken[w.ID] = true
		created[w.ID] = w
		pendingByIdentity[w.Identity] = w.ID
		added[w.Recipient]++
		nAdded++
		if key != "" {
			put(w, p, w.ID, false)
		}
		if it.ev != "" {
			events = append(events, it.ev)
		}
		cw := *w
		out[i].Watch = &cw
	}
	if len(create) == 0 && len(putR) == 0 {
		return nil // nothing to write: rolled back
	}

	// Round trip 2: the writes and the commit.
	b = &pgx.Batch{}
	if back := int64(len(ids)) - nAdded; back > 0 {
		b.Queue(sqlTotalAdd, st, -back)
	}
	var backR []string
	var backN []int64
	for _, r := range recipients {
		if n := candidates[r] - added[r]; n > 0 {
			backR, backN = append(backR, r), append(backN, n)
		}
	}
	if len(backR) > 0 {
		b.Queue(sqlMineSubMany, backR, backN)
	}
	switch len(create) {
	case 0:
	case 1:
		b.Queue(sqlWatchInsertFull, create[0].args...)
	default:
		rows := make([][]any, len(create))
		for i, it := range create {
			rows[i] = it.args
		}
		b.Queue(sqlWatchInsertUnnest, columns(rows)...)
	}
	if len(putR) > 0 {
		b.Queue(sqlLedgerExpireMany, putR, putK, putSince)
		b.Queue(sqlLedgerInsertMany, putR, putK, putH, putID, putExisting, putCreated)
	}
	b.Queue("commit")
	n := b.Len()
	s.queueEvents(b, events)
	br := c.SendBatch(ctx, b)
	defer br.Close()
	for range n {
		if _, err := br.Exec(); err != nil {
			switch constraint(err) {
			case "watches_identity_pending", "idempotency_pkey", "watches_pkey":
				// A registration of the same identity, key or id
				// committed first: the next run finds it.
				return errRetry
			}
			return err
		}
	}
	s.eventsSent(br, b.Len()-n)
	return nil
}

// sqlWatchInsertUnnest inserts the rows whose columns are its arrays
// (columns), however many: one statement, prepared once a connection, and
// one call of the trigger that copies their text to watch_text, where the
// multi-row inserts of 256, 64, 16, 4 and 1 rows it replaces made up to
// eight for a group of 32 (the server's CPU a watch, in groups of 30:
// 113 – 115 → 101 – 113 µs; docs/BENCHMARKS.md, session 17).
var sqlWatchInsertUnnest = func() string {
	var q strings.Builder
	q.WriteString(`INSERT INTO watches (` + watchColumns + `) SELECT * FROM unnest(`)
	for j, t := range watchColumnTypes {
		if j > 0 {
			q.WriteString(", ")
		}
		fmt.Fprintf(&q, "$%d::%s[]", j+1, t)
	}
	q.WriteString(")")
	return q.String()
}()

// watchColumnTypes are the SQL types of watchColumns, in order.
var watchColumnTypes = [watchColumnCount]string{
	"text", "text", "text", "text", "text", "bigint", // id … created_at
	"text", "text", "bigint", // predicate, mode, every_ms
	"bigint", "bigint", "bigint", "bigint", "boolean", // deadline … standing
	"text", "text", "text", "bigint", "bigint", // note … stable_for_ms
	"bigint", "bigint", "bigint", "text", // max_polls … token_id
	"boolean", "text", "text", "text", // answered_at_creation … receipts
	"bigint", "bigint", "bigint", // errors, consecutive_errors, checked_at
}

// columns turns rows of encodedWatch.args into the arrays of
// sqlWatchInsertUnnest, one a column.
func columns(rows [][]any) []any {
	cols := make([]any, watchColumnCount)
	for j, t := range watchColumnTypes {
		switch t {
		case "text":
			cols[j] = column(rows, j, t, func(v any) (*string, bool) {
				switch v := v.(type) {
				case string:
					return &v, true
				case *string:
					return v, true
				}
				return nil, false
			})
		case "bigint":
			cols[j] = column(rows, j, t, func(v any) (*int64, bool) {
				switch v := v.(type) {
				case int64:
					return &v, true
				case int:
					n := int64(v)
					return &n, true
				case *int64:
					return v, true
				}
				return nil, false
			})
		case "boolean":
			cols[j] = column(rows, j, t, func(v any) (bool, bool) {
				b, ok := v.(bool)
				return b, ok
			})
		}
	}
	return cols
}

// column is column j of rows, each value as conv makes it of SQL type t. A
// value conv does not take is a mistake of encodedWatch.args's (a test
// writes every column: TestBatchInsertColumns).
func column[T any](rows [][]any, j int, t string, conv func(any) (T, bool)) []T {
	c := make([]T, len(rows))
	for i, r := range rows {
		v, ok := conv(r[j])
		if !ok {
			panic(fmt.Sprintf("postgres: column %d of a watch is %T, not %s", j, r[j], t))
		}
		c[i] = v
	}
	return c
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
