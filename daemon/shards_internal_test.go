package daemon

import (
	"context"
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/vigil-run/vigil"
	"github.com/vigil-run/vigil/deliver"
	"github.com/vigil-run/vigil/engine"
	"github.com/vigil-run/vigil/scheduler"
	"github.com/vigil-run/vigil/store/memstore"
	"github.com/vigil-run/vigil/watcher"
	"github.com/vigil-run/vigil/watcher/timer"

	"github.com/vigil-run/vigil/internal/lease"
	"github.com/vigil-run/vigil/internal/pgtest"
	"github.com/vigil-run/vigil/store/postgres"
)

// TestRepairStartsAtTheHorizon: after a lease step, the next repair scan
// reads from the step's horizon (less repairSlack), the start of the
// oldest transaction that had written then, and from the step's clock
// less repairMargin when the horizon is unknown.
func TestRepairStartsAtTheHorizon(t *testing.T) {
	st, err := postgres.Open(t.Context(), pgtest.Schema(t, "vigil_repair"), &postgres.Options{MaxConns: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	s := &shards{pg: st, refused: st.Refused}
	if !s.repairSince().IsZero() {
		t.Fatalf("before any step the scan reads from %v, want nothing (the shards were loaded whole)", s.repairSince())
	}
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	horizon := now.Add(-time.Minute)
	s.repair(t.Context(), nil, postgres.Peers{Now: now, Horizon: horizon})
	if got, want := s.repairSince(), horizon.Add(-repairSlack); !got.Equal(want) {
		t.Errorf("after a step with a horizon a minute back, the scan reads from %v, want %v", got, want)
	}
	s.repair(t.Context(), nil, postgres.Peers{Now: now})
	if got, want := s.repairSince(), now.Add(-repairMargin); !got.Equal(want) {
		t.Errorf("after a step with no horizon, the scan reads from %v, want %v", got, want)
	}
	s.repair(t.Context(), nil, postgres.Peers{Now: now.Add(time.Minute), Quick: true})
	if got, want := s.repairSince(), now.Add(-repairMargin); !got.Equal(want) {
		t.Errorf("after a quick step (no scan), the next scan reads from %v, want %v (where this one would have)", got, want)
	}
}

// askedStore records whether each heartbeat asked could be a quick one.
type askedStore struct {
	*postgres.Store
	quick []bool
}

func (a *askedStore) Heartbeat(ctx context.Context, hp postgres.HeartbeatParams) (postgres.Peers, error) {
	a.quick = append(a.quick, hp.Quick)
	return a.Store.Heartbeat(ctx, hp)
}

// TestHeardRegistrationRescans: the two lease steps after a registration
// in a held shard was heard of, queued or dropped (the queue of wake-ups
// full), ask for full heartbeats, whose repair scans cover it; one after
// nothing, or only a cancel, was heard asks for a quick one.
func TestHeardRegistrationRescans(t *testing.T) {
	st, err := postgres.Open(t.Context(), pgtest.Schema(t, "vigil_rescan"), &postgres.Options{MaxConns: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	as := &askedStore{Store: st}
	mgr, err := lease.New(lease.Config{Store: as, Replica: "r", Shards: postgres.Shards})
	if err != nil {
		t.Fatal(err)
	}
	s := &shards{pg: st, mgr: mgr, refused: st.Refused, ids: make(chan heardWatch, 1), owedKick: make(chan struct{}, 1), log: slog.New(slog.DiscardHandler)}
	step := func() bool {
		t.Helper()
		as.quick = nil
		if err := mgr.Step(t.Context()); err != nil {
			t.Fatal(err)
		}
		return as.quick[0]
	}
	step() // r takes every shard
	if len(mgr.Held()) != postgres.Shards {
		t.Fatalf("r holds %d shards, want all", len(mgr.Held()))
	}
	if !step() {
		t.Fatal("a step after nothing was heard asked for a full heartbeat")
	}
	reg := postgres.Event{Kind: postgres.EventWatch, WatchID: "w-one"}
	s.heard(reg) // queued
	if step() {
		t.Fatal("the step after a registration was heard of asked for a quick heartbeat, whose repair scan would not cover it")
	}
	if step() {
		t.Fatal("the second step after a registration was heard of asked for a quick heartbeat (its scan reads again the last rows the first read)")
	}
	if !step() {
		t.Fatal("the third step after a registration was heard of asked for a full heartbeat")
	}
	s.heard(postgres.Event{Kind: postgres.EventWatch, WatchID: "w-two", Gone: true}) // a cancel: dropped, the queue is full
	if !step() {
		t.Fatal("the step after a cancel was heard of asked for a full heartbeat")
	}
	s.heard(reg) // dropped: the queue is full
	if step() {
		t.Fatal("the step after a registration's wake-up was dropped asked for a quick heartbeat")
	}
}

// TestRepairGoesOnWhereTheScanCut: a step whose scan read only part of a
// shard's new rows (postgres.Peers.PendingMore) makes the next scan start
// there, even when the horizon is later; one that cut nothing, or cut
// after the horizon, leaves the horizon's start.
func TestRepairGoesOnWhereTheScanCut(t *testing.T) {
	st, err := postgres.Open(t.Context(), pgtest.Schema(t, "vigil_repair_cut"), &postgres.Options{MaxConns: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	s := &shards{pg: st, refused: st.Refused}
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	horizon, cut := now.Add(-time.Second), now.Add(-time.Minute)
	s.repair(t.Context(), nil, postgres.Peers{Now: now, Horizon: horizon, PendingMore: cut})
	if got := s.repairSince(); !got.Equal(cut) {
		t.Errorf("after a step whose scan was cut a minute back, the next reads from %v, want %v", got, cut)
	}
	s.repair(t.Context(), nil, postgres.Peers{Now: now, Horizon: horizon, PendingMore: now})
	if got, want := s.repairSince(), horizon.Add(-repairSlack); !got.Equal(want) {
		t.Errorf("after a step cut after its horizon, the next reads from %v, want %v", got, want)
	}
}

// TestRepairLooksAgain: a watch a fenced write refused while it was still
// scheduled (the write had not returned, and the engine drops it when it
// does) is looked at again at the next step, not forgotten; and the
// watches a step could not read (the database failing, as it does when
// notifications are lost) are looked at again at the next, whose scan no
// longer reads them.
func TestRepairLooksAgain(t *testing.T) {
	st, err := postgres.Open(t.Context(), pgtest.Schema(t, "vigil_repair"), &postgres.Options{MaxConns: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	sched := scheduler.New(scheduler.Config{})
	sched.Add(scheduler.NewEntry("w-refused", vigil.KindTimer, 0, time.Now().Add(time.Hour), true))
	refused := []string{"w-refused"}
	s := &shards{pg: st, sched: sched, log: slog.New(slog.DiscardHandler), refused: func() []string {
		out := refused
		refused = nil
		return out
	}}
	now := time.Now()
	s.repair(t.Context(), nil, postgres.Peers{Now: now, Horizon: now})
	if !slices.Equal(s.again, []string{"w-refused"}) {
		t.Fatalf("after a refusal of a watch still scheduled, the next step looks at %v, want [w-refused]", s.again)
	}
	// The refused write returns: the engine drops the watch. The store
	// fails from now on.
	sched.Remove("w-refused")
	st.Close()
	s.repair(t.Context(), nil, postgres.Peers{Now: now, Horizon: now, Pending: []string{"w-lost"}})
	slices.Sort(s.again)
	if !slices.Equal(s.again, []string{"w-lost", "w-refused"}) {
		t.Fatalf("after a step that could not read them, the next looks at %v, want [w-lost w-refused]", s.again)
	}
	s.repair(t.Context(), nil, postgres.Peers{Now: now, Horizon: now})
	slices.Sort(s.again)
	if !slices.Equal(s.again, []string{"w-lost", "w-refused"}) {
		t.Fatalf("after a second step that could not read them, the next looks at %v, want both still", s.again)
	}
}

// TestLateRegistrationAfterCancel: a watch heard cancelled, then heard
// registered (a registration's event follows its commit, and a cancel
// made on another replica in between may be heard first), is not armed
// from the late event; a watch heard registered alone is.
func TestLateRegistrationAfterCancel(t *testing.T) {
	sched := scheduler.New(scheduler.Config{})
	eng := engine.New(engine.Config{Store: memstore.New(), Watchers: watcher.NewRegistry(timer.New(timer.Config{})), Scheduler: sched})
	s := &shards{sched: sched, eng: eng, log: slog.New(slog.DiscardHandler)}
	now := time.Now()
	mk := func(id string) *vigil.Watch {
		return &vigil.Watch{ID: id, Kind: vigil.KindTimer, Recipient: "r", State: vigil.StatePending, Mode: vigil.ModeUntil,
			Predicate: []byte(`{"at":"` + vigil.FormatTime(now.Add(time.Hour)) + `"}`), CreatedAt: now, Deadline: now.Add(2 * time.Hour)}
	}
	if err := s.take(t.Context(), []heardWatch{{id: "w-cancelled", gone: true}}); err != nil {
		t.Fatal(err)
	}
	if err := s.take(t.Context(), []heardWatch{{id: "w-cancelled", w: mk("w-cancelled")}, {id: "w-new", w: mk("w-new")}}); err != nil {
		t.Fatal(err)
	}
	if _, armed := sched.Live("w-cancelled"); armed {
		t.Error("a watch heard cancelled was armed by its registration's event heard after")
	}
	if _, armed := sched.Live("w-new"); !armed {
		t.Error("a watch heard registered was not armed")
	}
}

// TestOwedLookedForAgain: an outcome another replica settled in a shard
// held here (a completion), heard of but whose row could not be read (the
// database failing), is looked for again by owing (deliverElsewhere),
// from when it was heard: the repair scan finds registrations only, so
// nothing else would deliver it.
func TestOwedLookedForAgain(t *testing.T) {
	st, err := postgres.Open(t.Context(), pgtest.Schema(t, "vigil_owed"), &postgres.Options{MaxConns: 1})
	if err != nil {
		t.Fatal(err)
	}
	st.Close() // every read fails
	sched := scheduler.New(scheduler.Config{})
	eng := engine.New(engine.Config{Store: memstore.New(), Watchers: watcher.NewRegistry(timer.New(timer.Config{})), Scheduler: sched})
	disp := deliver.New(deliver.Config{Store: memstore.New(), Channels: map[string]deliver.Channel{}})
	s := &shards{pg: st, sched: sched, eng: eng, disp: disp, log: slog.New(slog.DiscardHandler), owedKick: make(chan struct{}, 1)}
	at := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	if err := s.take(t.Context(), []heardWatch{{id: "w-done", gone: true, message: "m-done", at: at}}); err == nil {
		t.Fatal("take read the owed watch from a closed store")
	}
	if got, want := s.owedSince.Load(), at.Add(-repairMargin).UnixNano(); got != want {
		t.Fatalf("after the owed outcome could not be read, owing looks from %v, want %v (from when it was heard)", time.Unix(0, got).UTC(), time.Unix(0, want).UTC())
	}
	select {
	case <-s.owedKick:
	default:
		t.Fatal("owing was not woken to look for the outcome not handed over")
	}
}
