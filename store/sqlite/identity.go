package sqlite

import (
	"context"
	"database/sql"
	"encoding/hex"
	"fmt"
)

// identities is the writer's index of the pending watches by identity
// (SPEC §3: among pending watches an identity is unique), in memory: the
// identity of each pending watch, and its row. Schema 16 dropped the
// database's unique index of them, watches_identity_pending: an identity
// is a hash, so each registration put its entry on a page of that index
// at random, and a commit wrote one page of WAL for each registration in
// it on top of the pages the registrations shared, and a settlement as
// many to take the entries out (BenchmarkWatchCreateMany, in a store of
// 100 000 to 150 000 watches: about a quarter of the CPU a watch).
//
// Only the writer goroutine touches it, and it holds what the committed
// rows hold. It is read from the pending rows: by the daemon's priming
// read, which offers it to the writer (WatchListPending, offerIdentities),
// or by the writer at its first lookup (wtx.identities). Each write that
// makes a watch pending or ends one notes it here as it writes the row. A
// change made in a transaction that is rolled back is undone with it:
// each change is logged until the commit, and undone, newest first, back
// to the savepoint rolled back to (mark, undoTo). Another program that
// commits to the file (the data-dir lock keeps other vigils out, not the
// sqlite3 shell) makes the writer read it again (beginTx, data_version).
//
// Identities of 32 lowercase hex digits (vigil.Identity's) are kept as
// the 16 bytes they spell, in a map without pointers, which the garbage
// collector does not scan; any other string (a store's caller may choose
// its own) in a second map.
type identities struct {
	hex  map[[16]byte]int64
	text map[string]int64
	log  []identityChange
}

// identityChange is how one change found its identity: the rowid it
// mapped to before, and whether it mapped at all.
type identityChange struct {
	identity string
	rowid    int64
	had      bool
}

// newIdentities returns empty identities with room for n.
func newIdentities(n int64) *identities {
	return &identities{hex: make(map[[16]byte]int64, max(0, n)), text: map[string]int64{}}
}

// hexKey returns identity's 16 bytes when it is 32 lowercase hex digits,
// as identityArg stores it.
func hexKey(identity string) (k [16]byte, ok bool) {
	if len(identity) != 32 {
		return k, false
	}
	if _, err := hex.Decode(k[:], []byte(identity)); err != nil {
		return k, false
	}
	for i := range len(identity) {
		if c := identity[i]; c >= 'A' && c <= 'F' {
			return k, false // stored as text, as identityArg does
		}
	}
	return k, true
}

// get returns the rowid of the pending watch with identity.
func (x *identities) get(identity string) (int64, bool) {
	if k, ok := hexKey(identity); ok {
		r, ok := x.hex[k]
		return r, ok
	}
	r, ok := x.text[identity]
	return r, ok
}

// set makes rowid the pending watch of identity, logging the change.
func (x *identities) set(identity string, rowid int64) {
	prev, had := x.get(identity)
	x.log = append(x.log, identityChange{identity, prev, had})
	x.put(identity, rowid, true)
}

// remove forgets identity if it names rowid (the watch that stopped being
// pending), logging the change.
func (x *identities) remove(identity string, rowid int64) {
	if prev, had := x.get(identity); had && prev == rowid {
		x.log = append(x.log, identityChange{identity, prev, true})
		x.put(identity, 0, false)
	}
}

// removeStored is remove for an identity as the row holds it (a 16-byte
// BLOB, or TEXT): it spares hex-encoding the bytes to decode them again.
func (x *identities) removeStored(stored any, rowid int64) {
	if b, ok := stored.([]byte); ok && len(b) == 16 {
		k := [16]byte(b)
		if prev, had := x.hex[k]; had && prev == rowid {
			x.log = append(x.log, identityChange{hex.EncodeToString(b), prev, true})
			delete(x.hex, k)
		}
		return
	}
	x.remove(identityString(stored), rowid)
}

func (x *identities) put(identity string, rowid int64, present bool) {
	k, isHex := hexKey(identity)
	switch {
	case isHex && present:
		x.hex[k] = rowid
	case isHex:
		delete(x.hex, k)
	case present:
		x.text[identity] = rowid
	default:
		delete(x.text, identity)
	}
}

// mark returns the point undoTo rolls back to. Like undoTo and
// committed, it takes identities not read yet (nil): nothing to undo.
func (x *identities) mark() int {
	if x == nil {
		return 0
	}
	return len(x.log)
}

// undoTo undoes the changes logged since mark, newest first.
func (x *identities) undoTo(mark int) {
	if x == nil {
		return
	}
	for i := len(x.log) - 1; i >= mark; i-- {
		c := x.log[i]
		x.put(c.identity, c.rowid, c.had)
	}
	x.log = x.log[:mark]
}

// committed forgets the log: its changes are in the database.
func (x *identities) committed() {
	if x == nil {
		return
	}
	clear(x.log)
	x.log = x.log[:0]
}

// len returns how many pending identities it holds.
func (x *identities) len() int { return len(x.hex) + len(x.text) }

