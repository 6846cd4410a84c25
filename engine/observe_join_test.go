package engine_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/vigil-run/vigil"
	"github.com/vigil-run/vigil/store/memstore"
	"github.com/vigil-run/vigil/watcher"
	"github.com/vigil-run/vigil/watcher/watchertest"
)

// A registration told that a watch is pending (existing) while another
// registration of it waits for its first observation must hear of the
// outcome: the first may not take it to itself alone (answered at creation,
// nothing mailed).
func TestObservedAnswerReachesAnExistingRegistration(t *testing.T) {
	for _, batch := range []bool{false, true} {
		name := "single"
		if batch {
			name = "batch"
		}
		t.Run(name, func(t *testing.T) {
			started, release := make(chan struct{}), make(chan struct{})
			probe := watchertest.Func(vigil.KindHTTP, func(ctx context.Context, _ watcher.Probe) (vigil.Observation, error) {
				close(started)
				<-release
				return vigil.Observation{Verdict: vigil.VerdictSatisfied, Summary: "ready"}, nil
			})
			v := newEnv(t, envOpts{watchers: []watcher.Watcher{probe}})
			defer runEngine(v)()

			req := vigil.RegisterRequest{Kind: vigil.KindHTTP, Predicate: obj(`{"u":1}`), Recipient: "agent-1"}
			first := registerObserving(t, v, req)
			<-started // the first registration waits for this observation

			second := registerOne(t, v, req, batch)
			if !second.Existing || second.State != vigil.StatePending {
				t.Fatalf("second registration: existing=%v state=%s, want an existing pending watch", second.Existing, second.State)
			}
			close(release)
			w1 := <-first
			if w1 == nil || w1.State != vigil.StateFired {
				t.Fatalf("first registration: %+v, want the fired watch", w1)
			}
			if w1.AnsweredAtCreation {
				t.Error("the watch is answered at creation, though a second registration waits for its message")
			}
			if msgs := v.messages("agent-1"); len(msgs) != 1 {
				t.Fatalf("the recipient's mailbox holds %d messages; want the outcome, once", len(msgs))
			}
		})
	}
}

// When the first observation has claimed the answer (its settling write
// under way) but not written it yet, a registration that matches the
// watch as pending joins it in the store first: the settling write then
// mails the outcome all the same, and the first registration gets the
// watch as it settled, not answered at creation.
func TestObservedAnswerClaimedThenJoinedIsMailed(t *testing.T) {
	for _, batch := range []bool{false, true} {
		name := "single"
		if batch {
			name = "batch"
		}
		t.Run(name, func(t *testing.T) {
			v, st, req, first := observeGated(t, false)
			<-st.settling // claimed: the settling write waits

			w2 := registerOne(t, v, req, batch)
			<-st.existing
			if w2 == nil || !w2.Existing || w2.State != vigil.StatePending {
				t.Fatalf("second registration: %+v, want the existing pending watch", w2)
			}
			close(st.release)
			w1 := <-first
			if w1 == nil || w1.State != vigil.StateFired || w1.AnsweredAtCreation {
				t.Fatalf("first registration: %+v, want the fired watch, not answered at creation", w1)
			}
			if msgs := v.messages("agent-1"); len(msgs) != 1 {
				t.Fatalf("the mailbox holds %d messages; want the outcome, once", len(msgs))
			}
		})
	}
}

// When the first observation has settled the watch quietly already (its
// write committed, the registration waiting not told yet), a registration
// that matched the watch as pending gets the watch as it settled: both
// callers hold the answer, and nothing is mailed.
func TestObservedAnswerWrittenGoesToTheExistingRegistrationToo(t *testing.T) {
	for _, batch := range []bool{false, true} {
		name := "single"
		if batch {
			name = "batch"
		}
		t.Run(name, func(t *testing.T) {
			v, st, req, first := observeGated(t, true)
			<-st.settling // written quietly; the engine not told yet

			// The store says pending to the second registration's read,
			// as a read made just before that write would.
			st.stalePending.Store(true)
			w2 := registerOne(t, v, req, batch)
			<-st.existing
			if w2 == nil || !w2.Existing || w2.State != vigil.StateFired || !w2.AnsweredAtCreation {
				t.Fatalf("second registration: %+v, want the existing watch as it fired", w2)
			}
			close(st.release)
			w1 := <-first
			if w1 == nil || w1.State != vigil.StateFired || !w1.AnsweredAtCreation {
				t.Fatalf("first registration: %+v, want the fired watch answered at creation", w1)
			}
			if msgs := v.messages("agent-1"); len(msgs) != 0 {
				t.Fatalf("the mailbox holds %d messages; both callers hold the answer, want none", len(msgs))
			}
		})
	}
}

