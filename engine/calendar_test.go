package engine_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vigil-run/vigil"
	"github.com/vigil-run/vigil/store/memstore"
	"github.com/vigil-run/vigil/watcher"
	"github.com/vigil-run/vigil/watcher/watchertest"
)

// fakeClock is a clock the tests move by hand, also from inside a probe.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *fakeClock) Set(t time.Time) {
	c.mu.Lock()
	c.t = t
	c.mu.Unlock()
}

// calendarFake fires every period from its anchor and leaves notes; each
// probe takes runFor of the fake clock.
type calendarFake struct {
	*watchertest.Fake
	period time.Duration
	clock  *fakeClock
	mu     sync.Mutex
	runFor time.Duration
	fires  []time.Time
}

func (f *calendarFake) NextDue(_ json.RawMessage, anchor, now time.Time) (time.Time, error) {
	n := now.Sub(anchor)/f.period + 1
	return anchor.Add(n * f.period), nil
}

func (f *calendarFake) Notes() bool { return true }

func newCalendarFake(c *fakeClock, period time.Duration) *calendarFake {
	f := &calendarFake{period: period, clock: c}
	f.Fake = watchertest.Func(vigil.KindSchedule, func(ctx context.Context, p watcher.Probe) (vigil.Observation, error) {
		f.mu.Lock()
		f.fires = append(f.fires, p.Now)
		d := f.runFor
		f.mu.Unlock()
		c.Set(p.Now.Add(d))
		return vigil.Observation{Verdict: vigil.VerdictSatisfied, Summary: "exited 0"}, nil
	})
	return f
}

// TestCalendarSkipsOverlappingFires: a calendar watcher sets when a watch
// is due; each satisfied answer is a note; a fire that comes due while the
// last one still runs is skipped, not queued; a restart re-arms it at its
// next instant.
func TestCalendarSkipsOverlappingFires(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	c := &fakeClock{t: t0}
	st := memstore.New()
	f := newCalendarFake(c, time.Minute)
	s := newSched(schedConfig{Store: st, Watchers: watcher.NewRegistry(f), NowFunc: c.Now})
	ctx := context.Background()
	if err := s.Prime(ctx); err != nil {
		t.Fatal(err)
	}
	w := &vigil.Watch{ID: "s1", Kind: vigil.KindSchedule, Predicate: json.RawMessage(`{}`), Recipient: "r", State: vigil.StatePending,
		Mode: vigil.ModeUntil, Standing: true, CreatedAt: t0, Identity: "s1"}
	create(t, st, w)
	s.Add(w, nil)
	if next, ok := s.NextDue(); !ok || !next.Equal(t0.Add(time.Minute)) {
		t.Fatalf("first due %v %v, want one period after creation", next, ok)
	}
	tick := func(at time.Time) int { c.Set(at); return s.Tick(ctx, at) }
	if n := tick(t0.Add(30 * time.Second)); n != 0 {
		t.Fatalf("probed %d before the first fire", n)
	}
	tick(t0.Add(time.Minute)) // fires; takes no time
	f.mu.Lock()
	f.runFor = 150 * time.Second // the next fire runs past two more slots
	f.mu.Unlock()
	tick(t0.Add(2 * time.Minute))
	if next, _ := s.NextDue(); !next.Equal(t0.Add(5 * time.Minute)) {
		t.Fatalf("after a fire that ran to 4m30s the next is %v, want 5m: the 3m and 4m fires are skipped", next.Sub(t0))
	}
	for _, at := range []time.Duration{3 * time.Minute, 4 * time.Minute} {
		if n := tick(t0.Add(at)); n != 0 {
			t.Fatalf("a skipped fire at %v ran", at)
		}
	}
	f.mu.Lock()
	f.runFor = 0
	f.mu.Unlock()
	tick(t0.Add(5 * time.Minute))
	if got := len(f.fires); got != 3 {
		t.Fatalf("%d fires, want 3 (1m, 2m, 5m)", got)
	}
	zero := int64(0)
	page, err := st.MessagesRead(ctx, vigil.MessagesReadParams{Recipient: "r", After: &zero})
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Messages) != 3 {
		t.Fatalf("mailbox has %d messages, want a note per fire", len(page.Messages))
	}
	for _, m := range page.Messages {
		if m.Type != vigil.MessageNote || m.Text != "The command ran: exited 0." {
			t.Fatalf("message %+v, want a note", m)
		}
	}

	// A restart arms the watch at its next instant, not at once.
	c.Set(t0.Add(7*time.Minute + 10*time.Second))
	s2 := newSched(schedConfig{Store: st, Watchers: watcher.NewRegistry(f), NowFunc: c.Now})
	if err := s2.Prime(ctx); err != nil {
		t.Fatal(err)
	}
	if next, _, ok := s2.Info("s1"); !ok || !next.Equal(t0.Add(8*time.Minute)) {
		t.Fatalf("after a restart the schedule is due %v (%v), want 8m", next.Sub(t0), ok)
	}
}