// addRaw adds a pending row's identity while the identities are read from
// the rows: as read into sql.RawBytes, with whether it is a BLOB
// (identityColumns). A 16-byte BLOB is vigil.Identity's (identityArg);
// any other value is read as identityString reads it. Two pending watches
// of one identity (rows written by hand: until schema 16 a unique index
// forbade it) leave the older its identity.
func (x *identities) addRaw(rowid int64, raw []byte, blob bool) {
	if blob && len(raw) == 16 {
		x.addKey([16]byte(raw), rowid)
		return
	}
	x.addText(identityText(raw, blob), rowid)
}

// addKey is addRaw for a 16-byte BLOB.
func (x *identities) addKey(k [16]byte, rowid int64) {
	if prev, dup := x.hex[k]; !dup || rowid < prev {
		x.hex[k] = rowid
	}
}

// addText is addRaw for any other identity, as identityText reads it.
func (x *identities) addText(id string, rowid int64) {
	if prev, dup := x.get(id); !dup || rowid < prev {
		x.put(id, rowid, true)
	}
}

// identityText reads an identity that is not a 16-byte BLOB as identityString
// does.
func identityText(raw []byte, blob bool) string {
	if blob {
		return identityString(raw)
	}
	return string(raw)
}

// identityFill fills identities on a goroutine of its own from rows read
// on another: the daemon's priming read (WatchListPending) hands it each
// pending row's identity, a chunk at a time, so that the map, a write at a
// random place of it for each row, fills on the second processor while
// the read goes on.
type identityFill struct {
	chunk []rawIdentity
	full  chan []rawIdentity // chunks to add, closed by finish or stop
	free  chan []rawIdentity // chunks added, to fill again
	done  chan struct{}      // closed once every chunk is added
	x     *identities        // valid once done is closed
	ended bool
}

// rawIdentity is one row's identity as identityFill carries it: the 16
// bytes of a BLOB (key), or any other as identityText reads it.
type rawIdentity struct {
	rowid int64
	key   [16]byte
	isKey bool
	text  string
}

// identityFillChunks and identityFillChunk size what identityFill has in
// flight: a few chunks, whatever the number of rows.
const (
	identityFillChunks = 4
	identityFillChunk  = 4096
)

// newIdentityFill starts filling identities sized for n.
func newIdentityFill(n int64) *identityFill {
	f := &identityFill{
		full: make(chan []rawIdentity, identityFillChunks),
		free: make(chan []rawIdentity, identityFillChunks),
		done: make(chan struct{}),
	}
	for range identityFillChunks - 1 {
		f.free <- make([]rawIdentity, 0, identityFillChunk)
	}
	f.chunk = make([]rawIdentity, 0, identityFillChunk)
	go func() {
		defer close(f.done)
		x := newIdentities(n)
		for c := range f.full {
			for i := range c {
				if r := &c[i]; r.isKey {
					x.addKey(r.key, r.rowid)
				} else {
					x.addText(r.text, r.rowid)
				}
			}
			clear(c)
			f.free <- c[:0]
		}
		f.x = x
	}()
	return f
}

// add hands over a row's identity as addRaw takes it.
func (f *identityFill) add(rowid int64, raw []byte, blob bool) {
	r := rawIdentity{rowid: rowid}
	if blob && len(raw) == 16 {
		r.key, r.isKey = [16]byte(raw), true
	} else {
		r.text = identityText(raw, blob)
	}
	f.chunk = append(f.chunk, r)
	if len(f.chunk) == cap(f.chunk) {
		f.full <- f.chunk
		f.chunk = <-f.free
	}
}

// finish waits until every identity handed over is added, and returns
// them.
func (f *identityFill) finish() *identities {
	if len(f.chunk) > 0 {
		f.full <- f.chunk
	}
	f.stop()
	return f.x
}

// stop ends the filling (a read that failed drops what it filled) and
// waits for its goroutine. It may be called after finish.
func (f *identityFill) stop() {
	if f.ended {
		return
	}
	f.ended = true
	close(f.full)
	<-f.done
}

// readIdentities reads the identity of every pending watch, in one walk
// of the table, sized for pending.
func readIdentities(ctx context.Context, conn *sql.Conn) (*identities, error) {
	var pending, rowids, bound int64
	if err := conn.QueryRowContext(ctx, pendingCountSQL).Scan(&pending, &rowids, &bound); err != nil {
		return nil, fmt.Errorf("sqlite: read the identities of pending watches: %w", err)
	}
	x := newIdentities(pendingSize(pending, rowids, bound))
	rows, err := conn.QueryContext(ctx, `SELECT `+identityColumns+` FROM watches NOT INDEXED WHERE state = 'pending'`)
	if err != nil {
		return nil, fmt.Errorf("sqlite: read the identities of pending watches: %w", err)
	}
	defer rows.Close()
	var (
		rowid int64
		raw   sql.RawBytes
		blob  bool
	)
	for rows.Next() {
		if err := rows.Scan(&rowid, &raw, &blob); err != nil {
			return nil, fmt.Errorf("sqlite: read the identities of pending watches: %w", err)
		}
		x.addRaw(rowid, raw, blob)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlite: read the identities of pending watches: %w", err)
	}
	return x, nil
}
