package lease

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/vigil-run/vigil/store/postgres"
)

// fakeStore keeps leases in memory on an injected clock, with the rules
// store/postgres applies in SQL (its own tests check those against the
// database).
type fakeStore struct {
	mu      sync.Mutex
	now     time.Time
	shards  []fakeLease
	seen    map[string]time.Time
	until   map[string]time.Time // each replica's lease
	fences  map[string][]postgres.Lease
	onLease func() // called at each Release, before it applies
	// failBeats fails that many heartbeats to come, writing nothing (the
	// database restarting).
	failBeats int
	// hangBeats makes that many heartbeats to come wait until their
	// context ends (a connection to a database cut off without a reset).
	hangBeats int
	// quick records, for each heartbeat asked, whether it could be a
	// quick one (HeartbeatParams.Quick); the fake answers it as asked.
	quick []bool
}

type fakeLease struct {
	owner   string
	epoch   int64
	expires time.Time
}

func newFake(n int) *fakeStore {
	return &fakeStore{now: time.Unix(1_000_000, 0), shards: make([]fakeLease, n), seen: map[string]time.Time{}, until: map[string]time.Time{}, fences: map[string][]postgres.Lease{}}
}

func (f *fakeStore) advance(d time.Duration) {
	f.mu.Lock()
	f.now = f.now.Add(d)
	f.mu.Unlock()
}

func (f *fakeStore) Heartbeat(ctx context.Context, hp postgres.HeartbeatParams) (postgres.Peers, error) {
	f.mu.Lock()
	f.quick = append(f.quick, hp.Quick)
	if f.failBeats > 0 {
		f.failBeats--
		f.mu.Unlock()
		return postgres.Peers{}, errors.New("the database is restarting")
	}
	if f.hangBeats > 0 {
		f.hangBeats--
		f.mu.Unlock()
		<-ctx.Done()
		return postgres.Peers{}, ctx.Err()
	}
	f.mu.Unlock()
	replica, live := hp.Replica, hp.Live
	renewed, _ := f.Renew(ctx, replica, hp.Held, hp.Lease)
	f.mu.Lock()
	defer f.mu.Unlock()
	_, known := f.seen[replica]
	f.seen[replica] = f.now
	// A replica whose lease lapsed is unchecked (its signing keys are
	// compared with nobody's meanwhile); the fake records no keys.
	unchecked := known && !f.until[replica].After(f.now)
	f.until[replica] = f.now.Add(hp.Lease)
	p := postgres.Peers{Held: map[string]int{}, Joined: !known, Renewed: renewed, Unchecked: unchecked, Quick: hp.Quick}
	for id, at := range f.seen {
		if at.After(f.now.Add(-live)) {
			p.Live = append(p.Live, id)
		}
	}
	sort.Strings(p.Live)
	for _, l := range f.shards {
		if !l.expires.After(f.now) {
			p.Free++
		}
		if l.owner != "" && l.expires.After(f.now) {
			p.Held[l.owner]++
			if !slices.Contains(p.Live, l.owner) && (p.NextLapse == 0 || l.expires.Sub(f.now) < p.NextLapse) {
				p.NextLapse = l.expires.Sub(f.now)
			}
		}
	}
	return p, nil
}

func (f *fakeStore) Renew(_ context.Context, replica string, held []postgres.Lease, lease time.Duration) ([]postgres.Lease, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []postgres.Lease
	for _, h := range held {
		l := &f.shards[h.Shard]
		if l.owner == replica && l.epoch == h.Epoch && l.expires.After(f.now) {
			l.expires = f.now.Add(lease)
			out = append(out, h)
		}
	}
	return out, nil
}

