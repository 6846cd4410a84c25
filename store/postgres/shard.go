package postgres

import (
	"context"
	"crypto/md5"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/vigil-run/vigil"
)

// Shards is the number of shards of a database made by this build: fixed
// by schema 2 and recorded in its meta table.
const Shards = 64

// ShardOf is the shard of the watch with id: the first two bytes of the
// MD5 of its id, mod Shards. The database computes the same for every row
// (the watches.shard column), so a writer never supplies it.
func ShardOf(id string) int {
	h := md5.Sum([]byte(id))
	return (int(h[0])<<8 | int(h[1])) % Shards
}

// Lease is one shard held by a replica at an epoch.
type Lease struct {
	Shard int
	Epoch int64
}

// fence is what the store's fenced writes are conditioned on: the replica
// and the epoch of each shard it holds (0: not held).
type fence struct {
	owner  string
	epochs [Shards]int64
}

// fenceRef holds the store's fence; nil until SetFence, and then every
// settling write, standing-watch observation and receipt is fenced.
type fenceRef = atomic.Pointer[fence]

// ErrFenced is the error of a receipt write for a watch whose shard this
// replica does not hold (any more): what it was about to do is another
// replica's now.
var ErrFenced = &vigil.Error{Code: vigil.CodeUnavailable,
	Message: "this replica no longer holds the shard of this watch: another replica delivers it"}

// SetFence makes the store fence its writes on the leases of owner (a
// replica id): from now on WatchSettle and WatchObserve write only watches
// whose shard owner holds at the epoch given in held, with its lease not
// lapsed by the database's clock, and report the others not won; a
// receipt of any other watch is refused with ErrFenced; WatchListPending
// lists the held shards' watches only. The lease manager calls it with
// every change, before it primes a shard it gained and before it lets go
// of one it lost. The check is made in the database, under a share lock of
// the lease rows, so a lease that lapses while the write is under way
// cannot be taken over before it commits.
func (s *Store) SetFence(owner string, held []Lease) {
	f := &fence{owner: owner}
	for _, l := range held {
		if l.Shard >= 0 && l.Shard < Shards {
			f.epochs[l.Shard] = l.Epoch
		}
	}
	s.fence.Store(f)
}

// Holds reports whether the store's fence holds the shard of the watch id:
// true when there is no fence (one daemon).
func (s *Store) Holds(id string) bool {
	f := s.fence.Load()
	return f == nil || f.epochs[ShardOf(id)] > 0
}

// HoldsShard reports whether the store's fence holds shard (true with no
// fence).
func (s *Store) HoldsShard(shard int) bool {
	f := s.fence.Load()
	return f == nil || (shard >= 0 && shard < Shards && f.epochs[shard] > 0)
}

// heldShards returns the shards the fence holds, or nil and false when
// there is no fence.
func (s *Store) heldShards() ([]int16, bool) {
	f := s.fence.Load()
	if f == nil {
		return nil, false
	}
	out := []int16{}
	for sh, e := range f.epochs {
		if e > 0 {
			out = append(out, int16(sh))
		}
	}
	return out, true
}

// fenceIDs returns the ids whose shards this replica still holds: it locks
// their lease rows (FOR SHARE, in shard order, so a takeover of the shard
// waits for tx to end) and keeps those whose owner and epoch are the
// fence's and whose lease has not lapsed by the database's clock. Without a
// fence every id passes.
func (s *Store) fenceIDs(ctx context.Context, tx pgx.Tx, ids []string) ([]string, error) {
	return s.fenceIDsBut(ctx, tx, ids, nil)
}

// fenceIDsBut is fenceIDs, but the ids of unkept that it does not keep
// are not recorded refused (Refused): writes not fenced on them (a
// completion, WatchSettle), which only ask whether this replica holds
// their shards.
func (s *Store) fenceIDsBut(ctx context.Context, tx pgx.Tx, ids []string, unkept map[string]bool) ([]string, error) {
	f := s.fence.Load()
	if f == nil {
		return ids, nil
	}
	var shards []int16
	seen := map[int]bool{}
	for _, id := range ids {
		sh := ShardOf(id)
		if f.epochs[sh] > 0 && !seen[sh] {
			seen[sh] = true
			shards = append(shards, int16(sh))
		}
	}
	if len(shards) == 0 {
		return nil, nil
	}
	valid, err := s.fenceShards(ctx, tx, f, shards)
	if err != nil {
		return nil, err
	}
	ok := map[int]bool{}
	for _, sh := range valid {
		ok[int(sh)] = true
	}
	out := make([]string, 0, len(ids))
	var refused []string
	for _, id := range ids {
		switch sh := ShardOf(id); {
		case ok[sh]:
			out = append(out, id)
		case f.epochs[sh] > 0 && !unkept[id]:
			refused = append(refused, id)
		}
	}
	s.refused.add(refused)
	return out, nil
}

