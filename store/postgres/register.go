package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/vigil-run/vigil"
	"github.com/vigil-run/vigil/internal/storecheck"
)

const (
	sqlWatchPendingByIdentity = `SELECT ` + watchColumns + ` FROM watches WHERE identity = $1 AND state = 'pending'`
	sqlTotalSum               = `SELECT coalesce(sum(pending), 0) FROM totals`
	sqlCapLockShared          = `SELECT pg_advisory_xact_lock_shared($1)`
	sqlCapLock                = `SELECT pg_advisory_xact_lock($1)`
	// sqlMineTake adds $2 to the recipient's counter, making it if there
	// is none, and returns what it holds now; the row stays locked until
	// the transaction ends.
	sqlMineTake = `INSERT INTO counters (recipient, pending, created_at) VALUES ($1, $2, $3)
		ON CONFLICT (recipient) DO UPDATE SET pending = counters.pending + excluded.pending RETURNING pending`
	sqlTotalAdd = `UPDATE totals SET pending = pending + $2 WHERE stripe = $1`
	sqlMineSub  = `UPDATE counters SET pending = pending - $2 WHERE recipient = $1`
	// sqlLedgerExpire and sqlLedgerInsert write a key's entry, taking
	// over only an expired one: an entry written meanwhile by a
	// registration that committed first breaks idempotency_pkey, and the
	// registration runs again and replays it.
	sqlLedgerExpire = `DELETE FROM idempotency WHERE recipient = $1 AND key = $2 AND created_at < $3`
	sqlLedgerInsert = `INSERT INTO idempotency (recipient, key, request_hash, watch_id, existing, created_at) VALUES ($1, $2, $3, $4, $5, $6)`
)

// WatchCreate registers p.Watch (SPEC §3). In order, in one transaction: a
// live idempotency ledger entry replays its watch (Replayed) or, for another
// request hash, is an idempotency_conflict; a pending watch with the same
// identity is returned (Existing); the caps are enforced on the counters
// (quota_exceeded); the watch and the ledger entry are inserted. A
// registration that races another of the same identity or key, in any
// process, runs again and finds the winner's.
//
// Registrations made at the same time share transactions (see creates):
// one that finds the store's registration transactions all in flight
// waits for the next, which takes it with the others that waited, as if
// they had been made one after the other. Alone, a registration costs two
// round trips to the database (see createOne).
func (s *Store) WatchCreate(ctx context.Context, p vigil.WatchCreateParams) (*vigil.Watch, error) {
	it, err := s.prepare(p)
	if err != nil {
		return nil, err
	}
	return s.creates.submit(ctx, s, it)
}

// prepare checks and encodes p for WatchCreate and WatchCreateMany. An
// error that is a *vigil.Error refuses p alone; any other is the store's.
func (s *Store) prepare(p vigil.WatchCreateParams) (batchItem, error) {
	if err := storecheck.NewWatch(p.Watch, p.IdempotencyKey, p.RequestHash); err != nil {
		return batchItem{}, err
	}
	nw := *p.Watch
	nw.State = vigil.StatePending
	enc, err := encodeWatch(&nw)
	if err != nil {
		return batchItem{}, vigil.Errorf(vigil.CodeInvalidRequest, "watch %s: %v", nw.ID, err)
	}
	stored, err := enc.stored(&nw)
	if err != nil {
		return batchItem{}, fmt.Errorf("postgres: watch %s: %w", nw.ID, err)
	}
	it := batchItem{p: p, stored: stored, args: enc.args(&nw)}
	if s.sendEvents {
		if it.ev, err = s.createdEvent(stored); err != nil {
			return batchItem{}, err
		}
	}
	return it, nil
}

// createAlone is WatchCreate's transaction for one registration (createOne).
func (s *Store) createAlone(ctx context.Context, it *batchItem) (*vigil.Watch, error) {
	excl := s.nearCap.Load()
	var out *vigil.Watch
	err := s.writeConn(ctx, func(c *pgx.Conn) error {
		var err error
		out, err = s.createOne(ctx, c, it.p, it.stored, it.args, it.ev, &excl)
		return err
	})
	if err != nil {
		return nil, wrap("create watch", err)
	}
	if !out.Existing && !out.Replayed {
		s.wroteWatches(1)
	}
	return out, nil
}