func (f *fakeStore) Acquire(_ context.Context, replica string, n int, lease, lapsedFor time.Duration) ([]postgres.Lease, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []postgres.Lease
	for sh := range f.shards {
		if len(out) == n {
			break
		}
		l := &f.shards[sh]
		if !l.expires.After(f.now.Add(-lapsedFor)) {
			l.owner, l.epoch, l.expires = replica, l.epoch+1, f.now.Add(lease)
			out = append(out, postgres.Lease{Shard: sh, Epoch: l.epoch})
		}
	}
	return out, nil
}

func (f *fakeStore) Release(_ context.Context, replica string, held []postgres.Lease) error {
	if f.onLease != nil {
		f.onLease()
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, h := range held {
		l := &f.shards[h.Shard]
		if l.owner == replica && l.epoch == h.Epoch {
			l.owner, l.expires = "", f.now
		}
	}
	return nil
}

func (f *fakeStore) Leave(_ context.Context, replica string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	for i := range f.shards {
		if f.shards[i].owner == replica {
			f.shards[i].owner, f.shards[i].expires = "", f.now
		}
	}
	delete(f.seen, replica)
	delete(f.until, replica)
	return nil
}

func (f *fakeStore) SetFence(owner string, held []postgres.Lease) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.fences[owner] = slices.Clone(held)
}

// owners returns who holds each shard on a lease not lapsed ("" for none).
func (f *fakeStore) owners() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]string, len(f.shards))
	for i, l := range f.shards {
		if l.owner != "" && l.expires.After(f.now) {
			out[i] = l.owner
		}
	}
	return out
}

type rig struct {
	t     *testing.T
	store *fakeStore
	m     map[string]*Manager
	// armed is what each replica's Gain and Lose leave it holding.
	armed map[string]map[int]bool
}

func newRig(t *testing.T) *rig {
	return &rig{t: t, store: newFake(64), m: map[string]*Manager{}, armed: map[string]map[int]bool{}}
}

func (r *rig) add(id string) *Manager {
	r.armed[id] = map[int]bool{}
	m, err := New(Config{Store: r.store, Replica: id, Shards: 64, Lease: 15 * time.Second, Renew: 5 * time.Second,
		Gain: func(_ context.Context, ss []int) error {
			for _, s := range ss {
				if r.armed[id][s] {
					r.t.Errorf("%s gained shard %d twice", id, s)
				}
				r.armed[id][s] = true
			}
			return nil
		},
		Lose: func(ss []int) {
			for _, s := range ss {
				delete(r.armed[id], s)
			}
		}})
	if err != nil {
		r.t.Fatal(err)
	}
	r.m[id] = m
	return m
}

func (r *rig) step(ids ...string) {
	for _, id := range ids {
		if err := r.m[id].Step(context.Background()); err != nil {
			r.t.Fatalf("%s: Step = %v", id, err)
		}
	}
}

// check holds that the managers, their fences, what Gain and Lose left
// armed and the store agree, that no shard has two holders, and returns
// how many shards each replica holds.
func (r *rig) check(frozen ...string) map[string]int {
	r.t.Helper()
	owners := r.store.owners()
	count := map[string]int{}
	for id, m := range r.m {
		if slices.Contains(frozen, id) {
			continue // it has not stepped: it does not know yet
		}
		held := m.Held()
		count[id] = len(held)
		r.store.mu.Lock()
		fence := shardsOf(r.store.fences[id])
		r.store.mu.Unlock()
		if !slices.Equal(fence, held) {
			r.t.Errorf("%s: fence %v, held %v", id, fence, held)
		}
		if len(r.armed[id]) != len(held) {
			r.t.Errorf("%s: %d shards armed, %d held", id, len(r.armed[id]), len(held))
		}
		for _, s := range held {
			if !r.armed[id][s] {
				r.t.Errorf("%s holds shard %d without having armed it", id, s)
			}
			if owners[s] != id {
				r.t.Errorf("%s holds shard %d, which the database gives to %q", id, s, owners[s])
			}
		}
	}
	return count
}