// refusedSet is the set of watches a fenced write refused although the
// replica's fence held their shard: the database said its lease had lapsed
// or the shard had moved. The engine drops such a watch from its schedule
// as it drops one settled elsewhere; if the replica's next heartbeat keeps
// the shard after all (a renewal that committed just as the lease lapsed,
// unseen by the write), nobody else arms the watch, so the daemon reads
// these back after each lease step (Refused) and arms the pending ones of
// the shards it still holds. Its size is bounded by the watches the
// replica had scheduled: each id enters once until drained.
type refusedSet struct {
	mu  sync.Mutex
	ids map[string]struct{}
}

func (r *refusedSet) add(ids []string) {
	if len(ids) == 0 {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.ids == nil {
		r.ids = make(map[string]struct{}, len(ids))
	}
	for _, id := range ids {
		r.ids[id] = struct{}{}
	}
}

// Refused returns, and forgets, the watches fenced writes refused since
// the last call although this replica's fence held their shards (see
// refusedSet): the caller arms again those still pending in the shards it
// still holds.
func (s *Store) Refused() []string {
	s.refused.mu.Lock()
	defer s.refused.mu.Unlock()
	out := make([]string, 0, len(s.refused.ids))
	for id := range s.refused.ids {
		out = append(out, id)
	}
	s.refused.ids = nil
	return out
}

// fenceShards returns the shards, among those asked for, that f's owner
// holds at f's epochs on a lease that has not lapsed, and locks their
// lease rows FOR SHARE (in shard order) until tx ends. One statement: the
// holder and epoch are the shard's leases row, the lease is the owner's
// one row in replicas (lease_until, by the database's clock); the
// renewal rewrites only that row, so it never waits for this lock, and a
// takeover, which rewrites the leases row, skips it or waits for tx.
func (s *Store) fenceShards(ctx context.Context, tx pgx.Tx, f *fence, shards []int16) ([]int16, error) {
	epochs := make([]int64, len(shards))
	for i, sh := range shards {
		epochs[i] = f.epochs[sh]
	}
	rows, err := tx.Query(ctx, fenceSQL, shards, epochs, f.owner)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowTo[int16])
}

// fenceSQL is the fence: $1 the shards, $2 their epochs, $3 the owner.
//
// The owner's lease holds while its lease_until has not passed or, for
// a replica whose lease is its session (schema 13), while that session
// holds its lock: the write asks for the lock shared, which it gets only
// when no session holds it (and then keeps until it ends, so a new
// session of the owner waits for it).
const fenceSQL = `SELECT l.shard FROM leases AS l
	JOIN unnest($1::smallint[], $2::bigint[]) AS f(shard, epoch) ON l.shard = f.shard AND l.epoch = f.epoch
	WHERE l.owner = $3 AND EXISTS (SELECT FROM replicas AS r WHERE r.id = $3
		AND (r.lease_until > clock_timestamp() OR (r.lock_key IS NOT NULL AND NOT pg_try_advisory_xact_lock_shared(r.lock_key))))
	ORDER BY l.shard FOR SHARE OF l`

// readShards reads the shard count recorded at the database's creation
// and refuses one this build does not know.
func (s *Store) readShards(ctx context.Context) error {
	var n int64
	if err := s.pool.QueryRow(ctx, `SELECT value FROM meta WHERE key = 'shards'`).Scan(&n); err != nil {
		return wrap("read the shard count", err)
	}
	if n != Shards {
		return fmt.Errorf("postgres: schema %s has %d shards and this build knows %d", s.schema, n, Shards)
	}
	return nil
}

// HeartbeatParams is what a replica's heartbeat says and asks.
type HeartbeatParams struct {
	// Replica is the replica's id.
	Replica string
	// Live is how recently a replica must have beaten to count as live.
	Live time.Duration
	// Held are the leases the replica holds (its manager's view).
	Held []Lease
	// Lease is how long the replica's lease lasts from now once renewed.
	Lease time.Duration
	// PendingSince, when not zero, makes the heartbeat also read the ids
	// of the pending watches of the shards renewed inserted after it (by
	// the database's clock): the repair scan (Peers.Pending).
	PendingSince time.Time
	// PendingLimit bounds the ids the repair scan reads of each shard,
	// the oldest first (Peers.PendingMore); zero means
	// DefaultPendingLimit.
	PendingLimit int
	// Quick lets a heartbeat on the replica's lease session answer with a
	// read-only statement a fraction of the full one's cost when nothing
	// it reads has changed since the last full heartbeat on that session
	// (the replicas and which of their sessions live, the leases, the
	// signing keys' records) and that one found the database steady: every
	// shard held by a replica whose session lives, no replica of an older
	// build, nothing left to do (Peers.steady). Its answer is that
	// heartbeat's again (the leases it renewed, the replicas it saw, at
	// the database's clock now) without a repair scan: Peers.Quick says
	// so, and PendingSince is not read. The session living is the renewal,
	// so a quick heartbeat renews as a full one does. Otherwise, and with
	// leases renewed as rows, the heartbeat is a full one.
	Quick bool
}