// runEngine runs v's engine until the function it returns is called.
func runEngine(v *env) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- v.eng.Run(ctx) }()
	return func() { cancel(); <-done }
}

// registerObserving registers req waiting for its first observation, on a
// goroutine of its own; the answer comes on the channel.
func registerObserving(t *testing.T, v *env, req vigil.RegisterRequest) <-chan *vigil.Watch {
	first := make(chan *vigil.Watch, 1)
	go func() {
		req.Observe = true
		w, err := v.eng.Register(v.ctx, req)
		if err != nil {
			t.Error(err)
		}
		first <- w
	}()
	return first
}

// registerOne registers req alone or as a batch of one and returns the
// answer's watch.
func registerOne(t *testing.T, v *env, req vigil.RegisterRequest, batch bool) *vigil.Watch {
	t.Helper()
	if !batch {
		w, err := v.eng.Register(v.ctx, req)
		if err != nil {
			t.Error(err)
			return nil
		}
		return w
	}
	res, err := v.eng.RegisterBatch(v.ctx, []vigil.RegisterRequest{req})
	if err != nil || len(res) != 1 || res[0].Watch == nil {
		t.Errorf("batch: %v %+v", err, res)
		return nil
	}
	w := res[0].Watch
	w.Existing = res[0].Status == vigil.BatchExisting
	return w
}

// observeGated runs an engine over a gatedSettle store (after as given)
// and a probe that finds an http watch ready, and registers one watch
// observing; it returns the registration and its answer to come.
func observeGated(t *testing.T, after bool) (*env, *gatedSettle, vigil.RegisterRequest, <-chan *vigil.Watch) {
	t.Helper()
	st := &gatedSettle{Store: memstore.New(), after: after, settling: make(chan struct{}), release: make(chan struct{}), existing: make(chan struct{}, 1)}
	probe := watchertest.Func(vigil.KindHTTP, func(context.Context, watcher.Probe) (vigil.Observation, error) {
		return vigil.Observation{Verdict: vigil.VerdictSatisfied, Summary: "ready"}, nil
	})
	v := newEnv(t, envOpts{store: st, watchers: []watcher.Watcher{probe}})
	t.Cleanup(runEngine(v))
	req := vigil.RegisterRequest{Kind: vigil.KindHTTP, Predicate: obj(`{"u":1}`), Recipient: "agent-1"}
	return v, st, req, registerObserving(t, v, req)
}

// gatedSettle holds the first settling write until release, saying so on
// settling (after the write, with after), and says on existing when a
// registration matched a pending watch. With stalePending, a registration
// is answered with the watch it matched as pending, settled or not: what
// a read made just before the settlement answers.
type gatedSettle struct {
	vigil.Store
	once              sync.Once
	after             bool
	settling, release chan struct{}
	existing          chan struct{}
	stalePending      atomic.Bool
}

func (s *gatedSettle) WatchSettle(ctx context.Context, ps []vigil.WatchSettleParams) ([]bool, error) {
	gate := func() {
		s.once.Do(func() {
			close(s.settling)
			<-s.release
		})
	}
	if !s.after {
		gate()
		return s.Store.WatchSettle(ctx, ps)
	}
	won, err := s.Store.WatchSettle(ctx, ps)
	gate()
	return won, err
}

func (s *gatedSettle) WatchCreate(ctx context.Context, p vigil.WatchCreateParams) (*vigil.Watch, error) {
	if w, ok := s.stale(ctx, p); ok {
		s.existing <- struct{}{}
		return w, nil
	}
	w, err := s.Store.WatchCreate(ctx, p)
	if err == nil && w.Existing {
		s.existing <- struct{}{}
	}
	return w, err
}

