package engine_test

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/vigil-run/vigil"
	"github.com/vigil-run/vigil/engine"
	"github.com/vigil-run/vigil/store/memstore"
	"github.com/vigil-run/vigil/store/sqlite"
	"github.com/vigil-run/vigil/watcher"
	"github.com/vigil-run/vigil/watcher/watchertest"
)

// slowProbes is a fake http watcher whose probes of alice's watches (ids
// starting "alice") take 10 minutes, as a slow command's may, and whose
// other probes answer at once. It records when each watch was first
// probed and how many of alice's probes ran at once.
type slowProbes struct {
	*watchertest.Fake
	mu      sync.Mutex
	first   map[string]time.Time
	running int
	most    int
}

func newSlowProbes() *slowProbes {
	sp := &slowProbes{first: map[string]time.Time{}}
	sp.Fake = watchertest.Func(vigil.KindHTTP, func(ctx context.Context, p watcher.Probe) (vigil.Observation, error) {
		slow := strings.HasPrefix(p.WatchID, "alice")
		sp.mu.Lock()
		if _, ok := sp.first[p.WatchID]; !ok {
			sp.first[p.WatchID] = time.Now()
		}
		if slow {
			sp.running++
			sp.most = max(sp.most, sp.running)
		}
		sp.mu.Unlock()
		if slow {
			select {
			case <-time.After(10 * time.Minute):
			case <-ctx.Done():
			}
			sp.mu.Lock()
			sp.running--
			sp.mu.Unlock()
		}
		return vigil.Observation{Verdict: vigil.VerdictPending, Summary: "not yet"}, nil
	})
	return sp
}

func (sp *slowProbes) probedAt(id string) (time.Time, bool) {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	t, ok := sp.first[id]
	return t, ok
}

// runScheduler primes and runs s until the returned stop is called.
func runScheduler(t *testing.T, s *schedRig) (stop func()) {
	t.Helper()
	if err := s.Prime(context.Background()); err != nil {
		t.Fatal(err)
	}
	return runLoop(t, s)
}

// runLoop runs s until the returned stop is called or the test ends.
func runLoop(t *testing.T, s *schedRig) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- s.Run(ctx) }()
	stop = sync.OnceFunc(func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	})
	t.Cleanup(stop)
	return stop
}

func addFor(t *testing.T, st vigil.Store, s *schedRig, id, recipient string, every time.Duration) {
	t.Helper()
	w := newWatch(id, every, time.Now().UTC())
	w.Recipient = recipient
	w.Deadline = w.CreatedAt.Add(24 * time.Hour)
	create(t, st, w)
	s.Add(w, nil)
}

// TestSlowRecipientLeavesWorkers: alice's 50 watches are due at once and
// each probe takes 10 minutes; she holds at most half the probe workers,
// so bob's watch, due a second later, is probed at once; and each of
// alice's watches is probed in its turn, none starved.
func TestSlowRecipientLeavesWorkers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := memstore.New()
		sp := newSlowProbes()
		s := newSched(schedConfig{Store: st, Watchers: watcher.NewRegistry(sp)})
		stop := runScheduler(t, s)
		for i := range 50 {
			addFor(t, st, s, fmt.Sprintf("alice-%02d", i), "alice", 30*time.Second)
		}
		time.Sleep(time.Second)
		addFor(t, st, s, "bob-1", "bob", 30*time.Second)
		due := time.Now()
		synctest.Wait()
		if at, ok := sp.probedAt("bob-1"); !ok || at.Sub(due) > time.Second {
			t.Fatalf("bob's due probe: started %v, %v after it was due; want within 1s while alice's run", ok, at.Sub(due))
		}
		// 50 probes of 10 minutes, 4 at a time: every one has started
		// within 13 rounds.
		time.Sleep(13 * 10 * time.Minute)
		synctest.Wait()
		for i := range 50 {
			if _, ok := sp.probedAt(fmt.Sprintf("alice-%02d", i)); !ok {
				t.Errorf("alice-%02d was never probed", i)
			}
		}
		sp.mu.Lock()
		most := sp.most
		sp.mu.Unlock()
		if want := engine.DefaultWorkers / 2; most != want {
			t.Errorf("alice had %d probes running at once, want half the workers, %d", most, want)
		}
		if n := s.Len(); n != 51 {
			t.Errorf("Len() = %d, want 51 pending watches", n)
		}
		stop()
	})
}

