// Package lease runs a replica's share of the shards of one PostgreSQL
// database: it says the replica is alive, renews the leases it holds,
// gives up the shards it holds beyond its fair share when another replica
// needs them, and takes free or lapsed ones up to its share, all at a fixed
// interval (and at once when another replica joins, leaves or releases).
// A step costs one round trip whatever the number of watches (a heartbeat
// that renews; acquisitions only when a shard is free). Most steps of an
// idle replica whose lease is its database session are quick ones
// (postgres.HeartbeatParams.Quick): the store answers from the last full
// heartbeat when nothing it reads has changed. A full one runs at least
// every QuickRun+1 steps, at once after Kick, and at the next two steps
// after Rescan (registrations heard of, a wake-up dropped).
//
// The manager decides; the Store (store/postgres) holds the leases; the
// daemon's Gain and Lose do the work of a shard changing hands (priming its
// watches, resuming its deliveries; forgetting them). Every write that
// settles or delivers is fenced on the leases in the database itself, so
// what a slow manager has not yet noticed cannot be done twice.
package lease

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/vigil-run/vigil/store/postgres"
)

// Defaults of Config.
const (
	DefaultLease = 15 * time.Second
	DefaultRenew = 5 * time.Second
	// DrainMax bounds how long a release waits for the delivery attempts
	// in flight on the shards it gives up (Config.Drain): the timeout of
	// one webhook attempt (deliver/webhook.DefaultTimeout), the channel
	// nearly every delivery takes; an attempt still going past it (a slow
	// mail, a long command) is read back as unknown, as before. The wait
	// is also at most a renewal interval, and half what the lease lasts
	// beyond one (drainFor), whichever is shortest: the release happens
	// inside a step, after the heartbeat that renewed the lease and before
	// the next, which comes a renewal interval after this step ends, so
	// the lease (and the fence the attempts record their results on) holds
	// throughout the wait and until the next renewal with time to spare,
	// and the other replicas still count this one live (5 s with the
	// default lease and renewal).
	DrainMax = 10 * time.Second
)

// Store is what the manager asks of the database: store/postgres.Store.
type Store interface {
	// Heartbeat says the replica is alive and renews its lease, which
	// holds the leases of p.Held, in one statement
	// (postgres.Store.Heartbeat).
	Heartbeat(ctx context.Context, p postgres.HeartbeatParams) (postgres.Peers, error)
	Acquire(ctx context.Context, replica string, n int, lease, lapsedFor time.Duration) ([]postgres.Lease, error)
	Release(ctx context.Context, replica string, held []postgres.Lease) error
	Leave(ctx context.Context, replica string) error
	SetFence(owner string, held []postgres.Lease)
}

// ErrDecline, returned (or wrapped) by Config.Gain, declines the shards
// taken: they are released at once for another replica, and the step goes
// on as one that took nothing.
var ErrDecline = errors.New("lease: not taking shards")

// Stop wraps an error of Config.Rejoin that must end the replica: Run
// lets go of everything, as when its context ends, and returns err as it
// is.
func Stop(err error) error { return &stopError{err} }

type stopError struct{ err error }

func (e *stopError) Error() string { return e.err.Error() }
func (e *stopError) Unwrap() error { return e.err }

