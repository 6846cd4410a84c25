package fsevent

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/fsnotify/fsnotify"
	"github.com/google/go-cmp/cmp"
)

var t0 = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

// pokes records PokeFunc calls.
type pokes struct {
	mu  sync.Mutex
	ids []string
}

func (p *pokes) poke(id string) { p.mu.Lock(); p.ids = append(p.ids, id); p.mu.Unlock() }
func (p *pokes) take() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := p.ids
	p.ids = nil
	slices.Sort(out)
	return out
}

// newTestNotifier returns a notifier whose events the test feeds to
// handle by hand (Run is not started), on a fixed clock.
func newTestNotifier(t *testing.T, cfg Config) (*Notifier, *pokes) {
	t.Helper()
	p := &pokes{}
	cfg.PokeFunc = p.poke
	cfg.NowFunc = func() time.Time { return t0 }
	n := New(cfg)
	t.Cleanup(n.close)
	return n, p
}

// TestNamesLimitWhatWakes: a target with Names is woken only by events on
// those entries; a target without is woken by any entry of its directory.
func TestNamesLimitWhatWakes(t *testing.T) {
	t.Parallel()
	n, p := newTestNotifier(t, Config{})
	dir := t.TempDir()
	if st := n.Watch("file", t0, Target{Dirs: []string{dir}, Names: []string{"ready"}}); !st.Events {
		t.Fatalf("Watch = %+v, want events", st)
	}
	n.Watch("folder", t0, Target{Dirs: []string{dir}})
	n.handle(fsnotify.Event{Name: filepath.Join(dir, "other"), Op: fsnotify.Write})
	n.Tick(t0)
	if diff := cmp.Diff([]string{"folder"}, p.take()); diff != "" {
		t.Errorf("event on another entry poked (-want +got):\n%s", diff)
	}
	n.Watch("folder", t0, Target{Dirs: []string{dir}}) // the probe came
	n.handle(fsnotify.Event{Name: filepath.Join(dir, "ready"), Op: fsnotify.Create})
	n.Tick(t0)
	if diff := cmp.Diff([]string{"file", "folder"}, p.take()); diff != "" {
		t.Errorf("event on the named entry poked (-want +got):\n%s", diff)
	}
}

// TestWakeIsRetriedUntilAProbeAnswersIt: a poke may land while the watch
// is being probed and be ignored, so a wake is poked again with backoff
// until a probe that started at or after it registers.
func TestWakeIsRetriedUntilAProbeAnswersIt(t *testing.T) {
	t.Parallel()
	n, p := newTestNotifier(t, Config{Disabled: true})
	at := t0.Add(20 * time.Second)
	n.WakeAt("w", at)
	n.WakeAt("w", at.Add(time.Minute)) // a later wake does not move it
	if got := n.Tick(at.Add(-time.Millisecond)); got != 0 {
		t.Fatalf("poked %d before the wake", got)
	}
	for _, step := range []struct {
		at   time.Duration
		want int
	}{{0, 1}, {100 * time.Millisecond, 0}, {250 * time.Millisecond, 1}, {500 * time.Millisecond, 0}, {750 * time.Millisecond, 1}} {
		if got := n.Tick(at.Add(step.at)); got != step.want {
			t.Fatalf("Tick(wake+%v) poked %d, want %d", step.at, got, step.want)
		}
	}
	// A probe that started before the wake does not answer it.
	n.Watch("w", at.Add(-time.Second), Target{})
	if got := n.Tick(at.Add(10 * time.Second)); got != 1 {
		t.Fatalf("wake answered by an earlier probe: poked %d, want 1", got)
	}
	n.Watch("w", at, Target{})
	if got := n.Tick(at.Add(time.Hour)); got != 0 {
		t.Fatalf("poked %d after the probe answered the wake", got)
	}
	if _, ok := n.nextWake(); ok {
		t.Fatal("a wake is still armed after it was answered")
	}
	p.take()
}

// TestNewWakeIsPokedAtOnce: a new wake (an event) pokes at once even
// while an older one is backing off, and keeps the older instant as the
// one a probe must answer.
func TestNewWakeIsPokedAtOnce(t *testing.T) {
	t.Parallel()
	n, _ := newTestNotifier(t, Config{Disabled: true})
	n.WakeAt("w", t0)
	now := t0
	for range 5 { // backing off: the next poke is seconds away
		n.Tick(now)
		now = now.Add(backoff(5))
	}
	now = now.Add(-backoff(5) + time.Millisecond)
	if got := n.Tick(now); got != 0 {
		t.Fatalf("poked %d while backing off", got)
	}
	n.WakeAt("w", now)
	if got := n.Tick(now); got != 1 {
		t.Fatalf("a new wake while backing off poked %d, want 1 at once", got)
	}
	n.Watch("w", t0.Add(-time.Second), Target{})
	if got := n.Tick(now.Add(time.Hour)); got != 1 {
		t.Fatalf("the first wake was answered by a probe before it: poked %d, want 1", got)
	}
}

