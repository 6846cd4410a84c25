package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"

	"modernc.org/sqlite"

	"github.com/vigil-run/vigil"
)

// op is one write waiting for the writer goroutine. fn runs on the writer
// connection inside the batch's transaction; err is its result, valid once
// done is closed.
type op struct {
	ctx  context.Context
	fn   func(t *wtx) error
	err  error
	done chan struct{}
	// create, when set, is the one watch a WatchCreate op writes: the
	// writer may write it together with the other creates of its batch
	// (see commitCreates) instead of running fn.
	create *createOne
}

// createOne is a single registration the writer may merge with others.
// Once the op is done and merged is true, res holds its answer and fn was
// not run.
type createOne struct {
	item   batchItem
	res    vigil.WatchCreateResult
	merged bool
}

// writer owns the one writer connection. Every write of the store is an op
// run by its goroutine: it takes all the ops that are waiting (up to
// maxBatch), runs each inside its own SAVEPOINT of ONE transaction (the
// single registrations among them first, together: commitCreates), commits
// once, and only then answers their callers. An op that fails rolls back to
// its savepoint and leaves the others of the batch alone.
type writer struct {
	conn *sql.Conn
	tx   wtx

	mu     sync.Mutex
	queue  []*op
	closed bool

	wake chan struct{} // buffered(1): there is something in queue
	quit chan struct{} // closed by stop
	done chan struct{} // closed when run returns

	// walPages counts the pages committed since the last request to the
	// background checkpointer; past checkpointPages, checkpoint is
	// signalled. sinceOwn counts them since the writer last checkpointed
	// itself; past restartPages it does (see finishCheckpoint). Only the
	// writer goroutine touches them.
	walPages, sinceOwn int
	checkpoint         chan struct{} // buffered(1)
	// offer brings WatchListPending's identities (offerIdentities);
	// commitSeq counts the commits, touchedSeq is the last that changed
	// identities before they were read, offersStale says another program
	// committed before they were read. Only commitSeq is read outside the
	// writer goroutine.
	offer       chan identityOffer // buffered(1)
	commitSeq   atomic.Int64
	touchedSeq  int64
	offersStale bool
	// hasIdents is whether the writer holds identities (kept beside
	// tx.idents for WatchListPending, which offers only while it does not).
	hasIdents atomic.Bool
	// checkpointMu is held by whichever of the writer and the background
	// checkpointer is checkpointing: SQLite runs one checkpoint at a time
	// and answers another with SQLITE_BUSY, so without it the writer's own
	// checkpoint, colliding with a background one, did nothing.
	checkpointMu sync.Mutex
	// checkpointFailed reports a failed checkpoint (there is no caller to
	// return it to; the next one retries).
	checkpointFailed func(error)
	// fault, when set, is called before each commit, and an error from it
	// fails the commit (see Store.SetWriteFaultFunc).
	fault atomic.Pointer[func() error]
	// mergeFault, when set (by tests), fails the merged write of a batch's
	// registrations after it has written them, so they are rolled back
	// and run one by one.
	mergeFault atomic.Pointer[func() error]
	// full is whether the last batch found the disk full; fullChanged
	// hears each change of it. Only the writer goroutine touches full.
	full        bool
	fullChanged func(full bool)
	// checked is Open's check of the file when it runs on after Open
	// (Options.CheckLater): no batch begins before it has passed, and
	// every batch fails with its error if it did not.
	checked *fileCheck
}

// wtx is what an op gets: the writer's prepared statements, used inside the
// batch's open transaction.
type wtx struct {
	conn *sql.Conn
	writeStmts
	// inserts are the multi-row inserts, prepared on first use (see
	// multiInsert).
	inserts map[multiKey]*sql.Stmt
	// watchHeads are the heads of the multi-row inserts of watches, by
	// the set of columns they write (see insertMany).
	watchHeads map[uint32]string
	// idents holds the pending watches' identities (schema 16); every
	// write that makes a watch pending or ends one keeps it.
	idents *identities
	// dataVersion is SQLite's data_version when idents was last known to
	// hold what the database holds: it moves only when another connection
	// commits (another program writing the file).
	dataVersion int64
	// loadedInTx says idents were read in the open transaction, after some
	// of its writes; touched, that it changed identities before they were
	// read. loads counts the reads (for tests).
	loadedInTx, touched bool
	loads               int
}