// Config configures a Manager. Zero durations take the defaults.
type Config struct {
	Store   Store
	Replica string
	// Shards is the database's shard count (postgres.Shards).
	Shards int
	// Lease is how long a lease lasts without renewal; Renew how often
	// the manager steps (renews, rebalances). Renew must be well under
	// Lease: a third of it by default.
	Lease, Renew time.Duration
	// Gain is called with the shards taken, after the fence holds them:
	// it arms their pending watches and resumes their deliveries (or
	// hands them to what does). An error releases them (they are taken
	// again at a later step): the step fails, unless the error is
	// ErrDecline (a replica on its way out, which takes nothing more).
	// Its ctx ends after gainFor (on the step timer, NewTimer), and Gain
	// must return then: a Gain that ran out of time fails as any other,
	// releasing the shards, so that a Gain waiting on a database that
	// stopped answering does not hold the step, and with it the renewal
	// of every lease held.
	Gain func(ctx context.Context, shards []int) error
	// Lose is called with the shards lost or released, after the fence
	// let go of them and, for a release, before the database hears of it:
	// it forgets their watches and deliveries.
	Lose func(shards []int)
	// Drain, when set, is called with the shards about to be released
	// (given up deliberately, to a replica under its share; never those
	// lost), while the fence still holds them: it stops their delivery
	// attempts from starting and waits, until ctx ends (at most drainFor),
	// for those in flight to record their results, returning how many it
	// did not wait for. Lose follows, after the fence let go of them.
	// Without it an attempt in flight could not record its result (the
	// fence refuses it) and the next holder would read it back as unknown.
	Drain func(ctx context.Context, shards []int) int
	// Since, when set, is asked before each heartbeat for the instant
	// (by the database's clock) from which the heartbeat's repair scan
	// reads the new pending watches of the shards it renews; the zero
	// time asks for no scan.
	Since func() time.Time
	// Renewed, when set, is called after each step that succeeded with
	// the shards held and what the step's heartbeat found (the
	// database's clock, the repair scan's ids): the daemon's repair.
	Renewed func(ctx context.Context, held []int, found postgres.Peers)
	// Rejoin, when set, is called by the step whose heartbeat finds that
	// the replica had stopped counting as live for the signing keys'
	// check (postgres.Peers.Unchecked: its lease lapsed while it was
	// frozen or cut off, and a replica may have started meanwhile without
	// comparing its keys with this one's), before the step takes any
	// shard: the daemon compares its keys with the live replicas' again.
	// Until it returns nil the replica takes no shard, and every step
	// calls it again; an error wrapped by Stop ends Run with it.
	Rejoin func(ctx context.Context) error
	Logger *slog.Logger
	// NewTimer makes the step timer and the bounds of a release's Drain
	// and of a Gain;
	// nil uses time.NewTimer. Tests drive Step directly.
	NewTimer func(d time.Duration) *time.Timer
}

// Manager holds a replica's leases. Make it with New; Run it, or drive it
// with Step.
type Manager struct {
	cfg  Config
	log  *slog.Logger
	kick chan struct{}

	mu   sync.Mutex
	held []postgres.Lease
	// next is when Run steps next, at most Renew away: sooner when a
	// dead replica's lease lapses first.
	next time.Duration
	// found is what the last step's heartbeat found, for Renewed.
	found postgres.Peers
	// rejoin is set while Config.Rejoin has yet to pass (only Step
	// touches it).
	rejoin bool
	// quick counts the quick heartbeats since the last full one.
	quick int
	// full is how many of the next steps' heartbeats must be full ones
	// (Kick, Rescan).
	full int
	// needySince is when a step of this replica, holding at least the
	// floor of its share, first found free shards while another live
	// replica held fewer than that floor; zero when the last step did
	// not (only Step touches it).
	needySince time.Time
}

// QuickRun bounds the quick heartbeats in a row
// (postgres.HeartbeatParams.Quick): at least every QuickRun+1 steps (a
// minute at the default renewal) the heartbeat is a full one, with its
// repair scan, whatever else asked for one.
const QuickRun = 11

// New returns a manager holding no shard.
func New(cfg Config) (*Manager, error) {
	if cfg.Store == nil || cfg.Replica == "" || cfg.Shards <= 0 {
		return nil, errors.New("lease: a manager needs a store, a replica id and a shard count")
	}
	if cfg.Lease <= 0 {
		cfg.Lease = DefaultLease
	}
	if cfg.Renew <= 0 {
		cfg.Renew = min(DefaultRenew, cfg.Lease/3)
	}
	if cfg.Renew >= cfg.Lease {
		return nil, fmt.Errorf("lease: the renewal interval (%s) must be shorter than the lease (%s)", cfg.Renew, cfg.Lease)
	}
	if cfg.Gain == nil {
		cfg.Gain = func(context.Context, []int) error { return nil }
	}
	if cfg.Lose == nil {
		cfg.Lose = func([]int) {}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.NewTimer == nil {
		cfg.NewTimer = time.NewTimer
	}
	return &Manager{cfg: cfg, log: cfg.Logger.With("component", "lease", "replica", cfg.Replica), kick: make(chan struct{}, 1)}, nil
}

// Held returns the shards the manager holds, in order.
func (m *Manager) Held() []int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return shardsOf(m.held)
}

// Kick makes Run step now (another replica joined, released or left),
// with a full heartbeat.
func (m *Manager) Kick() {
	m.askFull(1)
	select {
	case m.kick <- struct{}{}:
	default:
	}
}

