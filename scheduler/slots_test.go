package scheduler

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/vigil-run/vigil"
)

// modelWatch is what TestSlotsAgainstModel expects the scheduler to hold
// of one watch.
type modelWatch struct {
	due      int64
	polls    int
	inflight bool
	poked    bool
	// waiting: added while a probe of the watch removed before is in
	// flight; neither due nor taken until that probe is handed back.
	waiting bool
}

// flight is an entry the test holds in flight, with the watch it was
// popped for (a watch removed and added again is another).
type flight struct {
	e *Entry
	w *modelWatch
}

// TestSlotsAgainstModel drives the scheduler with random operations —
// Prime in parts, Add, AddMany, Remove, Take, Poke, pops, hand-backs
// (Reschedule, Retry, Drop), hand-backs of watches removed (and added
// again) meanwhile — and after each compares it with a plain model: what
// it holds, when each watch is due, what it pops first, and the
// invariants of its tables (heap order and positions, the id index, free
// slots, the arena). Ids are of every length, some of hundreds of bytes, so that
// the arena is compacted on the way.
//
// The model states the contract of a watch removed while its probe is in
// flight: that probe's hand-back changes nothing the scheduler holds,
// except that a watch added again meanwhile (a new incarnation, with its
// own due instant and counts) waits for it, neither popped nor taken, and
// is armed at its own due instant once it is handed back. No watch is
// ever popped or taken while a probe of it is in flight.
func TestSlotsAgainstModel(t *testing.T) {
	for seed := range uint64(4) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) { runModel(t, seed) })
	}
}