// TestFairShareAndJoin: one replica takes every shard; a second joining
// gets half, moved without a moment with two holders (the first lets go
// of each shard, in its scheduler and its fence, before the database
// frees it); a third gets its share; the steps cost nothing more once
// balanced.
func TestFairShareAndJoin(t *testing.T) {
	r := newRig(t)
	r.add("a")
	r.step("a")
	if got := r.check(); got["a"] != 64 {
		t.Fatalf("alone, a holds %d shards, want 64", got["a"])
	}
	r.add("b")
	r.store.onLease = func() {
		// Inside a's Release, before the database frees them: a has
		// already let go of what it releases.
		owners := r.store.owners()
		for s := range r.armed["a"] {
			if owners[s] != "a" {
				t.Errorf("a still arms shard %d, which the database gives to %q", s, owners[s])
			}
		}
		if n := len(r.armed["a"]); n != 32 {
			t.Errorf("during the release a arms %d shards, want 32 (the surplus forgotten first)", n)
		}
	}
	r.step("b") // joins: nothing free yet
	if got := r.check(); got["b"] != 0 {
		t.Fatalf("b took %d shards while a held them all", got["b"])
	}
	r.step("a") // a sees b needs shards: releases its surplus
	r.store.onLease = nil
	r.step("b")
	if got := r.check(); got["a"] != 32 || got["b"] != 32 {
		t.Fatalf("two replicas hold %v, want 32 each", got)
	}
	r.add("c")
	r.step("c", "a", "b", "c")
	got := r.check()
	if got["a"]+got["b"]+got["c"] != 64 || got["c"] < 21 || got["a"] < 21 || got["b"] < 21 || got["a"] > 22 || got["b"] > 22 || got["c"] > 22 {
		t.Fatalf("three replicas hold %v, want 21 or 22 each, 64 in all", got)
	}
	before := got
	r.step("a", "b", "c")
	if got := r.check(); got["a"] != before["a"] || got["b"] != before["b"] || got["c"] != before["c"] {
		t.Fatalf("balanced replicas moved shards: %v then %v", before, got)
	}
}

// pair returns a rig of two replicas, a and b, holding 32 shards each.
func pair(t *testing.T) *rig {
	t.Helper()
	r := newRig(t)
	r.add("a")
	r.add("b")
	r.step("a", "b", "a", "b")
	if got := r.check(); got["a"] != 32 || got["b"] != 32 {
		t.Fatalf("two replicas hold %v, want 32 each", got)
	}
	return r
}

// TestJoinerTakesWhatWasReleasedForIt: the shards released for a
// replica that joined are left to it, not taken back by the releasers at
// their next steps while it is still busy arming what it took first (each
// shard would go back and forth between them, at a new epoch each time,
// until it won a race for one); they are taken back only if it takes none
// for a renewal interval.
func TestJoinerTakesWhatWasReleasedForIt(t *testing.T) {
	// Two replicas balanced, then c joins; gains counts the shards a and
	// b take from then on.
	setup := func(t *testing.T) (*rig, map[string]int) {
		r := pair(t)
		gains := map[string]int{}
		for _, id := range []string{"a", "b"} {
			gain := r.m[id].cfg.Gain
			r.m[id].cfg.Gain = func(ctx context.Context, ss []int) error {
				gains[id] += len(ss)
				return gain(ctx, ss)
			}
		}
		r.add("c")
		r.step("c")      // joins: nothing free yet
		r.step("a", "b") // each releases its surplus for c
		r.step("a", "b") // c still arming elsewhere: they step again first
		if gains["a"]+gains["b"] != 0 {
			t.Fatalf("a and b took back %v of the shards they released for c", gains)
		}
		return r, gains
	}
	t.Run("taken by the joiner", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			r, gains := setup(t)
			r.step("c", "a", "b", "c", "a", "b")
			if got := r.check(); got["a"] < 21 || got["b"] < 21 || got["c"] < 21 || got["a"]+got["b"]+got["c"] != 64 {
				t.Fatalf("three replicas hold %v, want 21 or 22 each", got)
			}
			if gains["a"]+gains["b"] != 0 {
				t.Fatalf("a and b took %v shards after c joined, want none: every shard moved once, to c", gains)
			}
		})
	})
	t.Run("taken back when the joiner takes none", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			r, gains := setup(t)
			// c never steps again: a renewal interval on, a and b take
			// up to their share again.
			time.Sleep(5 * time.Second)
			r.step("a", "b")
			if got := r.check(); got["a"] != 22 || got["b"] != 22 || gains["a"] != 1 || gains["b"] != 1 {
				t.Fatalf("a renewal interval after c joined and took nothing, a and b hold %v (took back %v), want 22 each", got, gains)
			}
		})
	})
}