// Rescan makes the next two steps' heartbeats full ones, with the repair
// scan (Config.Since), at their usual time: registrations were heard of
// (the scan goes on covering them while they come), a wake-up dropped
// among them. A scan starts a little before the one before it (where the
// oldest transaction then writing began: Config.Since), so the second
// reads again the last rows of a burst the first read; after it, the
// scans of a quiet replica read nothing.
func (m *Manager) Rescan() { m.askFull(2) }

// askFull makes at least the next n steps' heartbeats full ones.
func (m *Manager) askFull(n int) {
	m.mu.Lock()
	m.full = max(m.full, n)
	m.mu.Unlock()
}

// live is how long a replica's heartbeat counts it among the live: two
// renewals and a half, so one that stops is no longer counted (and its
// shards are shared among the others) by the time its leases lapse.
func (m *Manager) live() time.Duration { return m.cfg.Renew*5/2 + m.cfg.Renew/10 }

// Step does one round: heartbeat, renew, release surplus, acquire. It
// returns the first error; what it did before the error stands.
func (m *Manager) Step(ctx context.Context) error {
	st := m.cfg.Store
	m.mu.Lock()
	held := slices.Clone(m.held)
	// Quick unless something asked for a full heartbeat, or QuickRun
	// quick ones ran since the last: the store makes it a full one anyway
	// when anything it reads changed.
	full := m.full > 0
	if full {
		m.full--
	}
	quick := !full && m.quick < QuickRun
	m.mu.Unlock()
	// Heartbeat and renew, in one round trip; what was not renewed is
	// lost (taken over after a lapse, or lapsed itself while this
	// replica was frozen).
	hp := postgres.HeartbeatParams{Replica: m.cfg.Replica, Live: m.live(), Held: held, Lease: m.cfg.Lease, Quick: quick}
	if m.cfg.Since != nil {
		hp.PendingSince = m.cfg.Since()
	}
	cctx, cancel := m.bound(ctx)
	peers, err := st.Heartbeat(cctx, hp)
	cancel()
	if err != nil {
		if quick {
			// Whatever failed, the retry reads everything again.
			m.askFull(1)
		}
		return err
	}
	m.mu.Lock()
	m.found = peers
	if peers.Quick {
		m.quick++
	} else {
		m.quick = 0
	}
	m.mu.Unlock()
	renewed := peers.Renewed
	if lost := minus(held, renewed); len(lost) > 0 {
		m.log.Warn("shards lost: their leases lapsed or were taken over", "shards", shardsOf(lost))
		m.set(renewed)
		m.cfg.Lose(shardsOf(lost))
	}
	held = renewed
	if peers.Unchecked && m.cfg.Rejoin != nil {
		m.rejoin = true
	}
	if m.rejoin {
		// Compared again before any shard is taken; a lapse left none
		// held.
		if err := m.cfg.Rejoin(ctx); err != nil {
			return err
		}
		m.rejoin = false
	}

	live := max(1, len(peers.Live))
	if !slices.Contains(peers.Live, m.cfg.Replica) {
		live++
	}
	target := (m.cfg.Shards + live - 1) / live
	floor := m.cfg.Shards / live
	needy := false
	for _, r := range peers.Live {
		if r != m.cfg.Replica && peers.Held[r] < floor {
			needy = true
		}
	}
	released := false
	if len(held) > floor && needy {
		// Give what is above the floor of the share to a replica that
		// has less than that floor: let the deliveries in flight on it
		// record their results while the fence still holds it (drain),
		// forget it here, then let go of it in the database, so the two
		// never both hold it. (A replica under its share takes it back
		// at its next step if nobody needed it.)
		surplus := held[floor:]
		m.drain(ctx, shardsOf(surplus))
		held = held[:floor:floor]
		m.set(held)
		m.cfg.Lose(shardsOf(surplus))
		cctx, cancel := m.bound(ctx)
		err := st.Release(cctx, m.cfg.Replica, surplus)
		cancel()
		if err != nil {
			// Not released: they lapse, and are taken then.
			return err
		}
		released = true
		m.log.Info("shards released to a replica that has fewer than its share", "shards", shardsOf(surplus), "share", target)
	}
	// With no shard free (the steady state) there is nothing to acquire,
	// and no statement is sent for it: a shard that lapses after the
	// heartbeat is taken at the next step, which NextLapse brings forward.
	want := target - len(held)
	if needy && len(held) >= floor && peers.Free > 0 {
		// The free shards are the needy replica's to take (those this
		// replica or another released for it): taking one back up to
		// the share here, as the releasers did at their next step
		// while the joiner was still arming what it took first, made
		// it release again at the step after, the same shard going back
		// and forth between them, at a new epoch and a priming each
		// time, until the joiner won a race for it. They are left to it
		// for a renewal interval; one that takes none meanwhile (it is
		// declining them, on its way out) gets them taken here then.
		now := time.Now()
		if m.needySince.IsZero() {
			m.needySince = now
		}
		if now.Sub(m.needySince) < m.cfg.Renew {
			want = 0
		}
	} else {
		m.needySince = time.Time{}
	}
	var got []postgres.Lease
	if want > 0 && !released && peers.Free > 0 {
		cctx, cancel := m.bound(ctx)
		got, err = st.Acquire(cctx, m.cfg.Replica, want, m.cfg.Lease, 0)
		cancel()
		if err != nil {
			return err
		}
	}
	if peers.Free > 0 {
		// Shards lapsed for a whole lease are nobody's (the replicas
		// that should have taken them are gone): take them whatever the
		// share; the surplus goes back at a later step to a replica
		// that needs it.
		cctx, cancel := m.bound(ctx)
		orphans, err := st.Acquire(cctx, m.cfg.Replica, m.cfg.Shards, m.cfg.Lease, m.cfg.Lease)
		cancel()
		if err != nil {
			return err
		}
		got = append(got, orphans...)
	}
	m.mu.Lock()
	m.next = m.cfg.Renew
	if peers.NextLapse > 0 && peers.NextLapse < m.next {
		m.next = peers.NextLapse + 10*time.Millisecond
	}
	m.mu.Unlock()
	if len(got) == 0 {
		return nil
	}
	// A shard renewed at the start of a slow step may have lapsed and
	// been taken again by this replica, at the next epoch: the new lease
	// replaces the old.
	all := slices.DeleteFunc(slices.Clone(held), func(h postgres.Lease) bool {
		return slices.ContainsFunc(got, func(g postgres.Lease) bool { return g.Shard == h.Shard })
	})
	all = append(all, got...)
	slices.SortFunc(all, func(a, b postgres.Lease) int { return a.Shard - b.Shard })
	m.set(all)
	if err := m.gain(ctx, shardsOf(got)); err != nil {
		m.set(held)
		m.cfg.Lose(shardsOf(got))
		cctx, cancel := m.bound(context.WithoutCancel(ctx))
		rerr := st.Release(cctx, m.cfg.Replica, got)
		cancel()
		if errors.Is(err, ErrDecline) {
			m.log.Info("shards declined, released for another replica", "shards", shardsOf(got), "why", err)
			return rerr
		}
		return errors.Join(fmt.Errorf("lease: arming the shards taken: %w", err), rerr)
	}
	m.log.Info("shards taken", "shards", shardsOf(got), "held", len(all), "share", target, "replicas", live)
	return nil
}