// DefaultPendingLimit is how many ids a heartbeat's repair scan reads of
// one shard at most: a burst of registrations (batches of a thousand on
// every replica) is read over several heartbeats, never in one that
// would grow with it and could keep the lease it renews from committing
// in time.
const DefaultPendingLimit = 2000

// Heartbeat records that the replica is alive and renews its lease, if it
// had not lapsed, in one statement: with SessionLeases it runs on the
// replica's lease session (opened first when it has none: see
// onSession), whose life is the lease, and writes nothing in the steady
// state; otherwise it renews the replica's row (now plus Lease, by the
// database's clock), the one row it writes. A replica holds all its
// shards on that one lease, and a shard's row (holder and epoch) changes
// only when the shard changes hands. Held that the replica still holds at
// their epoch are renewed (Peers.Renewed); a lease that had lapsed renews
// none of them, and every shard the database says the replica holds and
// that is not renewed (a lapse, or a holding the manager does not know
// of, such as a restart under the same id) is freed, lapsed now. It also
// forgets replicas not seen for a long time, and returns the replicas seen
// within Live (sorted), how many shards each of them holds on a lease
// that has not lapsed, how many are free (lapsed or released: none means
// there is nothing to acquire), how long until the first lease held by a
// replica not among them lapses (zero when none is held; the caller's
// next step is due then, to take it over at once), the database's clock,
// the repair scan's ids (HeartbeatParams.PendingSince), and whether the
// replica had stopped counting as live for the signing keys' check
// (Peers.Unchecked: a lapse). It runs every
// few seconds on every replica, and is most of what an idle replica costs
// the database: when it writes, it commits without waiting for the WAL
// flush (see heartbeatSQL for why that is safe), and on a lease session
// most are quick ones (HeartbeatParams.Quick), a read of a fingerprint
// (quickSQL) about a seventh of the full statement's CPU (on an idle
// server, waking the backend for it costs about as much again).
func (s *Store) Heartbeat(ctx context.Context, hp HeartbeatParams) (Peers, error) {
	var (
		p   Peers
		err error
	)
	if s.sessionLeases {
		err = s.onSession(ctx, hp.Replica, hp.Lease, func(se *session) error {
			if hp.Quick && !se.fresh && se.last.answers(hp) {
				var same bool
				var now time.Time
				if err := se.conn.QueryRow(ctx, quickSQL, se.last.fp).Scan(&same, &now); err != nil {
					return err
				}
				if same {
					p = se.last.peers(now)
					return nil
				}
			}
			se.last = nil
			key := se.key
			var st steadiness
			p, st, err = s.heartbeat(ctx, se.conn, hp, &key, se.fresh)
			if err == nil && st.steady && p.steady() {
				// A copy of its own, without the scan's ids: the caller
				// keeps p.
				kept := p
				kept.Live, kept.Held, kept.Renewed, kept.Pending = slices.Clone(p.Live), maps.Clone(p.Held), slices.Clone(p.Renewed), nil
				se.last = &quickState{fp: st.fp, found: kept, lease: hp.Lease, live: hp.Live}
			}
			return err
		})
	} else {
		p, _, err = s.heartbeat(ctx, s.leasePool, hp, nil, false)
	}
	if errors.Is(err, ErrReplicaTaken) {
		return Peers{}, err
	}
	if err != nil {
		return Peers{}, wrap("heartbeat", err)
	}
	return p, nil
}

// steadiness is what a heartbeat says of the next: whether the database
// was steady (steadySQL) and its fingerprint then (fingerprintSQL).
type steadiness struct {
	steady bool
	fp     string
}

// heartbeat runs heartbeatSQL on db, with the key of the replica's lease
// lock (nil: its lease is its row) and whether this is the first
// heartbeat on its session.
func (s *Store) heartbeat(ctx context.Context, db interface {
	QueryRow(context.Context, string, ...any) pgx.Row
}, hp HeartbeatParams, key *int64, fresh bool) (Peers, steadiness, error) {
	p := Peers{Held: map[string]int{}}
	shards, epochs := leaseArrays(hp.Held)
	var since *time.Time
	if !hp.PendingSince.IsZero() {
		since = &hp.PendingSince
	}
	limit := hp.PendingLimit
	if limit <= 0 {
		limit = DefaultPendingLimit
	}
	var (
		owners    []string
		counts    []int32
		next      *float64
		rs        []int16
		re        []int64
		recovered int64
		told      int64
		horizon   *time.Time
		more      *time.Time
		st        steadiness
	)
	err := db.QueryRow(ctx, heartbeatSQL, hp.Replica, shards, epochs, hp.Lease, hp.Live,
		s.Channel(), rebalancePayload, since, limit, key, fresh).Scan(&p.Joined, &p.Live, &owners, &counts, &p.Free, &next, &rs, &re, &p.Now, &p.Pending, &more, &recovered, &told, &p.Unchecked, &horizon, &st.steady, &st.fp)
	if err != nil {
		return Peers{}, steadiness{}, err
	}
	for i, o := range owners {
		p.Held[o] = int(counts[i])
	}
	if next != nil {
		p.NextLapse = seconds(*next)
	}
	p.Renewed = make([]Lease, len(rs))
	for i := range rs {
		p.Renewed[i] = Lease{Shard: int(rs[i]), Epoch: re[i]}
	}
	p.Freed = int(recovered)
	if more != nil {
		// Rows stamped at the same instant as the last one read may be
		// among those cut: the next scan reads from just before it.
		p.PendingMore = more.Add(-time.Microsecond)
	}
	var h time.Time
	switch {
	case horizon == nil:
	case horizon.After(p.Now):
		h = p.Now
	default:
		h = *horizon
	}
	p.Horizon = s.horizons.next(hp.Replica, h)
	return p, st, nil
}