// TestTakeoverAfterLapse: a replica that stops stepping (killed, or
// frozen) keeps its shards until its leases lapse by the store's clock,
// then the others take them over at the next epoch; when the frozen one
// steps again it finds it lost them (Lose before anything else), holds
// none of them, and gets a fair share back by the usual moves.
func TestTakeoverAfterLapse(t *testing.T) {
	r := pair(t)
	epochs := map[int]int64{}
	for _, l := range r.m["a"].held {
		epochs[l.Shard] = l.Epoch
	}
	// a is frozen: b steps alone every renewal.
	for range 2 {
		r.store.advance(5 * time.Second)
		r.step("b")
		if got := r.check("a"); got["b"] != 32 {
			t.Fatalf("before a's leases lapse b holds %d shards, want 32", got["b"])
		}
	}
	r.store.advance(5*time.Second + time.Millisecond) // a's leases lapsed 15 s after its renewal
	r.step("b")
	if got := r.check("a"); got["b"] != 64 {
		t.Fatalf("after a's leases lapsed b holds %d shards, want 64", got["b"])
	}
	for _, l := range r.m["b"].held {
		if e, ok := epochs[l.Shard]; ok && l.Epoch != e+1 {
			t.Errorf("shard %d taken over at epoch %d, want %d", l.Shard, l.Epoch, e+1)
		}
	}
	// a wakes: its renewal fails, it lets go of everything first.
	if err := r.m["a"].Step(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := r.check(); got["a"] != 0 {
		t.Fatalf("the frozen replica still holds %d shards", got["a"])
	}
	r.step("b", "a")
	if got := r.check(); got["a"] != 32 || got["b"] != 32 {
		t.Fatalf("after a came back: %v, want 32 each", got)
	}
}

// TestNextLapse: once a replica is no longer seen, the survivors' next
// step is due when its first lease lapses, not a whole renewal later.
func TestNextLapse(t *testing.T) {
	r := newRig(t)
	r.add("a")
	r.add("b")
	r.step("a", "b", "a", "b")
	r.store.advance(13 * time.Second) // a last seen 13 s ago: not live (12.5 s)
	r.step("b")
	r.m["b"].mu.Lock()
	next := r.m["b"].next
	r.m["b"].mu.Unlock()
	if want := 2*time.Second + 10*time.Millisecond; next != want {
		t.Fatalf("next step in %s, want %s (when a's leases lapse)", next, want)
	}
}

// TestLeaveOnStop: Run lets go of every shard when its context ends, so
// another replica takes them at its next step.
func TestLeaveOnStop(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		leaveOnStop(t)
	})
}

func leaveOnStop(t *testing.T) {
	r := newRig(t)
	r.add("a")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.m["a"].Run(ctx) }()
	synctest.Wait() // the first step, at once
	if got := r.check(); got["a"] != 64 {
		t.Fatalf("running, a holds %d shards, want 64", got["a"])
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if got := r.check(); got["a"] != 0 {
		t.Fatalf("a holds %d shards after Run", got["a"])
	}
	r.add("b")
	r.step("b")
	if got := r.check(); got["b"] != 64 {
		t.Fatalf("b took %d shards after a left, want 64", got["b"])
	}
}