func runModel(t *testing.T, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 18))
	clock := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	s := New(Config{NowFunc: func() time.Time { return clock }})
	s.compactAt = 4096
	ids := make([]string, 400)
	for i := range ids {
		n := 1 + rng.IntN(30)
		if i%10 == 0 {
			n = 100 + rng.IntN(400)
		}
		ids[i] = fmt.Sprintf("%03d", i) + strings.Repeat("x", n)
	}
	kinds := []vigil.Kind{vigil.KindHTTP, vigil.KindTimer, vigil.KindFolder}
	kindOf := func(id string) vigil.Kind { return kinds[len(id)%len(kinds)] }
	model := map[string]*modelWatch{}
	var flights []flight
	now := func() int64 { return clock.UnixNano() }
	// flying reports whether a probe of id is in flight: then a new
	// incarnation of id waits, and id must not be popped or taken.
	flying := func(id string) bool {
		for _, f := range flights {
			if f.e.ID() == id {
				return true
			}
		}
		return false
	}
	newEntry := func(id string, due int64, polls int) *Entry {
		e := NewEntry(id, kindOf(id), time.Minute, time.Time{}, false)
		e.due = due
		e.SetProgress(vigil.Progress{Polls: polls})
		return e
	}
	// Priming, in three parts.
	var prime []*Entry
	for _, id := range ids[:150] {
		d := now() + rng.Int64N(int64(time.Hour))
		prime = append(prime, newEntry(id, d, 0))
		model[id] = &modelWatch{due: d}
	}
	s.Reserve(len(prime))
	s.Prime(prime[:100])
	s.Prime(prime[100:140])
	s.Prime(prime[140:])
	s.Primed(context.Background(), nopPrune{}, clock)
	check(t, s, model, ids, kindOf)

	compacted := false
	rearmed := 0 // new incarnations armed by their removed one's hand-back
	for op := range 5000 {
		dead := s.dead
		id := ids[rng.IntN(len(ids))]
		w, held := model[id]
		switch r := rng.IntN(100); {
		case r < 20: // Add
			d := now() + rng.Int64N(int64(time.Hour)) - int64(time.Minute)
			if got := s.Add(newEntry(id, d, 3)); got == held {
				t.Fatalf("op %d: Add(%.8s) = %v, holding it %v", op, id, got, held)
			}
			if !held {
				model[id] = &modelWatch{due: d, polls: 3, waiting: flying(id)}
			}
		case r < 24: // AddMany, with a duplicate inside
			var es []*Entry
			for range 3 {
				id := ids[rng.IntN(len(ids))]
				d := now() + rng.Int64N(int64(time.Hour))
				es = append(es, newEntry(id, d, 1), newEntry(id, d+1, 2))
				if _, ok := model[id]; !ok {
					model[id] = &modelWatch{due: d, polls: 1, waiting: flying(id)}
				}
			}
			s.AddMany(es)
		case r < 38: // Remove
			s.Remove(id)
			delete(model, id)
		case r < 44: // Take
			e, mine := s.Take(id, time.Minute)
			want := held && !w.inflight && !w.waiting
			if mine && flying(id) {
				t.Fatalf("op %d: Take(%.8s) took it while a probe of it is in flight", op, id)
			}
			if mine != want || e.ID() != id {
				t.Fatalf("op %d: Take(%.8s) = %.8s, %v; want %v", op, id, e.ID(), mine, want)
			}
			if mine {
				w.inflight = true
				if e.due != w.due || e.Progress().Polls != w.polls || e.Kind() != kindOf(id) {
					t.Fatalf("op %d: Take(%.8s): due %d polls %d kind %s, want %d %d %s", op, id, e.due, e.Progress().Polls, e.Kind(), w.due, w.polls, kindOf(id))
				}
				flights = append(flights, flight{e, w})
			} else {
				s.Retry(e, clock) // a stand-in: changes nothing
			}
		case r < 50: // Poke
			s.Poke(id)
			if held {
				if w.inflight {
					w.poked = true
				} else if w.due > now() {
					w.due = now() // a waiting watch too: due once it is armed
				}
			}
		case r < 72: // pop the first due
			s.mu.Lock()
			jobs := s.popDueLocked(clock, 1)
			s.mu.Unlock()
			var first string
			var fw *modelWatch
			for mid, mw := range model {
				if !mw.inflight && !mw.waiting && mw.due <= now() && (fw == nil || mw.due < fw.due || mw.due == fw.due && mid < first) {
					first, fw = mid, mw
				}
			}
			if fw == nil {
				if len(jobs) != 0 {
					t.Fatalf("op %d: popped %.8s, nothing is due", op, jobs[0].entries[0].ID())
				}
				break
			}
			if len(jobs) != 1 || jobs[0].entries[0].ID() != first {
				t.Fatalf("op %d: popped %v, want %.8s", op, jobs, first)
			}
			if flying(first) {
				t.Fatalf("op %d: popped %.8s while a probe of it is in flight", op, first)
			}
			fw.inflight = true
			flights = append(flights, flight{jobs[0].entries[0], fw})
		case r < 95: // hand one back
			if len(flights) == 0 {
				break
			}
			i := rng.IntN(len(flights))
			f := flights[i]
			flights = append(flights[:i], flights[i+1:]...)
			fid := f.e.ID()
			current := model[fid] == f.w
			switch rng.IntN(3) {
			case 0:
				d := now() + rng.Int64N(int64(time.Hour))
				p := f.e.Progress()
				p.Polls++
				s.Reschedule(f.e, time.Unix(0, d), p)
				if current {
					f.w.polls++
					f.w.due = d
				}
			case 1:
				d := now() + rng.Int64N(int64(time.Hour))
				s.Retry(f.e, time.Unix(0, d))
				if current {
					f.w.due = d
				}
			default:
				s.Drop(f.e)
				if current {
					delete(model, fid)
				}
			}
			if current && model[fid] != nil {
				f.w.inflight = false
				if f.w.poked {
					f.w.poked = false
					f.w.due = min(f.w.due, now())
				}
			}
			if nw := model[fid]; !current && nw != nil {
				// The removed incarnation's probe ended: the new one,
				// which waited for it, is armed as it was added (or
				// poked), whatever the hand-back said.
				if nw.waiting {
					rearmed++
				}
				nw.waiting = false
			}
		default: // time passes
			clock = clock.Add(time.Duration(rng.Int64N(600_000)) * time.Millisecond)
		}
		if s.dead < dead && len(s.slots) > 0 {
			compacted = true
		}
		check(t, s, model, ids, kindOf)
	}
	if !compacted {
		t.Error("the arena was never compacted: the test does not reach it")
	}
	if rearmed == 0 {
		t.Error("no watch added again waited for its removed incarnation's probe: the test does not reach it")
	}
	t.Logf("%d watches added again waited for their removed incarnation's probe", rearmed)
}