// TestPokeInFlight: a poke that arrives while the watch's probe runs makes
// it due again as soon as the probe ends, so the event is not lost.
func TestPokeInFlight(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	c := &fakeClock{t: t0}
	st := memstore.New()
	var s *schedRig
	first := true
	fake := watchertest.Func(vigil.KindHTTP, func(ctx context.Context, p watcher.Probe) (vigil.Observation, error) {
		if first {
			first = false
			s.Poke(p.WatchID) // the event arrives while this probe runs
		}
		return vigil.Observation{Verdict: vigil.VerdictPending}, nil
	})
	s = newSched(schedConfig{Store: st, Watchers: watcher.NewRegistry(fake), NowFunc: c.Now})
	if err := s.Prime(context.Background()); err != nil {
		t.Fatal(err)
	}
	w := newWatch("w1", time.Hour, t0)
	create(t, st, w)
	s.Add(w, nil)
	s.Tick(context.Background(), t0)
	if next, _, _ := s.Info("w1"); !next.Equal(t0) {
		t.Fatalf("after a poke in flight the watch is due %v, want at once", next)
	}
	s.Tick(context.Background(), t0)
	if next, _, _ := s.Info("w1"); !next.Equal(t0.Add(time.Hour)) {
		t.Fatalf("then due %v, want its interval", next)
	}
}

// endingCalendar is a calendar watcher whose watches are due at fixed
// instants, then have no next fire (a schedule whose tz left the machine,
// a cron expression with none ahead); its probes answer notes.
type endingCalendar struct {
	*watchertest.Fake
	mu     sync.Mutex
	fires  []time.Time // the instants still ahead
	probed int
}

func (f *endingCalendar) NextDue(_ json.RawMessage, _, now time.Time) (time.Time, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, at := range f.fires {
		if at.After(now) {
			return at, nil
		}
	}
	return time.Time{}, errors.New(`tz "Mars/Olympus" is not in this machine's time zone database`)
}

func (f *endingCalendar) Notes() bool { return true }

// TestCalendarWithoutANextFireSettlesErrored: a calendar watch with no
// next fire settles errored at once, saying why, and its program is not
// run: at registration, after a restart, and after its last fire, with a
// deadline or without. It stayed pending for ever (never armed, only
// logged), or until its deadline, and whoever waited on it never heard.
func TestCalendarWithoutANextFireSettlesErrored(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	ctx := context.Background()
	newWatcher := func(fires ...time.Time) *endingCalendar {
		f := &endingCalendar{fires: fires}
		f.Fake = watchertest.Func(vigil.KindSchedule, func(context.Context, watcher.Probe) (vigil.Observation, error) {
			f.mu.Lock()
			f.probed++
			f.mu.Unlock()
			return vigil.Observation{Verdict: vigil.VerdictSatisfied, Summary: "exited 0"}, nil
		})
		return f
	}
	watch := func(id string, deadline time.Time) *vigil.Watch {
		return &vigil.Watch{ID: id, Kind: vigil.KindSchedule, Predicate: json.RawMessage(`{}`), Recipient: "r", State: vigil.StatePending,
			Mode: vigil.ModeUntil, Standing: true, Deadline: deadline, CreatedAt: t0, Identity: id}
	}
	errored := func(t *testing.T, st vigil.Store, id string, probes, want int) {
		t.Helper()
		got, err := st.WatchGet(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if got.State != vigil.StateErrored || got.Outcome == nil || got.Outcome.Reason != "permanent" || got.Outcome.Observation == nil ||
			!strings.Contains(got.Outcome.Observation.Reason, "its next fire cannot be computed: tz \"Mars/Olympus\"") {
			t.Fatalf("watch %s is %s (%+v), want errored, saying its next fire cannot be computed", id, got.State, got.Outcome)
		}
		if probes != want {
			t.Fatalf("watch %s was probed %d times, want %d", id, probes, want)
		}
	}
	for _, deadline := range []time.Time{{}, t0.Add(time.Hour)} {
		c := &fakeClock{t: t0}

		// No next fire at registration: settled at its first turn, now.
		st := memstore.New()
		never := newWatcher()
		s := newSched(schedConfig{Store: st, Watchers: watcher.NewRegistry(never), NowFunc: c.Now})
		if err := s.Prime(ctx); err != nil {
			t.Fatal(err)
		}
		w := watch("never", deadline)
		create(t, st, w)
		s.Add(w, nil)
		if next, _, ok := s.Info("never"); !ok || !next.Equal(t0) {
			t.Fatalf("deadline %v: a watch with no next fire is due %v (%v), want at once", deadline, next, ok)
		}
		s.Tick(ctx, c.Now())
		errored(t, st, "never", never.probed, 0)

		// No next fire after a restart (its tz gone from the new machine).
		st = memstore.New()
		w = watch("moved", deadline)
		create(t, st, w)
		c.Set(t0.Add(time.Minute))
		moved := newWatcher()
		s = newSched(schedConfig{Store: st, Watchers: watcher.NewRegistry(moved), NowFunc: c.Now})
		if err := s.Prime(ctx); err != nil {
			t.Fatal(err)
		}
		if next, _, ok := s.Info("moved"); !ok || !next.Equal(c.Now()) {
			t.Fatalf("deadline %v: after a restart a watch with no next fire is due %v (%v), want at once", deadline, next, ok)
		}
		s.Tick(ctx, c.Now())
		errored(t, st, "moved", moved.probed, 0)

		// Due once, then no next fire: settled right after that fire.
		c.Set(t0)
		st = memstore.New()
		once := newWatcher(t0.Add(time.Minute))
		s = newSched(schedConfig{Store: st, Watchers: watcher.NewRegistry(once), NowFunc: c.Now})
		if err := s.Prime(ctx); err != nil {
			t.Fatal(err)
		}
		w = watch("once", deadline)
		create(t, st, w)
		s.Add(w, nil)
		c.Set(t0.Add(time.Minute))
		if n := s.Tick(ctx, c.Now()); n != 1 {
			t.Fatalf("the one fire probed %d watches, want 1", n)
		}
		errored(t, st, "once", once.probed, 1)
		if _, _, ok := s.Info("once"); ok {
			t.Fatalf("deadline %v: a settled watch is still scheduled", deadline)
		}
	}
}