// TestReleaseDrainsFirst: a replica giving shards up to one under its
// share first lets their deliveries in flight record their results
// (Drain), while its fence and the database still give it the shards and
// before it forgets them (Lose), for at most drainFor on the step timer;
// then it lets go of them as before. Shards lost (a lapse) are not
// drained: the fence already refuses what their attempts would record.
func TestReleaseDrainsFirst(t *testing.T) {
	r := newRig(t)
	a := r.add("a")
	r.add("b")
	r.step("a")
	var drained [][]int
	var bounds []time.Duration
	a.cfg.NewTimer = func(d time.Duration) *time.Timer {
		bounds = append(bounds, d)
		return time.NewTimer(0) // the bound passes at once
	}
	a.cfg.Drain = func(ctx context.Context, shards []int) int {
		drained = append(drained, shards)
		owners := r.store.owners()
		r.store.mu.Lock()
		fence := shardsOf(r.store.fences["a"])
		r.store.mu.Unlock()
		for _, s := range shards {
			if !slices.Contains(fence, s) || !r.armed["a"][s] || owners[s] != "a" {
				t.Errorf("draining shard %d: in a's fence %v, armed %v, the database's holder %q; want a's throughout",
					s, slices.Contains(fence, s), r.armed["a"][s], owners[s])
			}
		}
		<-ctx.Done() // an attempt that never ends: only the bound ends the wait
		return 1
	}
	r.step("b", "a", "b")
	if got := r.check(); got["a"] != 32 || got["b"] != 32 {
		t.Fatalf("after the release: %v, want 32 each", got)
	}
	if want := [][]int{seq(32, 64)}; !slices.EqualFunc(drained, want, slices.Equal) {
		t.Fatalf("drained %v, want %v", drained, want)
	}
	if want := []time.Duration{5 * time.Second}; !slices.Equal(bounds, want) {
		t.Fatalf("drain bounds %v, want %v (a renewal interval, under DrainMax)", bounds, want)
	}
	// a's lease lapses (frozen): b takes its shards; a's next step loses
	// them without draining.
	r.store.advance(10 * time.Second)
	r.step("b")
	r.store.advance(5*time.Second + time.Millisecond)
	r.step("b", "a")
	if got := r.check(); got["a"] != 0 || got["b"] != 64 {
		t.Fatalf("after a's lease lapsed: %v, want b holding all 64", got)
	}
	if len(drained) != 1 {
		t.Fatalf("shards lost were drained: %v", drained[1:])
	}
}

// TestDrainBound: the drain's bound is DrainMax, at most a renewal
// interval and half what the lease lasts beyond one.
func TestDrainBound(t *testing.T) {
	for _, c := range []struct{ lease, renew, want time.Duration }{
		{15 * time.Second, 5 * time.Second, 5 * time.Second},
		{time.Minute, 20 * time.Second, 10 * time.Second},
		{time.Minute, 50 * time.Second, 5 * time.Second},
		{3 * time.Second, time.Second, time.Second},
	} {
		m, err := New(Config{Store: newFake(64), Replica: "a", Shards: 64, Lease: c.lease, Renew: c.renew})
		if err != nil {
			t.Fatal(err)
		}
		if got := m.drainFor(); got != c.want {
			t.Errorf("lease %s, renewal %s: drain bound %s, want %s", c.lease, c.renew, got, c.want)
		}
	}
}

func seq(from, to int) []int {
	var out []int
	for i := from; i < to; i++ {
		out = append(out, i)
	}
	return out
}