func (s *gatedSettle) WatchCreateMany(ctx context.Context, ps []vigil.WatchCreateParams) ([]vigil.WatchCreateResult, error) {
	if len(ps) == 1 {
		if w, ok := s.stale(ctx, ps[0]); ok {
			s.existing <- struct{}{}
			return []vigil.WatchCreateResult{{Watch: w}}, nil
		}
	}
	res, err := s.Store.WatchCreateMany(ctx, ps)
	if err == nil && len(res) == 1 && res[0].Watch != nil && res[0].Watch.Existing {
		s.existing <- struct{}{}
	}
	return res, err
}

// stale answers p with the watch of its identity as it was pending, when
// stalePending is set.
func (s *gatedSettle) stale(ctx context.Context, p vigil.WatchCreateParams) (*vigil.Watch, bool) {
	if !s.stalePending.Load() {
		return nil, false
	}
	page, err := s.Store.WatchList(ctx, vigil.WatchListParams{Recipient: p.Watch.Recipient})
	if err != nil {
		return nil, false
	}
	for _, w := range page.Watches {
		if w.Identity == p.Watch.Identity {
			c := *w
			c.State, c.Outcome, c.SettledAt, c.AnsweredAtCreation, c.Existing = vigil.StatePending, nil, time.Time{}, false, true
			return &c, true
		}
	}
	return nil, false
}

// The registration that waits for the first observation still stops
// waiting at ObserveWait after a second registration gave up its claim for
// it: it answers that the watch is pending, as if it had given up itself.
func TestObserveWaitEndsAfterAnExistingRegistration(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		release := make(chan struct{})
		started := make(chan struct{})
		probe := watchertest.Func(vigil.KindHTTP, func(ctx context.Context, _ watcher.Probe) (vigil.Observation, error) {
			close(started)
			<-release
			return vigil.Observation{Verdict: vigil.VerdictSatisfied, Summary: "ready"}, nil
		})
		v := newEnv(t, envOpts{watchers: []watcher.Watcher{probe}})
		stop := runEngine(v)
		defer func() { close(release); stop() }()

		req := vigil.RegisterRequest{Kind: vigil.KindHTTP, Predicate: obj(`{"u":1}`), Recipient: "agent-1"}
		first := registerObserving(t, v, req)
		<-started
		if w := registerOne(t, v, req, false); w == nil || !w.Existing {
			t.Fatalf("second registration: %+v", w)
		}
		time.Sleep(vigil.DefaultLimits().ObserveWait + time.Second)
		synctest.Wait()
		select {
		case w := <-first:
			if w == nil || w.State != vigil.StatePending {
				t.Fatalf("first registration: %+v, want the pending watch", w)
			}
		default:
			t.Fatal("the first registration still waits for the observation after ObserveWait")
		}
	})
}

// joinCounter counts the store's WatchJoin writes.
type joinCounter struct {
	vigil.Store
	joins atomic.Int64
}

func (s *joinCounter) WatchJoin(ctx context.Context, id string) (bool, error) {
	s.joins.Add(1)
	return s.Store.WatchJoin(ctx, id)
}

// TestJoinWritesOnlyForWatchesProbedAtOnce: a registration answered with
// an existing watch joins it in the store (a write) only when a
// registration of it may wait for its first observation: a watch probed
// as soon as it is armed. A timer has no first observation; joining one
// cost a durable write per item of a batch registered again.
func TestJoinWritesOnlyForWatchesProbedAtOnce(t *testing.T) {
	st := &joinCounter{Store: memstore.New()}
	probe := watchertest.Func(vigil.KindHTTP, func(context.Context, watcher.Probe) (vigil.Observation, error) {
		return vigil.Observation{Verdict: vigil.VerdictPending, Summary: "not yet"}, nil
	})
	v := newEnv(t, envOpts{store: st, watchers: []watcher.Watcher{probe}})
	timer := vigil.RegisterRequest{Kind: vigil.KindTimer, Predicate: obj(`{"in":"10m"}`), Recipient: "agent-1"}
	registerOne(t, v, timer, false)
	for _, batch := range []bool{false, true} {
		if w := registerOne(t, v, timer, batch); w == nil || !w.Existing {
			t.Fatalf("the timer registered again (batch %v): %+v, want existing", batch, w)
		}
	}
	if n := st.joins.Load(); n != 0 {
		t.Errorf("registering an existing timer again wrote %d joins, want none", n)
	}
	check := vigil.RegisterRequest{Kind: vigil.KindHTTP, Predicate: obj(`{"u":1}`), Recipient: "agent-1"}
	registerOne(t, v, check, false)
	if w := registerOne(t, v, check, true); w == nil || !w.Existing {
		t.Fatalf("the http watch registered again: %+v, want existing", w)
	}
	if n := st.joins.Load(); n != 1 {
		t.Errorf("registering an existing http watch again wrote %d joins, want 1", n)
	}
}

