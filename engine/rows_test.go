package engine_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/vigil-run/vigil"
	"github.com/vigil-run/vigil/store/memstore"
	"github.com/vigil-run/vigil/watcher"
	"github.com/vigil-run/vigil/watcher/watchertest"
)

var r0 = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

// TestWrongKindSettlesErrored: a predicate routed to the wrong watcher is
// a bug that no later probe will fix: the watch settles errored at its
// first probe, with the reason in its outcome, instead of staying pending
// as "unavailable: internal error".
func TestWrongKindSettlesErrored(t *testing.T) {
	t.Parallel()
	// A probed kind runs alone; an instant kind (timer) in a batch.
	for _, kind := range []vigil.Kind{vigil.KindHTTP, vigil.KindTimer} {
		t.Run(string(kind), func(t *testing.T) {
			t.Parallel()
			st := memstore.New()
			wrong := watchertest.Func(kind, func(_ context.Context, p watcher.Probe) (vigil.Observation, error) {
				return vigil.Observation{}, watcher.CheckKind(p, vigil.KindTCP)
			})
			s := newSched(schedConfig{Store: st, Watchers: watcher.NewRegistry(wrong), NowFunc: func() time.Time { return r0 }})
			ctx := context.Background()
			if err := s.Prime(ctx); err != nil {
				t.Fatal(err)
			}
			w := newWatch("w1", time.Minute, r0)
			w.Kind = kind
			create(t, st, w)
			s.Add(w, nil)
			s.Tick(ctx, r0)
			got, err := st.WatchGet(ctx, "w1")
			if err != nil {
				t.Fatal(err)
			}
			if got.State != vigil.StateErrored || got.Outcome == nil || !strings.Contains(got.Outcome.Sentence, "wrong kind") {
				t.Fatalf("after one probe routed to the wrong watcher: %s %+v; want errored saying why", got.State, got.Outcome)
			}
			if _, _, ok := s.Info("w1"); ok {
				t.Error("the errored watch is still scheduled")
			}
		})
	}
}