// TestStaleWatchIsDropped: a watch that is no longer pending is forgotten
// before it is poked, and DropFunc and every OnDrop function hear of it.
func TestStaleWatchIsDropped(t *testing.T) {
	t.Parallel()
	var dropped, heard []string
	active := map[string]bool{"live": true}
	var mu sync.Mutex
	n, p := newTestNotifier(t, Config{
		ActiveFunc: func(id string) bool { mu.Lock(); defer mu.Unlock(); return active[id] },
		DropFunc:   func(id string) { dropped = append(dropped, id) },
	})
	n.OnDrop(func(id string) { heard = append(heard, id) })
	dir := t.TempDir()
	n.Watch("live", t0, Target{Dirs: []string{dir}})
	n.Watch("gone", t0, Target{Dirs: []string{dir}})
	n.handle(fsnotify.Event{Name: filepath.Join(dir, "x"), Op: fsnotify.Write})
	n.Tick(t0)
	if diff := cmp.Diff([]string{"live"}, p.take()); diff != "" {
		t.Errorf("pokes (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"gone"}, dropped); diff != "" {
		t.Errorf("dropped (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"gone"}, heard); diff != "" {
		t.Errorf("OnDrop heard (-want +got):\n%s", diff)
	}
	if got := n.Watched("gone"); got != nil {
		t.Errorf("a dropped watch still watches %v", got)
	}
	if w, d := n.Len(); w != 1 || d != 1 {
		t.Errorf("Len = %d watches, %d dirs; want 1, 1 (the directory is still watched for the live one)", w, d)
	}
	n.Unwatch("live")
	if w, d := n.Len(); w != 0 || d != 0 {
		t.Errorf("after Unwatch: Len = %d watches, %d dirs; want nothing left", w, d)
	}
}

// TestUnansweredWatchExpiresWithoutActiveFunc: with no ActiveFunc, a watch
// that leaves maxUnanswered pokes unanswered is forgotten.
func TestUnansweredWatchExpiresWithoutActiveFunc(t *testing.T) {
	t.Parallel()
	n, _ := newTestNotifier(t, Config{Disabled: true})
	n.WakeAt("w", t0)
	now := t0
	for range maxUnanswered + 1 {
		n.Tick(now)
		now = now.Add(retryMax)
	}
	if w, _ := n.Len(); w != 0 {
		t.Fatalf("%d watches left after %d unanswered pokes, want 0", w, maxUnanswered+1)
	}
}

// TestPollFallback: with events off, Watch says so and, with Poll set,
// wakes the watch every Poll.
func TestPollFallback(t *testing.T) {
	t.Parallel()
	n, p := newTestNotifier(t, Config{Disabled: true})
	st := n.Watch("w", t0, Target{Dirs: []string{t.TempDir()}, Poll: 10 * time.Second})
	if st.Events || st.Reason == "" || st.String() != "polling: "+st.Reason {
		t.Fatalf("Watch = %+v (%s), want polling with a reason", st, st)
	}
	if n.Tick(t0.Add(9*time.Second)) != 0 || n.Tick(t0.Add(10*time.Second)) != 1 {
		t.Fatal("the polling wake did not come at +10s")
	}
	n.Watch("w", t0.Add(10*time.Second), Target{Dirs: []string{t.TempDir()}, Poll: 10 * time.Second})
	if n.Tick(t0.Add(19*time.Second)) != 0 || n.Tick(t0.Add(20*time.Second)) != 1 {
		t.Fatal("the next polling wake did not come at +20s")
	}
	p.take()
}

// TestRemovedDirectoryIsForgotten: when a watched directory goes away the
// kernel drops its watch; the notifier forgets it, wakes the watch, and
// the watch's next registration adds it again.
func TestRemovedDirectoryIsForgotten(t *testing.T) {
	t.Parallel()
	n, p := newTestNotifier(t, Config{})
	root := t.TempDir()
	sub := filepath.Join(root, "sub")
	if err := os.Mkdir(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	n.Watch("w", t0, Target{Dirs: []string{root, sub}, Recursive: true})
	n.handle(fsnotify.Event{Name: sub, Op: fsnotify.Remove})
	n.Tick(t0)
	if diff := cmp.Diff([]string{"w"}, p.take()); diff != "" {
		t.Errorf("pokes (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{root}, n.Watched("w")); diff != "" {
		t.Errorf("watched after removal (-want +got):\n%s", diff)
	}
	n.Watch("w", t0.Add(time.Second), Target{Dirs: []string{root, sub}, Recursive: true})
	if diff := cmp.Diff([]string{root, sub}, n.Watched("w")); diff != "" {
		t.Errorf("watched after the next probe (-want +got):\n%s", diff)
	}
}

// TestRunStopsAndClosesWatcher: Run returns nil when its context ends.
func TestRunStopsAndClosesWatcher(t *testing.T) {
	t.Parallel()
	n := New(Config{PokeFunc: func(string) {}})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- n.Run(ctx) }()
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run = %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Run did not return after cancel")
	}
}

// TestInstanceLimitIsNamedAndTriedAgain: an inotify instance that cannot
// be made for the instance limit (EMFILE) is reported naming the setting
// to raise, not as "too many open files", and is made again a minute
// later: events are not off for the daemon's life.
func TestInstanceLimitIsNamedAndTriedAgain(t *testing.T) {
	t.Parallel()
	n, _ := newTestNotifier(t, Config{})
	n.newWatcher = func() (*fsnotify.Watcher, error) { return nil, syscall.EMFILE }
	dir := t.TempDir()
	st := n.Watch("w", t0, Target{Dirs: []string{dir}, Poll: 10 * time.Second})
	if st.Events || !strings.Contains(st.Reason, "fs.inotify.max_user_instances") {
		t.Fatalf("Watch at the instance limit = %+v, want polling naming fs.inotify.max_user_instances", st)
	}
	n.mu.Lock()
	n.newWatcher = fsnotify.NewWatcher
	n.mu.Unlock()
	if st := n.Watch("w", t0.Add(10*time.Second), Target{Dirs: []string{dir}, Poll: 10 * time.Second}); st.Events {
		t.Fatalf("Watch 10 s on = %+v, want still polling until the retry", st)
	}
	if st := n.Watch("w", t0.Add(limitRetry), Target{Dirs: []string{dir}, Poll: 10 * time.Second}); !st.Events {
		t.Fatalf("Watch a minute on, with an instance to be had = %+v, want events", st)
	}
}