func newWriter(ctx context.Context, db *sql.DB, checkpointFailed func(error), fullChanged func(bool)) (*writer, error) {
	conn, err := db.Conn(ctx)
	if err != nil {
		return nil, fmt.Errorf("sqlite: writer connection: %w", err)
	}
	w := &writer{
		conn:             conn,
		wake:             make(chan struct{}, 1),
		quit:             make(chan struct{}),
		done:             make(chan struct{}),
		checkpoint:       make(chan struct{}, 1),
		offer:            make(chan identityOffer, 1),
		checkpointFailed: checkpointFailed,
		fullChanged:      fullChanged,
	}
	w.tx.conn = conn
	if err := prepareAll(ctx, conn, w.tx.writeStmts.defs()); err != nil {
		conn.Close()
		return nil, err
	}
	// What the identities WatchListPending offers are compared with: a
	// commit by another connection after this, before the writer has
	// identities, makes it read its own.
	if err := w.tx.queryRow(w.tx.dataVersionGet).Scan(&w.tx.dataVersion); err != nil {
		w.tx.writeStmts.close()
		conn.Close()
		return nil, fmt.Errorf("sqlite: read data_version: %w", err)
	}
	return w, nil
}

// loadIdentities reads idents from the pending rows, and the data_version
// they go with, inside the open transaction.
func (t *wtx) loadIdentities(ctx context.Context) error {
	x, err := readIdentities(ctx, t.conn)
	if err != nil {
		return err
	}
	if err := t.queryRow(t.dataVersionGet).Scan(&t.dataVersion); err != nil {
		return fmt.Errorf("sqlite: read data_version: %w", err)
	}
	t.idents = x
	t.loads++
	return nil
}

// identities returns the identities of the pending watches, reading them
// from the rows in this transaction if the writer has none yet: the first
// op that looks one up after Open does, unless WatchListPending's offer
// came first (beginTx). A read that saw this transaction's writes goes
// with them: rolled back, it is dropped (rollback, commit).
func (t *wtx) identities() (*identities, error) {
	if t.idents == nil {
		if err := t.loadIdentities(context.Background()); err != nil {
			return nil, wrap("read the identities of pending watches", err)
		}
		t.loadedInTx = true
	}
	return t.idents, nil
}

// setIdentity and removeIdentity keep the identities as a write makes a
// watch pending or ends one; before they are read, they only note that
// this transaction changed them, for the offers made before it (beginTx).
func (t *wtx) setIdentity(identity string, rowid int64) {
	if t.idents == nil {
		t.touched = true
		return
	}
	t.idents.set(identity, rowid)
}

func (t *wtx) removeIdentity(stored any, rowid int64) {
	if t.idents == nil {
		t.touched = true
		return
	}
	t.idents.removeStored(stored, rowid)
}

// identityOffer is the identities WatchListPending read beside its list,
// from a snapshot that holds every commit up to the writer's seq.
type identityOffer struct {
	x   *identities
	seq int64
}

// offerIdentities gives the writer the identities read by WatchListPending
// (the daemon's priming reads every pending row at start): at 1 000 000
// pending, a read of its own would add a second and a half to a start.
// The writer takes them unless it has read its own, a commit after seq
// changed them, or another program wrote the file meanwhile (beginTx).
func (w *writer) offerIdentities(x *identities, seq int64) {
	select {
	case w.offer <- identityOffer{x, seq}:
	default: // one is waiting already
	}
}

// beginTx begins the writer's transaction. When another program has
// committed to the database since the writer last looked (data_version
// moved), the identities are read again, in this transaction, which holds
// the write lock from BEGIN IMMEDIATE on: nothing else writes until it
// ends. Before they are read, it takes WatchListPending's offer if that
// still holds.
func (w *writer) beginTx() error {
	t := &w.tx
	if _, err := t.exec(t.begin); err != nil {
		return fmt.Errorf("sqlite: begin: %w", err)
	}
	var v int64
	err := t.queryRow(t.dataVersionGet).Scan(&v)
	if err == nil && v != t.dataVersion {
		if t.idents != nil {
			err = t.loadIdentities(context.Background())
		} else {
			t.dataVersion = v
			w.offersStale = true // an offer may predate that commit
		}
	}
	if err != nil {
		w.rollback()
		return fmt.Errorf("sqlite: begin: %w", err)
	}
	select {
	case o := <-w.offer:
		if t.idents == nil && !w.offersStale && o.seq >= w.touchedSeq {
			t.idents = o.x
		}
	default:
	}
	return nil
}