// bound bounds one of a step's statements by the lease: past it the
// leases it was to renew, take or give up have lapsed anyway, and a
// statement still waiting then (a connection to a database cut off
// without a reset, which the kernel's keepalives would notice only after
// many minutes) is given up, so that the step is tried again, on a new
// connection, rather than the replica hanging on to shards it no longer
// holds and taking none once the database is back.
func (m *Manager) bound(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, m.cfg.Lease)
}

// drainFor is how long a release waits for the deliveries in flight on
// the shards it gives up: DrainMax, at most a renewal interval and half
// what the lease lasts beyond one (see DrainMax).
func (m *Manager) drainFor() time.Duration {
	return min(DrainMax, m.cfg.Renew, (m.cfg.Lease-m.cfg.Renew)/2)
}

// drain calls Drain with the shards to be released, for at most
// drainFor (on the step timer, NewTimer).
func (m *Manager) drain(ctx context.Context, shards []int) {
	if m.cfg.Drain == nil {
		return
	}
	dctx, cancel := context.WithCancel(ctx)
	defer cancel()
	bound := m.cfg.NewTimer(m.drainFor())
	defer bound.Stop()
	done := make(chan struct{})
	defer close(done)
	go func() {
		select {
		case <-bound.C:
			cancel()
		case <-done:
		}
	}()
	if left := m.cfg.Drain(dctx, shards); left > 0 {
		m.log.Warn("releasing shards with delivery attempts still in flight: the next holder reads their receipts back as unknown",
			"shards", shards, "attempts", left, "bound", m.drainFor())
	}
}