// steady reports whether p, a heartbeat's finding, leaves nothing for the
// next step to do or to look at again: nothing free, freed or lapsing,
// the replica not new nor unchecked, the repair scan not cut short.
func (p Peers) steady() bool {
	return p.Free == 0 && p.Freed == 0 && p.NextLapse == 0 && !p.Joined && !p.Unchecked && p.PendingMore.IsZero()
}

// quickState is what a quick heartbeat answers from (HeartbeatParams.Quick):
// the last full heartbeat on the session, when it found the database
// steady, and the fingerprint of what it read.
type quickState struct {
	fp          string
	found       Peers
	lease, live time.Duration
}

// answers reports whether q, when the database has not changed since,
// answers hp: the same lease, live window and leases held (those q renewed).
func (q *quickState) answers(hp HeartbeatParams) bool {
	return q != nil && hp.Lease == q.lease && hp.Live == q.live && slices.Equal(hp.Held, q.found.Renewed)
}

// peers is q's finding again, at the database's clock now, as a quick
// heartbeat's: no repair scan, no horizon reading.
func (q *quickState) peers(now time.Time) Peers {
	p := q.found
	p.Live = slices.Clone(p.Live)
	p.Held = maps.Clone(p.Held)
	p.Renewed = slices.Clone(p.Renewed)
	p.Pending, p.Horizon, p.Now, p.Quick = nil, time.Time{}, now, true
	return p
}

// horizons holds each replica's last horizon reading (Peers.Horizon).
type horizons struct {
	mu   sync.Mutex
	last map[string]time.Time
}

// next records replica's reading h (the zero time: unknown) and returns
// Peers.Horizon: the earlier of h and the previous reading, the zero time
// when either is unknown or there was none.
func (hs *horizons) next(replica string, h time.Time) time.Time {
	hs.mu.Lock()
	defer hs.mu.Unlock()
	prev, ok := hs.last[replica]
	if hs.last == nil {
		hs.last = map[string]time.Time{}
	}
	hs.last[replica] = h
	if !ok || prev.IsZero() || h.IsZero() {
		return time.Time{}
	}
	if h.Before(prev) {
		return h
	}
	return prev
}

// rebalancePayload is the NOTIFY payload of a rebalance event (a first
// heartbeat's).
const rebalancePayload = `{"k":"` + EventRebalance + `"}`

// Peers is what Heartbeat found.
type Peers struct {
	// Live are the replicas seen within the live window, this one
	// included, sorted.
	Live []string
	// Held counts the shards each replica holds on leases not lapsed.
	Held map[string]int
	// NextLapse is how long until the first lease of a replica not live
	// lapses; zero when there is none.
	NextLapse time.Duration
	// Renewed are the leases of Held that were renewed, in shard order.
	Renewed []Lease
	// Free counts the shards whose lease lapsed or was released: with
	// none, there is nothing to acquire.
	Free int
	// Freed counts the shards the database said this replica held and
	// that the heartbeat freed (not renewed).
	Freed int
	// Joined is true on the replica's first heartbeat.
	Joined bool
	// Unchecked is true when, just before this heartbeat, the replica
	// did not count among the live replicas whose signing keys a
	// replica starting compares its own with (RecordKeys): its lease
	// had lapsed (it was frozen, or cut off from the database, past
	// it), its start window ended before its first heartbeat, or it
	// recorded no fingerprints. A replica that started meanwhile did not
	// compare its keys with this one's, so this one must compare its own
	// with the live replicas' again before it takes a shard.
	Unchecked bool
	// Now is the database's clock as the heartbeat ran.
	Now time.Time
	// Horizon is where the next repair scan must start for it to see
	// every row the heartbeat's snapshot did not (a registration's row is
	// stamped when it is inserted but seen only once its transaction
	// commits): the earlier of two readings, this heartbeat's and the
	// replica's previous one on this store, each the start of the oldest
	// transaction of this database that had written as the reading was
	// taken, or its heartbeat's clock when there was none. This
	// heartbeat's reading alone would miss a transaction that ended
	// between its snapshot and its reading; the previous reading saw that
	// one (or it wrote first after that reading). It is the zero time, and
	// the caller falls back to a fixed margin, on the replica's first
	// heartbeat on this store and when a session of the database cannot be
	// seen (another role's, without pg_read_all_stats).
	Horizon time.Time
	// Pending are the ids of the pending watches of the shards renewed
	// inserted after HeartbeatParams.PendingSince (none when it is zero),
	// at most HeartbeatParams.PendingLimit of each shard, the oldest.
	Pending []string
	// PendingMore, when not zero, says a shard had more such rows than
	// the scan read: the next scan must start no later than it to read
	// the rest (it is just before the newest row read of the shard cut
	// first).
	PendingMore time.Time
	// Quick is set on a quick heartbeat's answer (HeartbeatParams.Quick):
	// it read nothing new, made no repair scan (Pending is empty and
	// PendingSince was not read, so the next scan starts where the last
	// one would have gone on) and no horizon reading (Horizon is zero).
	Quick bool
}