// writeConn runs fn on one connection of the pool; fn begins and ends its
// transaction itself, in its pipelines (a BEGIN queued before its first
// statements, a COMMIT after its last), so that a registration is two
// round trips rather than one per statement plus two. A transaction fn
// leaves open is rolled back: fn commits what it wrote, and leaves open
// one that it failed, or that wrote nothing worth keeping. fn runs again from
// the start when it lost a race, as in write.
func (s *Store) writeConn(ctx context.Context, fn func(c *pgx.Conn) error) error {
	var err error
	for range maxAttempts {
		err = s.pool.AcquireFunc(ctx, func(pc *pgxpool.Conn) error {
			c := pc.Conn()
			err := fn(c)
			if c.PgConn().TxStatus() != 'I' {
				// If this fails, the pool drops the connection, left
				// in a transaction, when it comes back.
				if _, rerr := c.Exec(ctx, "rollback"); rerr != nil && err == nil {
					err = rerr
				}
			}
			return err
		})
		if err == nil || !retryable(err) || ctx.Err() != nil {
			return err
		}
		s.raced.Add(1)
	}
	return &vigil.Error{Code: vigil.CodeUnavailable, Err: err,
		Message: fmt.Sprintf("the database kept refusing this write as it raced others (%d attempts): try again", maxAttempts)}
}