// check compares the scheduler with the model and checks its invariants.
func check(t *testing.T, s *Scheduler, model map[string]*modelWatch, ids []string, kindOf func(string) vigil.Kind) {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ids.n != len(model) {
		t.Fatalf("holds %d watches, want %d", s.ids.n, len(model))
	}
	for _, id := range ids {
		k, ok := s.lookup(id)
		w, held := model[id]
		if ok != held {
			t.Fatalf("lookup(%.8s) = %v, want %v", id, ok, held)
		}
		if !ok {
			continue
		}
		x := &s.slots[k]
		if string(s.idBytes(x)) != id || x.due != w.due || int(x.prog.polls) != w.polls || s.kindOf(k) != kindOf(id) ||
			(x.flags&flagInflight != 0) != w.inflight || (x.flags&flagPoked != 0) != w.poked || (x.flags&flagWaiting != 0) != w.waiting ||
			x.flags&(flagFree|flagRemoved) != 0 {
			t.Fatalf("slot of %.8s: %+v (id %.8s, kind %s), want %+v", id, *x, s.idBytes(x), s.kindOf(k), *w)
		}
		if (x.pos >= 0) == (w.inflight || w.waiting) {
			t.Fatalf("%.8s: heap position %d while in flight %v, waiting %v", id, x.pos, w.inflight, w.waiting)
		}
	}
	for i, k := range s.h {
		if s.slots[k].pos != int32(i) || s.slots[k].flags&(flagFree|flagInflight|flagWaiting) != 0 {
			t.Fatalf("heap[%d] = slot %d at position %d, flags %b", i, k, s.slots[k].pos, s.slots[k].flags)
		}
		if i > 0 && s.less(k, s.h[(i-1)/2]) {
			t.Fatalf("heap[%d] is before its parent", i)
		}
	}
	free := 0
	live := 0
	for k := range s.slots {
		x := &s.slots[k]
		if x.flags&flagFree != 0 {
			free++
			continue
		}
		live += int(x.idLen)
		if int(x.idOff+x.idLen) > len(s.arena) {
			t.Fatalf("slot %d: id past the arena", k)
		}
	}
	if free != len(s.free) || live+s.dead != len(s.arena) {
		t.Fatalf("%d free slots, %d listed; %d id bytes live + %d dead, arena %d", free, len(s.free), live, s.dead, len(s.arena))
	}
	removed := 0
	for k := range s.slots {
		if s.slots[k].flags&flagRemoved != 0 {
			removed++
		}
	}
	if removed != len(s.ghosts) {
		t.Fatalf("%d slots removed in flight, %d ghosts", removed, len(s.ghosts))
	}
	for id, k := range s.ghosts {
		if x := &s.slots[k]; x.flags&(flagRemoved|flagInflight) != flagRemoved|flagInflight || string(s.idBytes(x)) != id {
			t.Fatalf("ghost %.8s: slot %d, %+v", id, k, *x)
		}
	}
	n := 0
	for _, b := range s.ids.buckets {
		if b.slot != 0 {
			n++
		}
	}
	if n != s.ids.n {
		t.Fatalf("%d buckets used, %d counted", n, s.ids.n)
	}
}

type nopPrune struct{}

func (nopPrune) Probe(context.Context, *Entry, time.Time, func(string) bool) {}
func (nopPrune) Instant(context.Context, []*Entry, time.Time)                {}
func (nopPrune) Prune(context.Context, time.Time) time.Time                  { return time.Time{} }

// TestObserverTravels: a watch's observer goes out with its entry and
// comes back with it when it is handed back, until Observed lets it go.
func TestObserverTravels(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	s := New(Config{NowFunc: func() time.Time { return now }})
	o := NewObserver()
	e := NewEntry("w", vigil.KindHTTP, time.Minute, time.Time{}, false)
	e.SetDue(now)
	e.SetObserver(o)
	s.Add(e)
	pop := func() *Entry {
		jobs := s.popDueLocked(now, 1)
		if len(jobs) != 1 {
			t.Fatal("nothing popped")
		}
		return jobs[0].entries[0]
	}
	got := pop()
	if got.Observer() != o {
		t.Fatal("the popped entry has lost its observer")
	}
	s.Retry(got, now)
	if got = pop(); got.Observer() != o {
		t.Fatal("the observer did not come back with the entry")
	}
	got.Observed()
	s.Retry(got, now)
	if got = pop(); got.Observer() != nil {
		t.Fatal("an observer let go of came back")
	}
	if len(s.observers) != 0 {
		t.Fatalf("%d observers kept", len(s.observers))
	}
}

// TestStormGivesBack: once every watch is gone the tables start afresh,
// so a storm's million slots do not stay.
func TestStormGivesBack(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	s := New(Config{NowFunc: func() time.Time { return now }, BatchSize: 100})
	var es []*Entry
	for i := range 1000 {
		e := NewEntry(fmt.Sprintf("t%04d", i), vigil.KindTimer, 0, time.Time{}, true)
		e.SetDue(now)
		es = append(es, e)
	}
	s.AddMany(es)
	jobs := s.popDueLocked(now, 1<<30)
	for _, j := range jobs {
		for _, e := range j.entries {
			s.Drop(e)
		}
	}
	if s.Len() != 0 || s.slots != nil || s.arena != nil || s.ids.buckets != nil {
		t.Fatalf("after the storm: %d held, %d slots, %d arena bytes, %d buckets", s.Len(), len(s.slots), len(s.arena), len(s.ids.buckets))
	}
}