// heartbeatSQL is the heartbeat: $1 the replica, $2 and $3 the shards and
// epochs it holds, $4 the lease, $5 the live window, $6 and $7 the
// channel and payload of the rebalance event, $8 the repair scan's instant
// (NULL: no scan), $9 how many rows it reads of each shard at most, $10
// the key of the replica's lease lock (NULL: its lease is its row) and
// $11 whether this is the first heartbeat on its lease session.
//
// A replica's first beat tells the others (a rebalance event), and so
// does a beat that frees shards (its lease had lapsed, or the replica
// restarted under the same id and holds none of what its row still held),
// so that the others take them at once rather than at their next step.
//
// Every CTE sees the same snapshot, from before the statement's own
// writes: prev is the replica's lease before this renewal, and checked
// whether it counted as live for the signing keys' check before it
// (Peers.Unchecked; one primary key lookup in each of replica_keys and
// replicas); with a lease session, the lease held before is the session's
// (not its first heartbeat) or the row's. In the steady state the
// statement writes one row (me) with a lease renewed as a row, and none
// with a lease session: me writes then only on the session's first
// heartbeat, after the replica recorded its signing keys (so that its
// row's seen_at follows the recording, see keysWindow), when its row is
// missing, and while a row of a replica of an older build (lock_key NULL,
// which reads lease_until) is there, when it renews lease_until as before
// (otherwise it sets it to now: the session is the lease). freed, lapsed
// and compat write only when a shard changes hands or a replica of an
// older build still (its lease_until NULL) is live, whose fence and
// acquisitions read lease_expiry, so the shards of this one must be
// renewed there too; lost stamps once the instant a session was seen
// gone.
//
// A shard's lease lapses as untilSQL says: never while its holder's
// session holds its lock, else at its holder's lease_until (or lost_at),
// or at its lease_expiry row when its holder has none (an older build, or
// gone) or nobody holds it. The repair scan reads each renewed shard's pending
// rows inserted after $8 through watches_shard_pending (shard,
// inserted_at), one index range per shard, whatever the plan's
// parameters, the oldest $9 of each (and says where it cut). The last column is this heartbeat's horizon reading
// (horizonSQL, and Peers.Horizon).
//
// When it writes, it commits without waiting for the WAL flush
// (synchronous_commit off, for this transaction only): a crash of the
// server may forget the last renewals, which only shortens leases (a replica whose renewal was
// forgotten finds its writes fenced, and its shards lost, as after any
// lapse), and whatever commits durably afterwards (a settlement that read
// a renewal through the fence) flushes the WAL that holds it first.
var heartbeatSQL = `WITH ` + locksSQL + `,
	prev AS (
		SELECT coalesce(bool_or(lease_until > now() OR ($10::bigint IS NOT NULL AND NOT $11 AND lock_key = $10)), false) AS valid
		FROM replicas WHERE id = $1),
	checked AS (
		SELECT EXISTS (SELECT FROM replica_keys AS k LEFT JOIN replicas AS r ON r.id = k.replica
			CROSS JOIN LATERAL (` + keysWindow(`$10::bigint IS NOT NULL AND NOT $11`, `$4::interval`) + `) AS v
			WHERE k.replica = $1 AND v.until > now()) AS live),
	older AS (SELECT EXISTS (SELECT FROM replicas WHERE lock_key IS NULL AND id <> $1) AS found),
	me AS (
		INSERT INTO replicas (id, seen_at, started_at, lease_until, lock_key)
		SELECT $1, now(), now(), CASE WHEN $10::bigint IS NULL OR (SELECT found FROM older) THEN now() + $4::interval ELSE now() END, $10
		FROM (SELECT set_config('synchronous_commit', 'off', true)) AS relaxed
		WHERE $10::bigint IS NULL OR $11 OR (SELECT found FROM older)
			OR NOT EXISTS (SELECT FROM replicas AS r WHERE r.id = $1 AND r.lock_key = $10
				AND NOT EXISTS (SELECT FROM replica_keys AS k WHERE k.replica = $1 AND k.recorded_at > r.seen_at))
		ON CONFLICT (id) DO UPDATE SET seen_at = now(), lease_until = EXCLUDED.lease_until, lock_key = EXCLUDED.lock_key, lost_at = NULL
		RETURNING xmax = 0 AS joined),
	renewed AS (
		SELECT l.shard, l.epoch FROM leases AS l
			JOIN unnest($2::smallint[], $3::bigint[]) AS f(shard, epoch) ON l.shard = f.shard AND l.epoch = f.epoch
		WHERE l.owner = $1 AND (SELECT valid FROM prev)),
	freed AS (
		UPDATE leases AS l SET owner = NULL
		WHERE l.owner = $1 AND NOT EXISTS (SELECT FROM renewed WHERE renewed.shard = l.shard)
		RETURNING l.shard),
	lapsed AS (
		UPDATE lease_expiry AS x SET expires_at = now() FROM freed WHERE x.shard = freed.shard),
	told AS (SELECT pg_notify($6, $7) WHERE (SELECT coalesce(bool_or(joined), false) FROM me) OR EXISTS (SELECT FROM freed)),
	compat AS (
		UPDATE lease_expiry AS x SET expires_at = now() + $4::interval FROM renewed
		WHERE x.shard = renewed.shard
			AND EXISTS (SELECT FROM replicas WHERE lease_until IS NULL AND seen_at > now() - $5::interval)),
	lost AS (
		UPDATE replicas SET lost_at = now()
		WHERE lock_key IS NOT NULL AND lost_at IS NULL AND id <> $1 AND NOT lock_key IN (SELECT key FROM locks)
			AND seen_at >= now() - $5::interval * 100),
	gone AS (
		DELETE FROM replicas WHERE seen_at < now() - $5::interval * 100 AND id <> $1
			AND NOT coalesce(lock_key IN (SELECT key FROM locks), false)),
	live AS (SELECT id FROM replicas WHERE (lock_key IS NULL AND seen_at > now() - $5::interval) OR lock_key IN (SELECT key FROM locks) UNION SELECT $1),
	holding AS (
		SELECT l.owner, u.until,
			CASE WHEN l.owner = $1 THEN EXISTS (SELECT FROM renewed WHERE renewed.shard = l.shard)
				ELSE u.until > now() END AS held
		FROM leases AS l JOIN lease_expiry AS x ON x.shard = l.shard LEFT JOIN replicas AS r ON r.id = l.owner
			CROSS JOIN LATERAL (SELECT ` + untilSQL(`$4::interval`) + ` AS until) AS u),
	owners AS (
		SELECT owner, count(*) AS held FROM holding WHERE held AND owner IS NOT NULL GROUP BY owner),
	pending AS (
		SELECT renewed.shard, w.id, w.inserted_at FROM renewed CROSS JOIN LATERAL (
			SELECT id, inserted_at FROM watches WHERE watches.shard = renewed.shard AND state = 'pending' AND inserted_at > $8::timestamptz
			ORDER BY inserted_at LIMIT $9) AS w)
	SELECT (SELECT coalesce(bool_or(joined), false) FROM me),
		(SELECT coalesce(array_agg(id ORDER BY id), '{}') FROM live),
		(SELECT coalesce(array_agg(owner ORDER BY owner), '{}') FROM owners),
		(SELECT coalesce(array_agg(held::int ORDER BY owner), '{}') FROM owners),
		(SELECT count(*)::int FROM holding WHERE NOT held),
		(SELECT extract(epoch FROM min(until)) - extract(epoch FROM now()) FROM holding
			WHERE held AND owner IS NOT NULL AND owner NOT IN (SELECT id FROM live)),
		(SELECT coalesce(array_agg(shard ORDER BY shard), '{}') FROM renewed),
		(SELECT coalesce(array_agg(epoch ORDER BY shard), '{}') FROM renewed),
		now(),
		(SELECT coalesce(array_agg(id), '{}') FROM pending),
		(SELECT min(last) FROM (SELECT max(inserted_at) AS last FROM pending GROUP BY shard HAVING count(*) >= $9) AS cut),
		(SELECT count(*) FROM freed),
		(SELECT count(*) FROM told),
		(SELECT NOT live FROM checked),
		` + horizonSQL + `,
		` + steadySQL + `,
		` + fingerprintSQL