// TestDeclinedGain: a replica whose Gain declines (ErrDecline: it is on
// its way out) releases the shards it took at once, and the step does
// not fail (nothing to log as an error); another replica takes its share
// of them at its next step. Any other error still fails the step.
func TestDeclinedGain(t *testing.T) {
	for _, tt := range []struct {
		name    string
		err     error
		wantErr bool
	}{
		{"declined", fmt.Errorf("stopping: %w", ErrDecline), false},
		{"failed", errors.New("the database went away"), true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := newRig(t)
			m := r.add("a")
			m.cfg.Gain = func(context.Context, []int) error { return tt.err }
			err := m.Step(context.Background())
			if (err != nil) != tt.wantErr {
				t.Fatalf("Step = %v, want an error: %v", err, tt.wantErr)
			}
			if len(m.Held()) != 0 {
				t.Fatalf("a holds %d shards after its Gain refused them", len(m.Held()))
			}
			r.add("b")
			r.step("b")
			// a is still a live replica: b takes its share.
			if got := r.check(); got["b"] != 32 || got["a"] != 0 {
				t.Fatalf("b took %d shards and a holds %d, want 32 and none", got["b"], got["a"])
			}
		})
	}
}

// freeze lets a's lease lapse while b steps every renewal: b takes every
// shard over.
func (r *rig) freeze(a, b string) {
	r.t.Helper()
	for range 3 {
		r.store.advance(5*time.Second + time.Millisecond)
		r.step(b)
	}
	if got := r.check(a); got[b] != 64 {
		r.t.Fatalf("after %s's lease lapsed %s holds %d shards, want 64", a, b, got[b])
	}
}

// TestRejoinAfterLapse: a replica that finds on a heartbeat that its
// lease had lapsed (frozen) compares its keys again (Rejoin) before it
// takes any shard, and takes none, at this step or the next ones, until
// the comparison passes; a replica that never lapsed is never asked.
func TestRejoinAfterLapse(t *testing.T) {
	r := newRig(t)
	a := r.add("a")
	r.add("b")
	var calls int
	var answer error
	a.cfg.Rejoin = func(context.Context) error { calls++; return answer }
	r.step("a", "b", "a", "b")
	if got := r.check(); got["a"] != 32 || got["b"] != 32 || calls != 0 {
		t.Fatalf("hold %v after %d comparisons, want 32 each and none", got, calls)
	}
	r.freeze("a", "b")
	answer = errors.New("the database went away")
	if err := a.Step(context.Background()); err != answer || calls != 1 {
		t.Fatalf("the step after the lapse = %v after %d comparisons, want %v after 1", err, calls, answer)
	}
	r.step("b") // b releases a's share: free shards a must not take yet
	if err := a.Step(context.Background()); err != answer || calls != 2 {
		t.Fatalf("the next step = %v after %d comparisons, want %v after 2 (still due)", err, calls, answer)
	}
	if got := r.check(); got["a"] != 0 {
		t.Fatalf("a took %d shards before its keys were compared again", got["a"])
	}
	answer = nil
	r.step("a", "b")
	if got := r.check(); got["a"] != 32 || got["b"] != 32 || calls != 3 {
		t.Fatalf("once compared: hold %v after %d comparisons, want 32 each after 3", got, calls)
	}
	r.step("a", "b", "a")
	if calls != 3 {
		t.Fatalf("%d comparisons in steady state, want none more", calls-3)
	}
}

// TestRejoinRefused: a Rejoin that fails with an error wrapped by Stop
// ends Run with that error, holding nothing; the other replica keeps
// every shard.
func TestRejoinRefused(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t)
		a := r.add("a")
		r.add("b")
		refusal := errors.New("signing keys differ")
		a.cfg.Rejoin = func(context.Context) error { return Stop(refusal) }
		r.step("a", "b", "a", "b")
		r.freeze("a", "b")
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		done := make(chan error, 1)
		go func() { done <- a.Run(ctx) }()
		synctest.Wait() // the first step, at once
		select {
		case err := <-done:
			if err != refusal {
				t.Fatalf("Run = %v, want the refusal as it is", err)
			}
		default:
			t.Fatal("Run goes on after a refused Rejoin")
		}
		r.step("b")
		if got := r.check(); got["a"] != 0 || got["b"] != 64 {
			t.Fatalf("after a's refusal: %v, want b holding all 64", got)
		}
	})
}