// TestStormGivesBackBesidePrune: the retention entry, which a daemon
// holds from its first settlement on, does not keep a storm's slots: once
// it is the only slot left (and not running) the tables start afresh with
// it alone, still due when it was.
func TestStormGivesBackBesidePrune(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	for _, whilePruning := range []bool{false, true} {
		s := New(Config{NowFunc: func() time.Time { return now }, BatchSize: 100})
		s.ArmPrune(now.Add(time.Hour))
		var es []*Entry
		for i := range 1000 {
			e := NewEntry(fmt.Sprintf("t%04d", i), vigil.KindTimer, 0, time.Time{}, true)
			e.SetDue(now)
			es = append(es, e)
		}
		s.AddMany(es)
		jobs := s.popDueLocked(now, 1<<30)
		if whilePruning {
			s.slots[s.pruneSlot].flags |= flagInflight
			s.heapRemove(int(s.slots[s.pruneSlot].pos))
		}
		for _, j := range jobs {
			for _, e := range j.entries {
				s.Drop(e)
			}
		}
		if whilePruning {
			// The running prune's slot is its own until it ends.
			if len(s.slots) != 1001 {
				t.Fatalf("a running prune's slot moved: %d slots", len(s.slots))
			}
			s.runPrune(context.Background(), nextPrune{now.Add(time.Hour)}, s.pruneSlot, now)
		}
		if s.Len() != 0 || len(s.slots) != 1 || len(s.free) != 0 || len(s.h) != 1 || len(s.ids.buckets) != 0 || len(s.arena) != len("\x00prune") {
			t.Fatalf("after the storm (prune running %v): %d held, %d slots, %d free, %d on the heap, %d arena bytes, %d buckets",
				whilePruning, s.Len(), len(s.slots), len(s.free), len(s.h), len(s.arena), len(s.ids.buckets))
		}
		if next, ok := s.NextDue(); !ok || !next.Equal(now.Add(time.Hour)) {
			t.Fatalf("the retention entry is next due %v %v, want in an hour", next, ok)
		}
		// And works on: armed sooner, run, and a new watch beside it.
		s.ArmPrune(now.Add(time.Minute))
		e := NewEntry("w", vigil.KindHTTP, time.Minute, time.Time{}, false)
		e.SetDue(now.Add(2 * time.Minute))
		s.Add(e)
		if next, _ := s.NextDue(); !next.Equal(now.Add(time.Minute)) {
			t.Fatalf("armed sooner, the retention entry is next due %v", next)
		}
		jobs = s.popDueLocked(now.Add(time.Minute), 10)
		if len(jobs) != 1 || jobs[0].entries[0].class&classPrune == 0 {
			t.Fatalf("due at a minute: %d jobs, want the retention entry", len(jobs))
		}
		s.runPrune(context.Background(), nextPrune{}, jobs[0].entries[0].slot, now.Add(time.Minute))
		if _, _, ok := s.Info("w"); !ok || s.Len() != 1 {
			t.Fatal("the watch added beside the retention entry is lost")
		}
	}
}

type nextPrune struct{ next time.Time }

func (nextPrune) Probe(context.Context, *Entry, time.Time, func(string) bool) {}
func (nextPrune) Instant(context.Context, []*Entry, time.Time)                {}
func (p nextPrune) Prune(context.Context, time.Time) time.Time                { return p.next }

// TestRemoveIf: a replica that loses shards forgets exactly their watches,
// and the prune entry stays.
func TestRemoveIf(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	s := New(Config{NowFunc: func() time.Time { return now }})
	for _, id := range []string{"a1", "b1", "a2", "b2", "a3"} {
		e := NewEntry(id, vigil.KindHTTP, time.Minute, time.Time{}, false)
		e.SetDue(now.Add(time.Minute))
		s.Add(e)
	}
	s.Remove("a3")
	s.ArmPrune(now.Add(time.Hour))
	var asked []string
	n := s.RemoveIf(func(id string) bool { asked = append(asked, id); return strings.HasPrefix(id, "a") })
	if n != 2 {
		t.Errorf("RemoveIf removed %d, want 2 (a1, a2)", n)
	}
	slices.Sort(asked)
	if !slices.Equal(asked, []string{"a1", "a2", "b1", "b2"}) {
		t.Errorf("RemoveIf asked about %q, want the four pending watches", asked)
	}
	got := s.IDs(vigil.KindHTTP)
	slices.Sort(got)
	if !slices.Equal(got, []string{"b1", "b2"}) {
		t.Errorf("left %q, want [b1 b2]", got)
	}
	if _, _, ok := s.Info("a1"); ok {
		t.Error("a1 is still known")
	}
}