// steadySQL, in heartbeatSQL, is whether the database is steady for the
// next heartbeat on the same lease session to be a quick one
// (HeartbeatParams.Quick): its answer is then a function of what
// fingerprintSQL reads and of nothing else, the clock included. The
// replica's lease is its session, which it held before this heartbeat
// (not its first on it), it counts as live for the signing keys' check,
// no replica of an older build has a row (its lease would lapse with
// time, and its row is renewed at every heartbeat), and every shard is
// held by a replica whose session holds its lock (so no lease lapses with
// time: a shard whose holder's session ends changes what fingerprintSQL
// reads).
const steadySQL = `($10::bigint IS NOT NULL AND NOT $11 AND (SELECT valid FROM prev) AND (SELECT live FROM checked)
			AND NOT EXISTS (SELECT FROM replicas WHERE lock_key IS NULL)
			AND NOT EXISTS (SELECT FROM leases AS l LEFT JOIN replicas AS r ON r.id = l.owner
				WHERE NOT coalesce(r.lock_key IN (SELECT key FROM locks), false)))`

// fingerprintSQL is a digest of what a heartbeat reads besides the clock,
// its parameters and the repair scan's rows (for statements with
// locksSQL): each replica's row version and whether its session holds its
// lock, each lease's row version and each signing keys' record's. Any
// write to one of those rows gives it a new version (its xmin), and a
// shard's lease_expiry row matters only for a holder of an older build
// or none, which steadySQL excludes.
const fingerprintSQL = `(SELECT md5(concat_ws(';',
		(SELECT string_agg(r.id || ':' || r.xmin::text || ':' || coalesce((r.lock_key IN (SELECT key FROM locks))::text, '-'), ',' ORDER BY r.id) FROM replicas AS r),
		(SELECT string_agg(l.xmin::text, ',' ORDER BY l.shard) FROM leases AS l),
		(SELECT string_agg(k.replica || ':' || k.xmin::text, ',' ORDER BY k.replica) FROM replica_keys AS k))))`