// TestFailedStepTriedAgainSoon: a step that fails is tried again a fifth
// of a renewal on (1 s by default), not a whole renewal on: two failures
// in a row at the renewal's pace (a database restarting) let a default
// lease, three renewals long, lapse, and every shard moved.
func TestFailedStepTriedAgainSoon(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t)
		r.add("a")
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- r.m["a"].Run(ctx) }()
		defer func() {
			cancel()
			if err := <-done; err != nil {
				t.Error(err)
			}
		}()
		synctest.Wait() // the first step: a holds every shard
		if got := r.check(); got["a"] != 64 {
			t.Fatalf("a holds %d shards, want 64", got["a"])
		}
		r.store.mu.Lock()
		r.store.failBeats = 2
		r.store.mu.Unlock()
		// The renewal at 5 s fails; so does the one a second on.
		for _, d := range []time.Duration{5 * time.Second, time.Second} {
			r.store.advance(d)
			time.Sleep(d)
			synctest.Wait()
		}
		r.store.mu.Lock()
		left := r.store.failBeats
		r.store.mu.Unlock()
		if left != 0 {
			t.Fatalf("%d failing heartbeats left 6 s in: a failed step was not tried again within a second", left)
		}
		// The next, a second later, renews: the lease (15 s from the
		// first step) never lapsed.
		r.store.advance(time.Second)
		time.Sleep(time.Second)
		synctest.Wait()
		if got := r.check(); got["a"] != 64 {
			t.Fatalf("after the failures a holds %d shards, want 64 (renewed)", got["a"])
		}
	})
}

// TestHungStepGivenUp: a heartbeat that never answers (the database cut
// off without a reset) is given up once a lease has passed, and the step
// tried again: the replica takes its shards back once the database
// answers, where it hung on to them, fenced out, for as long as the
// connection took to die.
func TestHungStepGivenUp(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t)
		r.add("a")
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- r.m["a"].Run(ctx) }()
		defer func() {
			cancel()
			if err := <-done; err != nil {
				t.Error(err)
			}
		}()
		synctest.Wait() // the first step: a holds every shard
		r.store.mu.Lock()
		r.store.hangBeats = 1
		r.store.mu.Unlock()
		// The renewal at 5 s hangs; its lease (to 15 s) lapses.
		r.store.advance(5 * time.Second)
		time.Sleep(5 * time.Second)
		synctest.Wait()
		// A lease on (20 s) it is given up; the step a second later
		// finds the shards lapsed and takes them again.
		r.store.advance(16 * time.Second)
		time.Sleep(16 * time.Second)
		synctest.Wait()
		r.store.mu.Lock()
		left := r.store.hangBeats
		r.store.mu.Unlock()
		if left != 0 {
			t.Fatal("the hanging heartbeat never started")
		}
		if got := r.check(); got["a"] != 64 {
			t.Fatalf("21 s in, a holds %d shards, want 64: the hung step was not given up and tried again", got["a"])
		}
	})
}