// gainFor bounds a Gain: a renewal interval and half what the lease lasts
// beyond one, whichever is shorter (5 s with the default lease and
// renewal). The leases taken and those renewed at the step's start hold
// throughout, and the next step still renews them in time after a release
// drained for as long (drainFor) in the same step.
func (m *Manager) gainFor() time.Duration {
	return min(m.cfg.Renew, (m.cfg.Lease-m.cfg.Renew)/2)
}

// gain calls Gain with the shards taken, its context ended after gainFor
// (on the step timer, NewTimer). A Gain that returns an error once that
// bound has passed ran out of time, which the error says.
func (m *Manager) gain(ctx context.Context, shards []int) error {
	gctx, cancel := context.WithCancel(ctx)
	defer cancel()
	bound := m.cfg.NewTimer(m.gainFor())
	defer bound.Stop()
	var late atomic.Bool
	done := make(chan struct{})
	defer close(done)
	go func() {
		select {
		case <-bound.C:
			late.Store(true)
			cancel()
		case <-done:
		}
	}()
	err := m.cfg.Gain(gctx, shards)
	if err != nil && late.Load() {
		m.log.Warn("arming the shards taken ran out of time; releasing them", "shards", shards, "bound", m.gainFor())
		return fmt.Errorf("ran out of time (%s): %w", m.gainFor(), err)
	}
	return err
}

// set makes held what the manager holds and what the store fences on.
func (m *Manager) set(held []postgres.Lease) {
	m.mu.Lock()
	m.held = slices.Clone(held)
	m.mu.Unlock()
	m.cfg.Store.SetFence(m.cfg.Replica, held)
}

// Run steps at once, then every Renew (sooner when a dead replica's lease
// lapses first, at once on Kick), until ctx ends or Rejoin fails with an
// error wrapped by Stop, which it returns as it was before the wrapping;
// then it lets go of every shard (Lose, then Leave) so the other replicas
// take them at once. A step that fails otherwise is logged and tried
// again a fifth of Renew later: the leases it could not renew before they
// lapse are lost, and the fence stops what they covered.
func (m *Manager) Run(ctx context.Context) error {
	defer func() {
		m.mu.Lock()
		held := shardsOf(m.held)
		m.mu.Unlock()
		m.set(nil)
		if len(held) > 0 {
			m.cfg.Lose(held)
		}
		lctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if err := m.cfg.Store.Leave(lctx, m.cfg.Replica); err != nil {
			m.log.Warn("leaving: the shards held lapse instead", "err", err)
		}
	}()
	t := m.cfg.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		case <-m.kick:
		}
		failed := false
		if err := m.Step(ctx); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			if se := (*stopError)(nil); errors.As(err, &se) {
				return se.err
			}
			m.log.Error("lease step failed; trying again soon", "err", err, "in", m.cfg.Renew/5)
			failed = true
		} else if m.cfg.Renewed != nil {
			m.mu.Lock()
			found := m.found
			m.mu.Unlock()
			m.cfg.Renewed(ctx, m.Held(), found)
		}
		m.mu.Lock()
		next := m.next
		m.mu.Unlock()
		if next <= 0 {
			next = m.cfg.Renew
		}
		if failed {
			// A step that failed (the database restarting, a dropped
			// connection) is tried again a fifth of a renewal on, not a
			// whole one: two failures in a row at the renewal's pace
			// would let a default lease (three renewals) lapse.
			next = min(next, m.cfg.Renew/5)
		}
		if !t.Stop() {
			select {
			case <-t.C:
			default:
			}
		}
		t.Reset(next)
	}
}

func shardsOf(ls []postgres.Lease) []int {
	out := make([]int, len(ls))
	for i, l := range ls {
		out[i] = l.Shard
	}
	return out
}

// minus returns the leases of a not in b (by shard and epoch).
func minus(a, b []postgres.Lease) []postgres.Lease {
	var out []postgres.Lease
	for _, l := range a {
		if !slices.Contains(b, l) {
			out = append(out, l)
		}
	}
	return out
}