// quickSQL is a quick heartbeat (HeartbeatParams.Quick): $1 the
// fingerprint of the last full heartbeat; whether it is unchanged, and
// the database's clock. It writes nothing and takes no lock.
var quickSQL = `WITH ` + locksSQL + ` SELECT ` + fingerprintSQL + ` = $1, now()`

// horizonSQL is a heartbeat's horizon reading (see Peers.Horizon): the
// start of the oldest transaction of this database that has written (it
// may insert rows the statement's snapshot cannot see, stamped no earlier
// than it began), the statement's clock when there is none; NULL when the
// activity of the server's sessions hides one of this database (another
// role's, or a background worker's: its row then shows neither its state
// nor its backend_type). A transaction that writes first after the
// reading stamps its rows after the statement's clock. It reads
// pg_stat_get_activity, pg_stat_activity without the names joined in.
const horizonSQL = `(SELECT CASE
			WHEN bool_or(a.state IS NULL AND a.backend_type IS NULL AND a.datid = d.oid) THEN NULL
			ELSE least(now(), min(a.xact_start) FILTER (WHERE a.backend_xid IS NOT NULL AND a.datid = d.oid))
			END FROM pg_stat_get_activity(NULL) AS a, (SELECT oid FROM pg_database WHERE datname = current_database()) AS d)`

// Acquire takes up to n shards (n <= 0: none) whose lease lapsed at least
// lapsedFor ago (a shard released has lapsed at its release), skipping
// rows another transaction has locked, for replica, at the next epoch; it
// returns those it took. They are held on the replica's own lease, which
// must not have lapsed (Heartbeat renews it): a replica whose lease lapsed
// takes nothing. Their lease_expiry rows are set to lapse a lease from now,
// for replicas of an older build, which read them.
//
// A shard is taken only at the epoch whose lease was judged lapsed
// (judged, the lease row as the statement's snapshot read it). When
// another replica's Acquire commits the takeover of a row after this
// statement read it and before it locks it, PostgreSQL rechecks the
// locked row at its new version but reuses the other tables' rows as read
// before (the old holder's, the old expiry), so without the epoch the new
// holder's fresh lease would be judged by the old one's and taken again.
func (s *Store) Acquire(ctx context.Context, replica string, n int, lease, lapsedFor time.Duration) ([]Lease, error) {
	if n <= 0 {
		return nil, nil
	}
	rows, err := s.leasePool.Query(ctx, `WITH `+locksSQL+`,
		pick AS (
			SELECT l.shard FROM leases AS l JOIN leases AS judged ON judged.shard = l.shard AND judged.epoch = l.epoch
				JOIN lease_expiry AS x ON x.shard = l.shard LEFT JOIN replicas AS r ON r.id = l.owner
			WHERE `+untilSQL(`$2::interval`)+` <= now() - $3::interval
				AND EXISTS (SELECT FROM replicas WHERE id = $1 AND (lease_until > now() OR lock_key IN (SELECT key FROM locks)))
			ORDER BY l.shard LIMIT $4 FOR UPDATE OF l SKIP LOCKED),
		took AS (UPDATE leases SET owner = $1, epoch = leases.epoch + 1 FROM pick WHERE leases.shard = pick.shard
			RETURNING leases.shard, leases.epoch),
		renewed AS (UPDATE lease_expiry SET expires_at = now() + $2::interval FROM pick WHERE lease_expiry.shard = pick.shard)
		SELECT shard, epoch FROM took`, replica, lease, lapsedFor, n)
	if err != nil {
		return nil, wrap("acquire leases", err)
	}
	return collectLeases(rows, "acquire leases")
}