// TestUnknownKindExpiresAtDeadline: a row of a kind this build has no
// watcher for is left untouched while its deadline is ahead, and expires
// when it passes, saying no watcher for its kind ran: a deadline is always
// delivered. One without a deadline stays untouched; one whose deadline
// passed while vigil was down expires at the start.
func TestUnknownKindExpiresAtDeadline(t *testing.T) {
	t.Parallel()
	st := memstore.New()
	ctx := context.Background()
	holo := func(id string, deadline time.Time) *vigil.Watch {
		w := newWatch(id, time.Minute, r0.Add(-time.Hour))
		w.Kind, w.Deadline = "hologram", deadline
		create(t, st, w)
		return w
	}
	holo("ahead", r0.Add(time.Hour))
	holo("standing", time.Time{})
	holo("overdue", r0.Add(-time.Minute))
	now := r0
	s := newSched(schedConfig{Store: st, Watchers: watcher.NewRegistry(watchertest.NeverSettles(vigil.KindHTTP)),
		NowFunc: func() time.Time { return now }})
	if err := s.Prime(ctx); err != nil {
		t.Fatal(err)
	}
	state := func(id string) *vigil.Watch {
		t.Helper()
		w, err := st.WatchGet(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		return w
	}
	s.Tick(ctx, now)
	if w := state("overdue"); w.State != vigil.StateExpired || w.Outcome.Reason != "no_watcher" || !strings.Contains(w.Outcome.Sentence, `no watcher for kind "hologram"`) {
		t.Errorf("a row of an unknown kind past its deadline at start: %s %+v; want expired saying no watcher ran", w.State, w.Outcome)
	}
	now = r0.Add(30 * time.Minute)
	s.Tick(ctx, now)
	if w := state("ahead"); w.State != vigil.StatePending || w.LastObservation != nil || w.Polls != 0 {
		t.Fatalf("before its deadline: %s, %d polls, %+v; want untouched", w.State, w.Polls, w.LastObservation)
	}
	if next, ok := s.NextDue(); !ok || !next.Equal(r0.Add(time.Hour)) {
		t.Errorf("next due %v, %v; want the unknown kind's deadline, %v", next, ok, r0.Add(time.Hour))
	}
	now = r0.Add(time.Hour)
	s.Tick(ctx, now)
	w := state("ahead")
	if w.State != vigil.StateExpired || w.Outcome.Reason != "no_watcher" || !strings.Contains(w.Outcome.Sentence, `no watcher for kind "hologram" ran in this build`) {
		t.Fatalf("at its deadline: %s %+v; want expired saying no watcher ran", w.State, w.Outcome)
	}
	if w := state("standing"); w.State != vigil.StatePending {
		t.Errorf("a row of an unknown kind without a deadline: %s; want untouched", w.State)
	}
	zero := int64(0)
	page, _ := st.MessagesRead(ctx, vigil.MessagesReadParams{Recipient: "r", After: &zero})
	if len(page.Messages) != 2 {
		t.Errorf("%d messages; want one per expired watch (2)", len(page.Messages))
	}
}

// unreadableStore reads the rows named in bad as a store reads a row
// with a column that does not decode: what could be read, and why not
// the rest.
type unreadableStore struct {
	vigil.Store
	bad map[string]string // id -> reason
}

func (s unreadableStore) mark(w *vigil.Watch) *vigil.Watch {
	if r, ok := s.bad[w.ID]; ok {
		w.Unreadable, w.Labels = r, nil
	}
	return w
}

func (s unreadableStore) WatchGet(ctx context.Context, id string) (*vigil.Watch, error) {
	w, err := s.Store.WatchGet(ctx, id)
	if err != nil {
		return nil, err
	}
	return s.mark(w), nil
}

func (s unreadableStore) WatchGetMany(ctx context.Context, ids []string) ([]*vigil.Watch, error) {
	ws, err := s.Store.WatchGetMany(ctx, ids)
	for _, w := range ws {
		s.mark(w)
	}
	return ws, err
}

func (s unreadableStore) WatchListPending(ctx context.Context) ([]vigil.ScheduleEntry, error) {
	es, err := s.Store.WatchListPending(ctx)
	for i := range es {
		if r, ok := s.bad[es[i].ID]; ok && strings.Contains(r, "deadline") {
			es[i].Unreadable, es[i].Deadline, es[i].Every = r, time.Time{}, 0
		}
	}
	return es, err
}

// TestUnreadableRowSettlesErroredOnce: a row that cannot be read is never
// probed: its first turn settles it errored with the reason, once, and
// nothing is scheduled for it after. One whose schedule columns cannot be
// read is armed at once; the others run as usual.
func TestUnreadableRowSettlesErroredOnce(t *testing.T) {
	t.Parallel()
	mem := memstore.New()
	st := unreadableStore{Store: mem, bad: map[string]string{
		"probed":  "labels: invalid character 'b' looking for beginning of value",
		"timer":   "labels: invalid character 'b' looking for beginning of value",
		"primed":  "deadline: holds text, not a whole number",
		"healthy": "",
	}}
	delete(st.bad, "healthy")
	ctx := context.Background()
	for _, id := range []string{"probed", "primed", "healthy"} {
		create(t, mem, newWatch(id, time.Minute, r0))
	}
	tw := newWatch("timer", 0, r0)
	tw.Kind, tw.StartAt = vigil.KindTimer, r0.Add(time.Minute)
	create(t, mem, tw)
	fake := watchertest.NeverSettles(vigil.KindHTTP)
	timerFake := watchertest.NeverSettles(vigil.KindTimer)
	s := newSched(schedConfig{Store: st, Watchers: watcher.NewRegistry(fake, timerFake), NowFunc: func() time.Time { return r0 },
		JitterFunc: func(time.Duration) time.Duration { return 0 }})
	if err := s.Prime(ctx); err != nil {
		t.Fatal(err)
	}
	if next, ok := s.NextDue(); !ok || next.After(r0) {
		t.Fatalf("next due %v; want the unreadable row armed at once", next)
	}
	for _, at := range []time.Time{r0, r0.Add(time.Minute), r0.Add(2 * time.Minute), r0.Add(3 * time.Minute)} {
		s.Tick(ctx, at)
	}
	for _, id := range []string{"probed", "timer", "primed"} {
		w, err := mem.WatchGet(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if w.State != vigil.StateErrored || w.Outcome.Reason != "unreadable" || !strings.Contains(w.Outcome.Sentence, st.bad[id]) {
			t.Errorf("%s: %s %+v; want errored, reason unreadable, saying why", id, w.State, w.Outcome)
		}
		if _, _, ok := s.Info(id); ok {
			t.Errorf("%s is still scheduled after it settled", id)
		}
		if n := fake.Probes(id) + timerFake.Probes(id); n != 0 {
			t.Errorf("%s was probed %d times; an unreadable row is never probed", id, n)
		}
	}
	if w, _ := mem.WatchGet(ctx, "healthy"); w.State != vigil.StatePending || fake.Probes("healthy") < 3 {
		t.Errorf("the healthy watch beside them: %s after %d probes; want pending and probed", w.State, fake.Probes("healthy"))
	}
	zero := int64(0)
	page, _ := mem.MessagesRead(ctx, vigil.MessagesReadParams{Recipient: "r", After: &zero})
	if len(page.Messages) != 3 {
		t.Errorf("%d messages; want one errored message per unreadable row (3)", len(page.Messages))
	}
}