// noteIdents publishes whether the writer holds identities (hasIdents),
// after each transaction.
func (w *writer) noteIdents() {
	if has := w.tx.idents != nil; has != w.hasIdents.Load() {
		w.hasIdents.Store(has)
	}
}

// do runs fn in the writer's next transaction and returns once that
// transaction has committed (or fn's own error, which wrote nothing). A
// caller whose ctx is done before its turn comes is skipped with ctx's
// error; once fn has started, do waits for the commit whatever ctx does, so
// the answer is always what the database holds.
func (w *writer) do(ctx context.Context, fn func(t *wtx) error) error {
	return w.doOp(ctx, &op{fn: fn})
}

// doOp is do for an op the caller built (fn set, and create if it is a
// single registration).
func (w *writer) doOp(ctx context.Context, o *op) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	o.ctx, o.done = ctx, make(chan struct{})
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		return ErrClosed
	}
	w.queue = append(w.queue, o)
	w.mu.Unlock()
	select {
	case w.wake <- struct{}{}:
	default:
	}
	<-o.done
	// A full disk is storage_full wherever SQLite found it: in the op, or
	// at the begin or commit of its batch.
	return storageFull(o.err)
}

// run is the writer goroutine. It returns after stop, once every op accepted
// before stop has been run.
func (w *writer) run() {
	defer close(w.done)
	for {
		select {
		case <-w.wake:
		case <-w.quit:
		}
		for {
			batch := w.take()
			if len(batch) == 0 {
				break
			}
			w.commit(batch)
			if w.sinceOwn >= restartPages {
				w.finishCheckpoint()
			}
		}
		w.mu.Lock()
		finished := w.closed && len(w.queue) == 0
		w.mu.Unlock()
		if finished {
			return
		}
	}
}

// take removes up to maxBatch ops from the queue.
func (w *writer) take() []*op {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := min(len(w.queue), maxBatch)
	batch := w.queue[:n:n]
	if n == len(w.queue) {
		w.queue = nil
	} else {
		w.queue = w.queue[n:]
	}
	return batch
}

// stop refuses new ops, waits for the writer goroutine to finish the ones
// already accepted, and closes the connection.
func (w *writer) stop() {
	w.mu.Lock()
	already := w.closed
	w.closed = true
	w.mu.Unlock()
	if already {
		return
	}
	close(w.quit)
	<-w.done
	w.tx.writeStmts.close()
	for _, st := range w.tx.inserts {
		st.Close()
	}
	w.conn.Close()
}

// commit runs one batch in one transaction and answers every op in it.
func (w *writer) commit(batch []*op) {
	committed := false
	defer func() {
		w.noteFull(batch, committed)
		for _, o := range batch {
			close(o.done)
		}
	}()
	run := live(batch)
	if len(run) == 0 {
		return
	}
	run, err := w.awaitCheck(run)
	if err != nil {
		fail(run, err)
		return
	}
	if len(run) == 0 {
		return
	}
	t := &w.tx
	if err := w.beginTx(); err != nil {
		fail(run, err)
		return
	}
	// Single registrations first, together (commitCreates); then the
	// other ops, each in its own savepoint. all stays every op that runs,
	// for the failures that reach the whole transaction.
	all := run
	ok, merged, err := w.commitCreates(all)
	if err != nil {
		w.abort(all, err)
		return
	}
	if merged {
		run = slices.DeleteFunc(slices.Clone(all), func(o *op) bool { return o.create != nil && o.create.merged })
	}
	if len(run) == 1 && !merged {
		// Alone in its transaction: the transaction is its savepoint.
		if run[0].err = call(run[0], t); run[0].err == nil {
			ok++
		}
	} else {
		for _, o := range run {
			if _, err := t.exec(t.savepoint); err != nil {
				w.abort(all, fmt.Errorf("sqlite: savepoint: %w", err))
				return
			}
			mark, loaded := t.idents.mark(), t.loadedInTx
			if o.err = call(o, t); o.err != nil {
				// Undo this op only. If the savepoint is gone, SQLite rolled
				// the whole transaction back (disk full, I/O error): nothing
				// of this batch is written, so every caller hears it.
				t.idents.undoTo(mark)
				if !loaded && t.loadedInTx {
					t.idents, t.loadedInTx = nil, false // read after this op's writes
				}
				if _, err := t.exec(t.rollbackTo); err != nil {
					w.abort(all, fmt.Errorf("sqlite: write failed and the transaction is lost: %w", errors.Join(o.err, err)))
					return
				}
			} else {
				ok++
			}
			if _, err := t.exec(t.release); err != nil {
				w.abort(all, fmt.Errorf("sqlite: release savepoint: %w", err))
				return
			}
		}
	}
	if ok == 0 {
		// Nothing to keep: skip the fsync.
		w.rollback()
		return
	}
	if err := w.injected(); err != nil {
		w.rollback()
		fail(all, fmt.Errorf("sqlite: commit: %w", err))
		return
	}
	if _, err := t.exec(t.commitTx); err != nil {
		w.rollback()
		fail(all, fmt.Errorf("sqlite: commit: %w", err))
		return
	}
	committed = true
	t.idents.committed()
	if seq := w.commitSeq.Add(1); t.touched {
		w.touchedSeq = seq
	}
	t.touched, t.loadedInTx = false, false
	w.noteIdents()
	w.committed()
}