// TestHungGainGivenUp: a Gain that does not return (priming a shard's
// watches on a database that stopped answering without a reset) is given
// up once gainFor has passed on the step timer: the step fails and the
// shards taken are released, as after a Gain that failed, so the replica
// goes on stepping (renewing what it holds) and another replica can take
// them. The bound is a renewal interval with the default lease.
func TestHungGainGivenUp(t *testing.T) {
	r := newRig(t)
	m := r.add("a")
	type bound struct {
		d    time.Duration
		fire chan time.Time
	}
	bounds := make(chan bound, 4)
	m.cfg.NewTimer = func(d time.Duration) *time.Timer {
		// A timer that never fires by itself: the test fires it.
		tm := time.NewTimer(time.Hour)
		tm.Stop()
		c := make(chan time.Time, 1)
		tm.C = c
		bounds <- bound{d, c}
		return tm
	}
	entered := make(chan struct{})
	m.cfg.Gain = func(ctx context.Context, shards []int) error {
		close(entered)
		<-ctx.Done() // hung: only its context ends the wait
		return ctx.Err()
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- m.Step(ctx) }()
	<-entered
	select {
	case b := <-bounds:
		if b.d != 5*time.Second {
			t.Errorf("Gain's bound %s, want 5s (a renewal interval)", b.d)
		}
		b.fire <- time.Now()
	default:
		cancel() // unhang the step to report
		<-done
		t.Fatal("Gain runs without a bound: a Gain that hangs holds the step, and the replica stops renewing its leases")
	}
	err := <-done
	if err == nil || !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), "ran out of time") {
		t.Fatalf("Step = %v, want a failure saying Gain ran out of time", err)
	}
	if ctx.Err() != nil {
		t.Fatal("the step's own context ended")
	}
	if len(m.Held()) != 0 {
		t.Fatalf("a holds %d shards after its Gain ran out of time, want none (released)", len(m.Held()))
	}
	if owners := r.store.owners(); slices.Contains(owners, "a") {
		t.Fatalf("the database still gives shards to a after its Gain ran out of time")
	}
	r.add("b")
	r.step("b")
	if got := r.check(); got["b"] != 32 || got["a"] != 0 {
		t.Fatalf("b took %d shards and a holds %d, want 32 and none", got["b"], got["a"])
	}
}

// TestQuickSteps: the manager lets its heartbeats be quick ones
// (HeartbeatParams.Quick) but for one full one at least every QuickRun+1
// steps, and makes the next one full when asked (Kick: a replica joined,
// or the listener reconnected), the next two (Rescan: registrations heard
// of), and the next after one that failed.
func TestQuickSteps(t *testing.T) {
	r := newRig(t)
	m := r.add("a")
	asked := func() []bool {
		r.store.mu.Lock()
		defer r.store.mu.Unlock()
		q := r.store.quick
		r.store.quick = nil
		return q
	}
	steps := func(n int) []bool {
		for range n {
			r.store.advance(5 * time.Second)
			r.step("a")
		}
		return asked()
	}
	want := func(quick ...bool) []bool { return quick }
	run := func(n int) []bool { // QuickRun quick, then one full, n times
		var out []bool
		for range n {
			for range QuickRun {
				out = append(out, true)
			}
			out = append(out, false)
		}
		return out
	}
	if got := steps(2 * (QuickRun + 1)); !slices.Equal(got, run(2)) {
		t.Fatalf("quick heartbeats asked for %v, want %v", got, run(2))
	}
	m.Kick()
	if got := steps(2); !slices.Equal(got, want(false, true)) {
		t.Fatalf("after a Kick: %v, want a full one, then quick", got)
	}
	m.Rescan()
	if got := steps(3); !slices.Equal(got, want(false, false, true)) {
		t.Fatalf("after a Rescan: %v, want two full ones, then quick", got)
	}
	m.Rescan()
	m.Kick()
	if got := steps(3); !slices.Equal(got, want(false, false, true)) {
		t.Fatalf("after a Rescan and a Kick: %v, want two full ones, then quick", got)
	}
	r.store.mu.Lock()
	r.store.failBeats = 1
	r.store.mu.Unlock()
	if err := m.Step(context.Background()); err == nil {
		t.Fatal("a step whose heartbeat failed succeeded")
	}
	if got := steps(2); !slices.Equal(got, want(true, false, true)) {
		t.Fatalf("after a failed quick heartbeat: %v, want a full one, then quick", got)
	}
	if got := r.check(); got["a"] != 64 {
		t.Fatalf("a holds %d shards, want 64", got["a"])
	}
}