// Release lets go of the shards of held that replica holds at their epoch
// (owner NULL, lapsed now) and tells the other replicas, so one that
// needs shards takes them at once.
func (s *Store) Release(ctx context.Context, replica string, held []Lease) error {
	if len(held) == 0 {
		return nil
	}
	shards, epochs := leaseArrays(held)
	return wrap("release leases", s.leaseWrite(ctx, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `WITH rel AS (UPDATE leases SET owner = NULL WHERE shard IN (
				SELECT l.shard FROM leases AS l JOIN unnest($1::smallint[], $2::bigint[]) AS f(shard, epoch)
					ON l.shard = f.shard AND l.epoch = f.epoch
				WHERE l.owner = $3 ORDER BY l.shard FOR UPDATE OF l) RETURNING shard)
			UPDATE lease_expiry SET expires_at = now() FROM rel WHERE lease_expiry.shard = rel.shard`, shards, epochs, replica); err != nil {
			return err
		}
		return s.notifyNow(ctx, tx, Event{Kind: EventRebalance})
	}))
}

// Leave releases every shard replica holds and forgets it among the
// replicas, its signing keys' fingerprints too (RecordKeys): a replica
// that stops says so, and the others take its shards at once rather than
// after its leases lapse.
func (s *Store) Leave(ctx context.Context, replica string) error {
	err := s.leaseWrite(ctx, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `WITH rel AS (UPDATE leases SET owner = NULL WHERE shard IN (
				SELECT shard FROM leases WHERE owner = $1 ORDER BY shard FOR UPDATE) RETURNING shard)
			UPDATE lease_expiry SET expires_at = now() FROM rel WHERE lease_expiry.shard = rel.shard`, replica); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `DELETE FROM replicas WHERE id = $1`, replica); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `DELETE FROM replica_keys WHERE replica = $1`, replica); err != nil {
			return err
		}
		return s.notifyNow(ctx, tx, Event{Kind: EventRebalance})
	})
	// Its lease session ends too, its lock with it, whatever the
	// transaction did: a replica that leaves holds nothing.
	s.sessions.end(replica)
	return wrap("leave", err)
}

// ShardLeases returns every shard's lease as the database has it, for
// status pages and tests.
func (s *Store) ShardLeases(ctx context.Context) ([]LeaseRow, error) {
	rows, err := s.leasePool.Query(ctx, `WITH `+locksSQL+`
		SELECT l.shard, coalesce(l.owner, ''), l.epoch, `+untilSQL(`interval '1 second'`)+` > now()
		FROM leases AS l JOIN lease_expiry AS x ON x.shard = l.shard LEFT JOIN replicas AS r ON r.id = l.owner ORDER BY l.shard`)
	if err != nil {
		return nil, wrap("read leases", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (LeaseRow, error) {
		var l LeaseRow
		var sh int16
		err := r.Scan(&sh, &l.Owner, &l.Epoch, &l.Live)
		l.Shard = int(sh)
		return l, err
	})
	return out, wrap("read leases", err)
}

// LeaseRow is one shard's lease.
type LeaseRow struct {
	Shard int
	Owner string
	Epoch int64
	// Live is false once the lease lapsed.
	Live bool
}

func leaseArrays(ls []Lease) ([]int16, []int64) {
	shards := make([]int16, len(ls))
	epochs := make([]int64, len(ls))
	for i, l := range ls {
		shards[i], epochs[i] = int16(l.Shard), l.Epoch
	}
	return shards, epochs
}

func collectLeases(rows pgx.Rows, what string) ([]Lease, error) {
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Lease, error) {
		var sh int16
		var l Lease
		err := r.Scan(&sh, &l.Epoch)
		l.Shard = int(sh)
		return l, err
	})
	if err != nil {
		return nil, wrap(what, err)
	}
	slices.SortFunc(out, func(a, b Lease) int { return a.Shard - b.Shard })
	return out, nil
}

// WatchListPendingShards returns what the scheduler needs to arm the
// pending watches of shards (a replica that gained them).
func (s *Store) WatchListPendingShards(ctx context.Context, shards []int) ([]vigil.ScheduleEntry, error) {
	if len(shards) == 0 {
		return nil, nil
	}
	sh := make([]int16, len(shards))
	for i, v := range shards {
		sh[i] = int16(v)
	}
	return s.listPending(ctx, ` AND shard = ANY($1)`, sh)
}

// NotifyCheck asks the replica that holds the watch id's shard to probe it
// now (an EventCheck).
func (s *Store) NotifyCheck(ctx context.Context, id string) error {
	return wrap("notify", s.notifyNow(ctx, s.pool, Event{Kind: EventCheck, WatchID: id, Shard: ShardOf(id)}))
}

// notifyNow sends ev whatever Options.Notify says (the lease manager's and
// check-now's events are always sent), on db: a transaction (sent if it
// commits) or the pool.
func (s *Store) notifyNow(ctx context.Context, db interface {
	Exec(context.Context, string, ...any) (pgconn.CommandTag, error)
}, ev Event) error {
	p, err := json.Marshal(ev)
	if err != nil {
		return err
	}
	_, err = db.Exec(ctx, `SELECT pg_notify($1, $2)`, s.Channel(), string(p))
	return err
}

// leaseWrite runs fn in one transaction on the lease pool, committed if it
// returns nil.
func (s *Store) leaseWrite(ctx context.Context, fn func(tx pgx.Tx) error) error {
	return pgx.BeginFunc(ctx, s.leasePool, fn)
}