// commitCreates writes the batch's single registrations (the ops with a
// create) together, as WatchCreateMany writes a batch: one statement for
// each lookup and multi-row inserts, where each alone costs some five
// statements and a savepoint. Answers are those of the same creates one
// after the other (a second registration of the same watch finds the
// first, caps count the ones before it). It needs two or more, and runs
// first in the transaction, so it needs no savepoint (whose journal copies
// every page it changes): if the write fails as a whole (not an item's
// refusal, which writes nothing of its item), the transaction is rolled
// back and begun again, and the ops are left to run one by one, as without
// merging. It returns how many were written, and whether they were merged.
func (w *writer) commitCreates(run []*op) (int, bool, error) {
	var ops []*op
	for _, o := range run {
		if o.create != nil {
			ops = append(ops, o)
		}
	}
	if len(ops) < 2 {
		return 0, false, nil
	}
	t := &w.tx
	items := make([]batchItem, len(ops))
	out := make([]vigil.WatchCreateResult, len(ops))
	for i, o := range ops {
		items[i] = o.create.item
	}
	if err := w.callMany(t, items, out); err != nil {
		// Nothing came before them in the transaction, so the transaction
		// is their savepoint: roll it back and begin again.
		w.rollback()
		if err := w.beginTx(); err != nil {
			return 0, false, err
		}
		return 0, false, nil
	}
	n := 0
	for i, o := range ops {
		o.create.res, o.create.merged = out[i], true
		if o.err = out[i].Err; o.err == nil {
			n++
		}
	}
	return n, true, nil
}

// callMany runs createMany, turning a panic into an error as call does.
func (w *writer) callMany(t *wtx, items []batchItem, out []vigil.WatchCreateResult) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("sqlite: panic in write: %v", r)
		}
	}()
	if err := createMany(t, items, out); err != nil {
		return err
	}
	if f := w.mergeFault.Load(); f != nil {
		return (*f)()
	}
	return nil
}

// noteFull tells fullChanged when the disk turns out full (an op of the
// batch failed for it) and when a commit succeeds again after that.
func (w *writer) noteFull(batch []*op, committed bool) {
	full := w.full
	switch {
	case slices.ContainsFunc(batch, func(o *op) bool { return o.err != nil && isFull(o.err) }):
		full = true
	case committed:
		full = false
	}
	if full != w.full {
		w.full = full
		if w.fullChanged != nil {
			w.fullChanged(full)
		}
	}
}

// injected returns the error of the fault set with SetWriteFaultFunc, if
// any.
func (w *writer) injected() error {
	if f := w.fault.Load(); f != nil {
		return (*f)()
	}
	return nil
}

// committed counts the pages the last commit wrote to the WAL and asks the
// background checkpointer to copy them back into the database once enough
// have piled up. The writer connection never checkpoints inside a commit
// (wal_autocheckpoint=0): that copy, with its fsync, runs beside the writer
// on another connection, in parallel with the next commits.
func (w *writer) committed() {
	_ = w.conn.Raw(func(dc any) error {
		if st, ok := dc.(sqlite.DBStatus); ok {
			if n, _, err := st.Status(sqlite.DBStatusCacheWrite, true); err == nil {
				w.walPages += n
				w.sinceOwn += n
			}
		}
		return nil
	})
	if w.walPages >= checkpointPages {
		w.walPages = 0
		select {
		case w.checkpoint <- struct{}{}:
		default: // one is already asked for
		}
	}
}