// createOne is WatchCreate's transaction, in two pipelined round trips:
//
//  1. begin; the live ledger entry of the key; the pending watch of the
//     identity; the global cap's lock and the total (see below); the
//     watch's stripe of the total and its recipient's counter, each
//     moved up by one under its row lock, returning what they hold;
//  2. if the watch is new and under the caps: the insert, the ledger
//     entry, the event, commit.
//
// Locks are taken in the one order every writer uses: the cap lock, then
// the stripes of the total, then the recipients' counters (see unpend).
// A registration that finds its watch existing, replayed or over a cap
// has moved the counters for nothing: it rolls back (or, to write the
// ledger entry of an existing watch, moves them down again).
//
// The global cap (0: none): the total is the sum of the stripes, read
// from the statement's snapshot, which misses the registrations still in
// flight: fewer than the server's max_connections, s.margin. Far below
// the cap, a registration takes the cap lock (an advisory transaction
// lock of the schema) shared before it reads the sum: even if every other
// connection adds one meanwhile, the cap holds. Near it, it takes the
// lock exclusive, which waits for every registration holding it shared
// to end and keeps new ones out, so the sum it reads is exact. Shared
// holders never wait on each other. *excl says which to take; one that
// finds itself near the cap holding it shared runs again exclusive
// (never upgrading a shared lock: two upgrades would deadlock), and the
// store remembers for the next (nearCap).
func (s *Store) createOne(ctx context.Context, c *pgx.Conn, p vigil.WatchCreateParams, w *vigil.Watch, args []any, ev string, excl *bool) (*vigil.Watch, error) {
	key := p.IdempotencyKey
	created := w.CreatedAt.UnixMilli()
	since := sinceMS(p.IdempotencySince)
	capped := p.MaxActive > 0
	st := stripe(w.ID)

	b := &pgx.Batch{}
	b.Queue("begin")
	if key != "" {
		b.Queue(sqlLedgerGet, w.Recipient, key, since)
	}
	b.Queue(sqlWatchPendingByIdentity, w.Identity)
	if capped {
		if *excl {
			b.Queue(sqlCapLock, s.capKey)
		} else {
			b.Queue(sqlCapLockShared, s.capKey)
		}
		b.Queue(sqlTotalSum)
	}
	b.Queue(sqlTotalAdd, st, 1)
	b.Queue(sqlMineTake, w.Recipient, 1, created)
	var (
		replayHash, replayID string
		replayExisting       bool
		replay               bool
		existing             *vigil.Watch
		total, mine          int64
	)
	err := func() error {
		br := c.SendBatch(ctx, b)
		defer br.Close()
		if _, err := br.Exec(); err != nil {
			return err
		}
		if key != "" {
			err := br.QueryRow().Scan(&replayHash, &replayID, &replayExisting)
			switch {
			case err == nil:
				replay = true
			case !errors.Is(err, pgx.ErrNoRows):
				return err
			}
		}
		got, err := scanWatch(br.QueryRow())
		switch {
		case err == nil:
			existing = got
		case !errors.Is(err, pgx.ErrNoRows):
			return err
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
		if err := br.QueryRow().Scan(&mine); err != nil {
			return err
		}
		return br.Close()
	}()
	if err != nil {
		return nil, err
	}

	if replay {
		if replayHash != p.RequestHash {
			return nil, &vigil.Error{Code: vigil.CodeIdempotencyConflict, Field: "idempotency_key",
				Message: fmt.Sprintf("idempotency key %q was already used by recipient %s for a different request; use a new key for a new request", key, w.Recipient)}
		}
		got, err := scanWatch(c.QueryRow(ctx, sqlWatchByID, replayID))
		if err != nil {
			return nil, fmt.Errorf("replay idempotency key: %w", err)
		}
		got.Replayed, got.Existing = true, replayExisting
		return got, nil // rolled back by writeConn
	}

	b = &pgx.Batch{}
	if existing != nil {
		existing.Existing = true
		if key == "" {
			return existing, nil // nothing to write: rolled back
		}
		b.Queue(sqlTotalAdd, st, -1)
		b.Queue(sqlMineSub, w.Recipient, 1)
		b.Queue(sqlLedgerExpire, w.Recipient, key, since)
		b.Queue(sqlLedgerInsert, w.Recipient, key, p.RequestHash, existing.ID, true, created)
		b.Queue("commit")
		if err := s.commitBatch(ctx, c, b, b.Len(), w.ID); err != nil {
			return nil, err
		}
		return existing, nil
	}
	if capped {
		switch {
		case !*excl && total+s.margin >= int64(p.MaxActive):
			*excl = true
			s.nearCap.Store(true)
			return nil, errRetry
		case *excl && total+s.margin < int64(p.MaxActive):
			s.nearCap.Store(false)
		}
		if total >= int64(p.MaxActive) {
			return nil, vigil.Errorf(vigil.CodeQuotaExceeded,
				"vigil already holds its max_active cap of %d pending watches: wait for some to settle, cancel some, or raise max_active", p.MaxActive)
		}
	}
	if p.MaxActivePerRecipient > 0 && mine > int64(p.MaxActivePerRecipient) {
		return nil, vigil.Errorf(vigil.CodeQuotaExceeded,
			"recipient %s already has its max_active_per_recipient cap of %d pending watches: wait for some to settle, cancel some, or raise max_active_per_recipient", w.Recipient, p.MaxActivePerRecipient)
	}

	b.Queue(sqlWatchInsertFull, args...)
	if key != "" {
		b.Queue(sqlLedgerExpire, w.Recipient, key, since)
		b.Queue(sqlLedgerInsert, w.Recipient, key, p.RequestHash, w.ID, false, created)
	}
	b.Queue("commit")
	n := b.Len()
	if ev != "" {
		s.queueEvents(b, []string{ev})
	}
	if err := s.commitBatch(ctx, c, b, n, w.ID); err != nil {
		return nil, err
	}
	out := *w
	return &out, nil
}

// commitBatch sends a registration's writes and its commit, and reads
// their results in order: the first failure decides, and a unique
// violation of a race the registration lost (the identity, the key) makes
// it run again.
func (s *Store) commitBatch(ctx context.Context, c *pgx.Conn, b *pgx.Batch, n int, id string) error {
	br := c.SendBatch(ctx, b)
	defer br.Close()
	for range n {
		if _, err := br.Exec(); err != nil {
			switch constraint(err) {
			case "watches_identity_pending", "idempotency_pkey":
				return errRetry // a registration of the same identity or key committed first
			case "watches_pkey":
				return &vigil.Error{Code: vigil.CodeConflict, Message: fmt.Sprintf("a watch with id %s already exists", id), Err: err}
			}
			return err
		}
	}
	s.eventsSent(br, b.Len()-n)
	return nil
}