// failingJoin fails the store's next WatchJoin when asked to, writing
// nothing, and counts the joins written.
type failingJoin struct {
	vigil.Store
	fail   atomic.Bool
	joined atomic.Int64
}

func (s *failingJoin) WatchJoin(ctx context.Context, id string) (bool, error) {
	if s.fail.CompareAndSwap(true, false) {
		return false, errStumble
	}
	ok, err := s.Store.WatchJoin(ctx, id)
	if ok {
		s.joined.Add(1)
	}
	return ok, err
}

// TestFailedJoinIsAnErrorToRetry: a registration answered with an
// existing pending watch whose join could not be written is answered
// with an error the caller can retry (unavailable), alone or as an item
// of a batch; the retry joins, with its idempotency key too (whose
// ledger holds the existing answer). It was answered existing, as if
// joined: a registration waiting for the watch's first observation then
// took the outcome to itself, and this caller's mailbox never got it.
func TestFailedJoinIsAnErrorToRetry(t *testing.T) {
	t.Parallel()
	st := &failingJoin{Store: memstore.New()}
	probe := watchertest.Func(vigil.KindHTTP, func(context.Context, watcher.Probe) (vigil.Observation, error) {
		return vigil.Observation{Verdict: vigil.VerdictPending, Summary: "not yet"}, nil
	})
	v := newEnv(t, envOpts{store: st, watchers: []watcher.Watcher{probe}})
	for i, c := range []struct {
		name  string
		batch bool
		key   string
	}{{"single", false, ""}, {"batch", true, ""}, {"idempotency key", false, "turn-1"}, {"batch with idempotency key", true, "turn-2"}} {
		req := vigil.RegisterRequest{Kind: vigil.KindHTTP, Predicate: obj(fmt.Sprintf(`{"u":%d}`, i)), Recipient: "agent-1"}
		registerOne(t, v, req, false)
		req.IdempotencyKey = c.key
		st.fail.Store(true)
		var err error
		if c.batch {
			var res []vigil.BatchResult
			res, err = v.eng.RegisterBatch(v.ctx, []vigil.RegisterRequest{req})
			if err != nil || len(res) != 1 {
				t.Fatalf("%s: RegisterBatch = %+v, %v", c.name, res, err)
			}
			if res[0].Status != vigil.BatchRefused {
				t.Fatalf("%s: the item whose join failed is %s (%+v), want refused", c.name, res[0].Status, res[0].Watch)
			}
			err = res[0].Err
		} else {
			var w *vigil.Watch
			w, err = v.eng.Register(v.ctx, req)
			if err == nil {
				t.Fatalf("%s: a registration whose join failed is answered %+v (existing %v), want an error", c.name, w, w.Existing)
			}
		}
		if code := vigil.ErrorCode(err); code != vigil.CodeUnavailable {
			t.Fatalf("%s: the join failed: code %q (%v), want %q", c.name, code, err, vigil.CodeUnavailable)
		}
		before := st.joined.Load()
		if w := registerOne(t, v, req, c.batch); w == nil || !w.Existing {
			t.Fatalf("%s: the retry: %+v, want existing", c.name, w)
		}
		if st.joined.Load() != before+1 {
			t.Errorf("%s: the retry wrote no join", c.name)
		}
	}
}