// finishCheckpoint checkpoints on the writer goroutine, between two
// batches, after the last batch's callers have their answer. The WAL only
// starts over from its beginning after a checkpoint that copied every
// frame with no commit landing meanwhile, and under a steady stream of
// commits the background checkpointer never catches up: the WAL then
// grows without end, and every commit appends to the file, whose fsync
// must also journal the new size (on this project's reference disk, about
// twice the cost of an fsync of rewritten pages). So every restartPages
// the writer finishes the copy itself: the background checkpoints have
// done most of it, and the next commit starts the WAL over.
//
// PASSIVE never waits for readers: a reader still on an old snapshot only
// keeps the frames it needs, and the next checkpoint takes the rest.
func (w *writer) finishCheckpoint() {
	w.checkpointMu.Lock() // a background checkpoint in flight finishes first
	var busy, frames, copied int
	err := w.conn.QueryRowContext(context.Background(), "PRAGMA wal_checkpoint(PASSIVE)").Scan(&busy, &frames, &copied)
	w.checkpointMu.Unlock()
	w.sinceOwn = 0
	if err != nil && w.checkpointFailed != nil {
		w.checkpointFailed(err)
	}
	if err != nil || busy != 0 || copied < frames {
		// Another program's checkpoint held the lock, or a reader's
		// snapshot kept frames back: try again after a few more batches,
		// not a whole interval later, or the WAL outgrows its
		// preallocation.
		w.sinceOwn = restartPages - restartRetryPages
	}
}

// call runs o.fn, turning a panic into an error so that one bad op cannot
// take down the writer and every caller waiting on it.
func call(o *op, t *wtx) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("sqlite: panic in write: %v", r)
		}
	}()
	return o.fn(t)
}

// abort rolls the whole transaction back and fails every op of the batch.
func (w *writer) abort(run []*op, err error) {
	w.rollback()
	fail(run, err)
}

// rollback ends the open transaction, if SQLite has not already, and
// undoes its changes of the identities.
func (w *writer) rollback() {
	t := &w.tx
	_, _ = t.exec(t.rollbackTx)
	if t.loadedInTx {
		t.idents = nil // read after writes now undone
	}
	t.idents.undoTo(0)
	t.touched, t.loadedInTx = false, false
	w.noteIdents()
}

func fail(run []*op, err error) {
	for _, o := range run {
		o.err = err
	}
}

// live returns the ops of batch whose callers still wait, in order; each
// of the others gets its context's error, as one whose turn has not come.
func live(batch []*op) []*op {
	run := make([]*op, 0, len(batch))
	for _, o := range batch {
		if err := o.ctx.Err(); err != nil {
			o.err = err
			continue
		}
		run = append(run, o)
	}
	return run
}

// awaitCheck waits, before a batch begins, for Open's check of the file
// when it runs on after Open (Options.CheckLater), and returns its error
// with the ops to fail. An op whose caller gives up meanwhile is skipped
// with its context's error, as one whose turn has not come: it returns
// the ops still to run.
func (w *writer) awaitCheck(run []*op) ([]*op, error) {
	c := w.checked
	if c == nil {
		return run, nil
	}
	select {
	case <-c.done:
		return run, c.err
	default:
	}
	gaveUp := make(chan struct{}, len(run))
	for _, o := range run {
		stop := context.AfterFunc(o.ctx, func() { gaveUp <- struct{}{} })
		defer stop()
	}
	for waiting := len(run); waiting > 0; {
		select {
		case <-c.done:
			waiting = 0
		case <-gaveUp:
			waiting--
		}
	}
	kept := live(run)
	if len(kept) == 0 {
		return nil, nil
	}
	<-c.done // an op still waits: the loop ended with the check
	return kept, c.err
}

// exec runs a prepared statement on the writer connection. Writer
// statements never take a caller's context: cancelling one statement would
// interrupt, and so roll back, the whole shared transaction.
func (t *wtx) exec(st *sql.Stmt, args ...any) (sql.Result, error) {
	return st.ExecContext(context.Background(), args...)
}

func (t *wtx) queryRow(st *sql.Stmt, args ...any) *sql.Row {
	return st.QueryRowContext(context.Background(), args...)
}

func (t *wtx) query(st *sql.Stmt, args ...any) (*sql.Rows, error) {
	return st.QueryContext(context.Background(), args...)
}
