package postgres

import (
	"context"
	"crypto/md5"
	"encoding/json"
	"fmt"
	"slices"
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
	for _, id := range ids {
		if ok[ShardOf(id)] {
			out = append(out, id)
		}
	}
	return out, nil
}

// fenceShards returns the shards, among those asked for, that f's owner
// holds at f's epochs on a lease that has not lapsed, and locks their
// lease rows FOR SHARE (in shard order) until tx ends.
func (s *Store) fenceShards(ctx context.Context, tx pgx.Tx, f *fence, shards []int16) ([]int16, error) {
	epochs := make([]int64, len(shards))
	for i, sh := range shards {
		epochs[i] = f.epochs[sh]
	}
	rows, err := tx.Query(ctx, `SELECT l.shard FROM leases AS l
		JOIN unnest($1::smallint[], $2::bigint[]) AS f(shard, epoch) ON l.shard = f.shard AND l.epoch = f.epoch
		JOIN lease_expiry AS x ON x.shard = l.shard
		WHERE l.owner = $3 AND x.expires_at > clock_timestamp() ORDER BY l.shard FOR SHARE OF l`, shards, epochs, f.owner)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowTo[int16])
}

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

// Heartbeat records that replica is alive (now, by the database's clock),
// renews the leases of held as Renew does (Peers.Renewed: the others are
// lost), forgets replicas not seen for a long time, and returns the
// replicas seen within live (sorted), how many shards each of them holds on
// a lease that has not lapsed, how many shards are free (lapsed or
// released: none means there is nothing to acquire), and how long until
// the first lease held by a replica not among them lapses (zero when none
// is held): the caller's next step is due then, to take it over at once.
// Its statements go in one round trip, as one transaction: it runs every
// few seconds on every replica, and is most of what an idle replica costs
// the database.
func (s *Store) Heartbeat(ctx context.Context, replica string, live time.Duration, held []Lease, lease time.Duration) (Peers, error) {
	p := Peers{Held: map[string]int{}}
	ev, err := json.Marshal(Event{Kind: EventRebalance})
	if err != nil {
		return p, err
	}
	b := &pgx.Batch{}
	b.Queue(`INSERT INTO replicas (id, seen_at, started_at) VALUES ($1, now(), now())
		ON CONFLICT (id) DO UPDATE SET seen_at = now() RETURNING xmax = 0`, replica).QueryRow(func(r pgx.Row) error {
		return r.Scan(&p.Joined)
	})
	if len(held) > 0 {
		shards, epochs := leaseArrays(held)
		b.Queue(renewSQL, shards, epochs, replica, lease).Query(func(rows pgx.Rows) error {
			var err error
			p.Renewed, err = collectLeases(rows, "renew leases")
			return err
		})
	}
	b.Queue(`DELETE FROM replicas WHERE seen_at < now() - $1::interval * 100`, live)
	b.Queue(`SELECT id FROM replicas WHERE seen_at > now() - $1::interval ORDER BY id`, live).Query(func(rows pgx.Rows) error {
		var err error
		p.Live, err = pgx.CollectRows(rows, pgx.RowTo[string])
		return err
	})
	// Per owner, the shards held on leases not lapsed, and the free ones
	// (owner ''); the first lapse of a lease held by a replica not live.
	b.Queue(`SELECT coalesce(l.owner, ''), count(*) FILTER (WHERE x.expires_at > now()), count(*) FILTER (WHERE x.expires_at <= now()),
			extract(epoch FROM min(x.expires_at) FILTER (WHERE x.expires_at > now() AND l.owner IS NOT NULL
				AND l.owner NOT IN (SELECT id FROM replicas WHERE seen_at > now() - $1::interval))) - extract(epoch FROM now())
		FROM leases AS l JOIN lease_expiry AS x ON x.shard = l.shard GROUP BY 1`, live).Query(func(rows pgx.Rows) error {
		for rows.Next() {
			var o string
			var held, lapsed int
			var next *float64
			if err := rows.Scan(&o, &held, &lapsed, &next); err != nil {
				return err
			}
			p.Free += lapsed
			if o != "" && held > 0 {
				p.Held[o] = held
			}
			if next != nil {
				if d := time.Duration(*next * float64(time.Second)); p.NextLapse == 0 || d < p.NextLapse {
					p.NextLapse = d
				}
			}
		}
		return rows.Err()
	})
	// The first heartbeat (the row was just inserted: started now) tells
	// the others, which release their surplus at once.
	b.Queue(`SELECT pg_notify($1, $2) FROM replicas WHERE id = $3 AND started_at = seen_at`, s.Channel(), string(ev), replica)
	return p, wrap("heartbeat", s.leasePool.SendBatch(ctx, b).Close())
}

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
	// Renewed are the leases of held that were renewed, in shard order.
	Renewed []Lease
	// Free counts the shards whose lease lapsed or was released: with
	// none, there is nothing to acquire.
	Free int
	// Joined is true on the replica's first heartbeat.
	Joined bool
}