// TestParkedProbes: a probe waiting for its recipient's turn can be
// cancelled (it is then never probed and its turn passes to the next), and
// one still waiting when the loop stops is kept, due, for the next run.
func TestParkedProbes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := memstore.New()
		sp := newSlowProbes()
		s := newSched(schedConfig{Store: st, Watchers: watcher.NewRegistry(sp), Workers: 2})
		stop := runScheduler(t, s)
		var ids []string
		for i := range 4 {
			ids = append(ids, fmt.Sprintf("alice-%d", i))
			addFor(t, st, s, ids[i], "alice", time.Hour)
		}
		synctest.Wait()
		var waiting []string
		for _, id := range ids {
			if !probed(sp, id) {
				waiting = append(waiting, id)
			}
		}
		if len(waiting) != 3 {
			t.Fatalf("%d of alice's 4 probes started with 2 workers, want 1", 4-len(waiting))
		}
		s.Remove(waiting[0])
		// The first probe ends at 10 min and hands its turn on.
		time.Sleep(11 * time.Minute)
		synctest.Wait()
		if probed(sp, waiting[0]) {
			t.Fatalf("%s was probed after it was cancelled", waiting[0])
		}
		if n := btoi(probed(sp, waiting[1])) + btoi(probed(sp, waiting[2])); n != 1 {
			t.Fatalf("%d of the two waiting probes started when the first ended, want 1", n)
		}
		stop()
		if n := s.Len(); n != 3 {
			t.Fatalf("Len() after a cancel = %d, want 3", n)
		}
		next, ok := s.NextDue()
		if !ok || next.After(time.Now()) {
			t.Fatalf("NextDue() after the loop stopped = %v, %v; want the waiting probe, overdue", next, ok)
		}
		runLoop(t, s)
		time.Sleep(30 * time.Minute)
		synctest.Wait()
		if probed(sp, waiting[0]) {
			t.Errorf("%s was probed after it was cancelled", waiting[0])
		}
		for _, id := range waiting[1:] {
			if !probed(sp, id) {
				t.Errorf("%s, waiting when the loop stopped, was not probed in the next run", id)
			}
		}
	})
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

func probed(sp *slowProbes, id string) bool {
	_, ok := sp.probedAt(id)
	return ok
}

// BenchmarkFairDueProbe measures the bound of the probe pool's fairness on
// a real SQLite store: alice has n probes due, each of which hangs, and
// bob one probe due at the same instant, after hers in the heap. Alice's
// probes take half the 8 workers and hang; the other half read the rest of
// her rows, park them, and reach bob's. An op is one start of the loop
// until bob's probe starts; ms-to-bob is that wait, µs-per-parked its
// share per probe of alice's parked ahead of bob's.
func BenchmarkFairDueProbe(b *testing.B) {
	for _, n := range []int{0, 1000} {
		b.Run(fmt.Sprintf("ahead=%d", n), func(b *testing.B) {
			ctx := context.Background()
			st, err := sqlite.Open(ctx, filepath.Join(b.TempDir(), "vigil.db"), nil)
			if err != nil {
				b.Fatal(err)
			}
			defer st.Close()
			now := time.Now().UTC()
			for i := range n + 1 {
				id, r := fmt.Sprintf("alice-%05d", i), "alice"
				if i == n {
					id, r = "bob", "bob"
				}
				w := newWatch(id, time.Hour, now)
				w.Recipient = r
				create(b, st, w)
			}
			bobStarted := make(chan struct{}, 1)
			fake := watchertest.Func(vigil.KindHTTP, func(ctx context.Context, p watcher.Probe) (vigil.Observation, error) {
				if p.WatchID == "bob" {
					bobStarted <- struct{}{}
					return vigil.Observation{Verdict: vigil.VerdictPending}, nil
				}
				<-ctx.Done()
				return vigil.Observation{}, ctx.Err()
			})
			var waited time.Duration
			for b.Loop() {
				s := newSched(schedConfig{Store: st, Watchers: watcher.NewRegistry(fake),
					JitterFunc: func(time.Duration) time.Duration { return 0 }})
				if err := s.Prime(ctx); err != nil {
					b.Fatal(err)
				}
				runCtx, cancel := context.WithCancel(ctx)
				done := make(chan error)
				start := time.Now()
				go func() { done <- s.Run(runCtx) }()
				<-bobStarted
				waited += time.Since(start)
				cancel()
				<-done
			}
			per := waited / time.Duration(b.N)
			b.ReportMetric(float64(per)/1e6, "ms-to-bob")
			if ahead := n - engine.DefaultWorkers/2; ahead > 0 {
				b.ReportMetric(float64(per)/1e3/float64(ahead), "µs-per-parked")
			}
		})
	}
}