// renewSQL renews leases: only the expiry rows, so a renewal never waits
// for the fenced writes, which lock the lease rows.
const renewSQL = `UPDATE lease_expiry AS x SET expires_at = now() + $4::interval
	FROM leases AS l, unnest($1::smallint[], $2::bigint[]) AS f(shard, epoch)
	WHERE x.shard = l.shard AND l.shard = f.shard AND l.epoch = f.epoch AND l.owner = $3 AND x.expires_at > now()
	RETURNING x.shard, l.epoch`

// Renew extends the leases of held that replica still holds at their
// epoch and that have not lapsed, to lease from now by the database's
// clock, and returns those: the others are lost. The rows are locked in
// shard order.
func (s *Store) Renew(ctx context.Context, replica string, held []Lease, lease time.Duration) ([]Lease, error) {
	if len(held) == 0 {
		return nil, nil
	}
	shards, epochs := leaseArrays(held)
	rows, err := s.leasePool.Query(ctx, renewSQL, shards, epochs, replica, lease)
	if err != nil {
		return nil, wrap("renew leases", err)
	}
	return collectLeases(rows, "renew leases")
}

// Acquire takes up to n shards (n <= 0: none) whose lease lapsed at least
// lapsedFor ago (a shard released has lapsed at its release), skipping
// rows another transaction has locked, for replica, at the next epoch, to
// lease from now; it returns those it took.
func (s *Store) Acquire(ctx context.Context, replica string, n int, lease, lapsedFor time.Duration) ([]Lease, error) {
	if n <= 0 {
		return nil, nil
	}
	rows, err := s.leasePool.Query(ctx, `WITH pick AS (
			SELECT l.shard FROM leases AS l JOIN lease_expiry AS x ON x.shard = l.shard
			WHERE x.expires_at <= now() - $3::interval ORDER BY l.shard LIMIT $4 FOR UPDATE OF l SKIP LOCKED),
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
// replicas: a replica that stops says so, and the others take its shards
// at once rather than after its leases lapse.
func (s *Store) Leave(ctx context.Context, replica string) error {
	return wrap("leave", s.leaseWrite(ctx, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `WITH rel AS (UPDATE leases SET owner = NULL WHERE shard IN (
				SELECT shard FROM leases WHERE owner = $1 ORDER BY shard FOR UPDATE) RETURNING shard)
			UPDATE lease_expiry SET expires_at = now() FROM rel WHERE lease_expiry.shard = rel.shard`, replica); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `DELETE FROM replicas WHERE id = $1`, replica); err != nil {
			return err
		}
		return s.notifyNow(ctx, tx, Event{Kind: EventRebalance})
	}))
}

// ShardLeases returns every shard's lease as the database has it, for
// status pages and tests.
func (s *Store) ShardLeases(ctx context.Context) ([]LeaseRow, error) {
	rows, err := s.leasePool.Query(ctx, `SELECT l.shard, coalesce(l.owner, ''), l.epoch, x.expires_at > now()
		FROM leases AS l JOIN lease_expiry AS x ON x.shard = l.shard ORDER BY l.shard`)
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

// PendingSince returns the ids of the pending watches of shards inserted
// since since (by the database's clock), and the database's clock as the
// query ran: the repair scan, which finds what a lost notification did not
// say, through the index of each shard's pending rows by insertion time.
func (s *Store) PendingSince(ctx context.Context, shards []int, since time.Time) ([]string, time.Time, error) {
	// On the lease pool, whose connection the step just used. The clock
	// and the rows are two statements: folded into one (an aggregate
	// over a subquery) the planner read every watch at each scan, 67 000
	// blocks a scan at 100 000 pending.
	var now time.Time
	if err := s.leasePool.QueryRow(ctx, `SELECT now()`).Scan(&now); err != nil {
		return nil, time.Time{}, wrap("read the clock", err)
	}
	if len(shards) == 0 {
		return nil, now, nil
	}
	sh := make([]int16, len(shards))
	for i, v := range shards {
		sh[i] = int16(v)
	}
	// Planned per call (QueryExecModeExec), with since's value: the
	// cached generic plan, which cannot know since is seconds ago, read
	// each held shard's pending rows whole (about 26 ms of backend CPU a
	// scan, 0.96 s a minute for 3 idle replicas at 100 000 pending).
	rows, err := s.leasePool.Query(ctx, `SELECT id FROM watches WHERE shard = ANY($1) AND state = 'pending' AND inserted_at > $2`,
		pgx.QueryExecModeExec, sh, since)
	if err != nil {
		return nil, time.Time{}, wrap("list new pending watches", err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, time.Time{}, wrap("list new pending watches", err)
	}
	return ids, now, nil
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
