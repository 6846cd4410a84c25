// Package fsevent wakes event-driven watches when the file system changes
// under them, and keeps the few deferred wakes they ask for.
//
// One Notifier serves a whole daemon: it holds ONE fsnotify watcher (one
// inotify instance, whose reader goroutine fsnotify owns) and runs ONE
// goroutine of its own (Run). That goroutine maps each event to the
// watches registered for its directory and pokes them (Config.PokeFunc,
// the engine's Poke), so a change reaches the one scheduler at once and a
// watch costs nothing while nothing changes. It also owns one timer over a
// heap of deferred wakes: a settle window closing, the next look of a
// watch that has to poll, a poke that landed while the watch was being
// probed. There is no goroutine, timer or ticker per watch.
//
// A watcher registers its watch from inside a probe: Watch(id, now,
// target) names the directories to watch (the probe's now says which
// wanted wakes that probe answered), WakeAt asks for a later probe, and
// Unwatch forgets the watch. Registrations are dropped lazily: before a
// poke the notifier asks Config.ActiveFunc whether the watch is still
// pending, and forgets it (telling Config.DropFunc) when it is not.
//
// A wake is level-triggered: it is poked, and poked again with backoff
// (250 ms doubling to 30 s), until a probe that started at or after the
// wanted instant registers again. A poke that lands while the watch is
// already being probed is therefore never lost.
//
// When events cannot be had the watch falls back to polling, and Watch
// says why: inotify is unavailable (Config.Disabled, or no inotify
// instance could be made: the instance limit, fs.inotify.max_user_instances,
// is reached, and one is tried again a minute later), the inotify watch
// limit is reached (fs.inotify.max_user_watches), or the directory is on
// a network file system, where changes made on other machines raise no
// event. A target with Poll set is then woken every Poll.
package fsevent

import (
	"container/heap"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"syscall"
	"time"

	"github.com/fsnotify/fsnotify"
)

// Bounds of the notifier.
const (
	// retryFirst and retryMax bound the backoff of a wake whose probe has
	// not come yet.
	retryFirst = 250 * time.Millisecond
	retryMax   = 30 * time.Second
	// maxUnanswered is how many pokes a watch may leave unanswered before
	// it is forgotten, when there is no ActiveFunc to ask.
	maxUnanswered = 12
	// limitRetry is how long a watch that hit the inotify watch limit
	// polls before events are tried for it again.
	limitRetry = time.Minute
	// maxNewDirs bounds how many directories one new subtree adds at once;
	// the watch's next probe registers the rest.
	maxNewDirs = 1024
	// eventBatch bounds how many queued events are read before the wakes
	// they made are poked.
	eventBatch = 256
)

// Config configures a Notifier.
type Config struct {
	// PokeFunc makes a watch due now (the engine's Poke). Required.
	PokeFunc func(id string)
	// ActiveFunc reports whether a watch is still pending; a watch that
	// is not is forgotten before it is poked. nil: a watch is forgotten
	// once it has left maxUnanswered pokes unanswered.
	ActiveFunc func(id string) bool
	// DropFunc, when set, hears of each watch forgotten as stale, so the
	// watcher that registered it can let go of what it kept.
	DropFunc func(id string)
	// NowFunc is the clock; nil means time.Now. It must be the clock the
	// probes' now comes from.
	NowFunc func() time.Time
	// Disabled turns events off: every watch polls (tests, and file
	// systems where events cannot be trusted).
	Disabled bool
	// Logger; nil discards.
	Logger *slog.Logger
}

// Target is what one watch wants watched.
type Target struct {
	// Dirs are the directories to watch, absolute and with symlinks
	// resolved. Events are raised for their direct entries.
	Dirs []string
	// Names, when set, limits the events that wake the watch to entries
	// of these names (and to the directories themselves): a file watch
	// names its file in its directory.
	Names []string
	// Recursive makes a directory created inside one of Dirs watched at
	// once, with its subdirectories, before the watch is poked.
	Recursive bool
	// Skip, when set, says which new directories (by base name) a
	// recursive target leaves out.
	Skip func(name string) bool
	// Poll, when set, is how often the watch is woken while events cannot
	// be had.
	Poll time.Duration
}

// Status says how a watch is woken.
type Status struct {
	// Events is true when file system events wake the watch.
	Events bool
	// Reason says why events cannot be had, when they cannot.
	Reason string
	// Added is true when this call began watching a directory for the
	// watch: a change made in it before the call (after the caller
	// looked) raised no event for the watch, and the caller looks again.
	Added bool
}

// String describes the status in a few words: "events" or "polling every
// 10s: <reason>".
func (s Status) String() string {
	if s.Events {
		return "events"
	}
	return "polling: " + s.Reason
}

// Notifier maps file system events to watch pokes. Make it with New and
// run it with Run.
type Notifier struct {
	cfg  Config
	log  *slog.Logger
	kick chan struct{}

	mu sync.Mutex
	// fsw is made by the first registration and closed by Run on its way
	// out (stopped), so a notifier that never runs holds nothing.
	fsw *fsnotify.Watcher
	off string // why events cannot be had at all, if they cannot
	// offAt is when making the fsnotify watcher failed; it is made again
	// limitRetry after. Zero: events are off for good (turned off, lost).
	offAt time.Time
	// newWatcher makes the fsnotify watcher (fsnotify.NewWatcher; tests
	// replace it).
	newWatcher func() (*fsnotify.Watcher, error)
	stopped    bool
	ids        map[string]*watch
	dirs       map[string]map[*watch]struct{}
	// onDrop are the functions OnDrop added: each hears, as
	// Config.DropFunc does, of each watch forgotten as stale.
	onDrop []func(id string)
	h      wakeHeap
}

// watch is one registered watch.
type watch struct {
	id      string
	dirs    map[string]struct{}
	names   map[string]struct{}
	rec     bool
	skip    func(string) bool
	events  bool
	reason  string
	limitAt time.Time // when the watch limit was hit; events are not retried until limitRetry after

	want  time.Time // the earliest probe start that answers the wake; zero: no wake
	next  time.Time // when to poke next
	tries int
	index int // in the heap; -1 when not
}

// New returns a notifier. The fsnotify watcher is made when the first
// watch registers (which may be before Run starts: events wait for it)
// and closed when Run returns.
func New(cfg Config) *Notifier {
	if cfg.NowFunc == nil {
		cfg.NowFunc = time.Now
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	n := &Notifier{
		cfg:  cfg,
		log:  log.With("component", "fsevent"),
		kick: make(chan struct{}, 1),
		ids:  make(map[string]*watch),
		dirs: make(map[string]map[*watch]struct{}),

		newWatcher: fsnotify.NewWatcher,
	}
	if cfg.Disabled {
		n.off = "file system events are turned off"
	}
	return n
}

// startLocked makes the fsnotify watcher if there is none yet, and
// reports whether there is one. One that could not be made (the inotify
// instance limit, no file descriptor left) is tried again limitRetry
// later.
func (n *Notifier) startLocked(now time.Time) bool {
	switch {
	case n.fsw != nil:
		return true
	case n.off != "" && (n.offAt.IsZero() || now.Sub(n.offAt) < limitRetry):
		return false
	case n.stopped:
		n.off, n.offAt = "the notifier has stopped", time.Time{}
		return false
	}
	fsw, err := n.newWatcher()
	if err != nil {
		n.off, n.offAt = "inotify is unavailable ("+describe(err)+")", now
		if errors.Is(err, syscall.EMFILE) {
			n.off = "inotify is unavailable: the inotify instance limit is reached (raise fs.inotify.max_user_instances) or the daemon has no file descriptor left"
		}
		n.log.Warn("file system events are unavailable: folder and file watches poll", "err", err)
		return false
	}
	n.off, n.offAt = "", time.Time{}
	n.fsw = fsw
	n.signal() // a running loop starts reading it
	return true
}

// close stops the notifier for good and closes its fsnotify watcher.
func (n *Notifier) close() {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.stopped = true
	if n.fsw != nil {
		n.fsw.Close()
	}
}

// lost gives up on an fsnotify watcher whose channels closed under it:
// from their next probe on, watches poll and say why.
func (n *Notifier) lost() {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.fsw != nil {
		n.fsw.Close()
		n.fsw = nil
	}
	n.off = "the file system watcher stopped"
	n.log.Error("file system events stopped: folder and file watches poll")
}

// channels returns the fsnotify watcher's channels; nil before it is made.
func (n *Notifier) channels() (<-chan fsnotify.Event, <-chan error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.fsw == nil {
		return nil, nil
	}
	return n.fsw.Events, n.fsw.Errors
}

// Run reads events and fires wakes until ctx ends, then closes the
// fsnotify watcher and returns nil.
func (n *Notifier) Run(ctx context.Context) error {
	defer n.close()
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	defer timer.Stop()
	for {
		events, errs := n.channels()
		var timerC <-chan time.Time
		if next, ok := n.nextWake(); ok {
			timer.Reset(max(next.Sub(n.cfg.NowFunc()), 0))
			timerC = timer.C
		} else {
			timer.Stop()
		}
		select {
		case ev, ok := <-events:
			if !ok {
				n.lost()
				continue
			}
			n.handle(ev)
			// Read what else is queued before poking: a burst of writes
			// makes one poke per watch, not one per write.
			for i := 0; i < eventBatch; i++ {
				select {
				case ev, ok = <-events:
				default:
					ok = false
				}
				if !ok {
					break
				}
				n.handle(ev)
			}
			n.Tick(n.cfg.NowFunc())
		case err, ok := <-errs:
			if !ok {
				n.lost()
				continue
			}
			if errors.Is(err, fsnotify.ErrEventOverflow) {
				// Events were lost: every watch looks again.
				n.log.Warn("file system event queue overflowed; waking every watch")
				n.wakeAll(n.cfg.NowFunc())
				n.Tick(n.cfg.NowFunc())
				continue
			}
			n.log.Warn("file system events", "err", err)
		case <-timerC:
			n.Tick(n.cfg.NowFunc())
		case <-n.kick:
		case <-ctx.Done():
			return nil
		}
	}
}

func (n *Notifier) nextWake() (time.Time, bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if len(n.h) == 0 {
		return time.Time{}, false
	}
	return n.h[0].next, true
}

func (n *Notifier) signal() {
	select {
	case n.kick <- struct{}{}:
	default:
	}
}

// Watch registers (or updates) what watch id wants watched and returns
// how it is woken. now is when the calling probe started: wakes wanted at
// or before it are answered. With events unavailable and target.Poll set,
// the watch is woken again at now + Poll.
func (n *Notifier) Watch(id string, now time.Time, t Target) Status {
	n.mu.Lock()
	w := n.ids[id]
	if w == nil {
		w = &watch{id: id, dirs: make(map[string]struct{}), index: -1}
		n.ids[id] = w
	}
	if !w.want.IsZero() && !now.Before(w.want) {
		n.clearWakeLocked(w)
	}
	w.rec, w.skip = t.Recursive, t.Skip
	w.names = nil
	if len(t.Names) > 0 {
		w.names = make(map[string]struct{}, len(t.Names))
		for _, name := range t.Names {
			w.names[name] = struct{}{}
		}
	}
	st := n.registerLocked(w, t.Dirs, now)
	w.events, w.reason = st.Events, st.Reason
	woken := false
	if !st.Events && t.Poll > 0 {
		woken = n.wakeLocked(w, now.Add(t.Poll))
	}
	n.mu.Unlock()
	if woken {
		n.signal()
	}
	return st
}

// registerLocked makes the watched directories of w match dirs.
func (n *Notifier) registerLocked(w *watch, dirs []string, now time.Time) Status {
	switch {
	case !n.startLocked(now):
		n.detachAllLocked(w)
		return Status{Reason: n.off}
	case len(dirs) == 0:
		n.detachAllLocked(w)
		return Status{Reason: "there is no directory to watch"}
	case !w.limitAt.IsZero() && now.Sub(w.limitAt) < limitRetry:
		return Status{Reason: w.reason}
	}
	if fs, ok := networkFS(dirs[0]); ok {
		n.detachAllLocked(w)
		return Status{Reason: dirs[0] + " is on a network file system (" + fs + "), where changes made elsewhere raise no event"}
	}
	want := make(map[string]struct{}, len(dirs))
	for _, d := range dirs {
		want[d] = struct{}{}
	}
	for d := range w.dirs {
		if _, keep := want[d]; !keep {
			n.detachLocked(w, d)
		}
	}
	added := false
	for _, d := range dirs {
		if _, have := w.dirs[d]; have {
			continue
		}
		if err := n.attachLocked(w, d); err != nil {
			switch {
			case errors.Is(err, fs.ErrNotExist), errors.Is(err, syscall.ENOTDIR):
				// Gone since the probe looked: its next look sees why.
				continue
			case errors.Is(err, syscall.ENOSPC):
				n.detachAllLocked(w)
				w.limitAt = now
				return Status{Reason: "the inotify watch limit is reached (raise fs.inotify.max_user_watches)"}
			default:
				n.detachAllLocked(w)
				return Status{Reason: "cannot watch " + d + " (" + describe(err) + ")"}
			}
		}
		added = true
	}
	w.limitAt = time.Time{}
	return Status{Events: true, Added: added}
}

// attachLocked adds directory d to w, watching it if nobody did yet.
func (n *Notifier) attachLocked(w *watch, d string) error {
	set := n.dirs[d]
	if set == nil {
		if err := n.fsw.Add(d); err != nil {
			return err
		}
		set = make(map[*watch]struct{}, 1)
		n.dirs[d] = set
	}
	set[w] = struct{}{}
	w.dirs[d] = struct{}{}
	return nil
}

// detachLocked removes directory d from w, and stops watching it when
// nobody else does.
func (n *Notifier) detachLocked(w *watch, d string) {
	delete(w.dirs, d)
	set := n.dirs[d]
	delete(set, w)
	if len(set) == 0 && set != nil {
		delete(n.dirs, d)
		if n.fsw != nil {
			// It may be gone already (deleted directories are unwatched
			// by the kernel): nothing to undo then.
			_ = n.fsw.Remove(d)
		}
	}
}

func (n *Notifier) detachAllLocked(w *watch) {
	for d := range w.dirs {
		n.detachLocked(w, d)
	}
}

// WakeAt asks for a probe of watch id that starts at or after at. A watch
// has one wanted wake: the earliest asked for since its last probe.
func (n *Notifier) WakeAt(id string, at time.Time) {
	n.mu.Lock()
	w := n.ids[id]
	if w == nil {
		w = &watch{id: id, dirs: make(map[string]struct{}), index: -1}
		n.ids[id] = w
	}
	woken := n.wakeLocked(w, at)
	n.mu.Unlock()
	if woken {
		n.signal()
	}
}

// wakeLocked wants w probed at or after at. The wanted instant stays the
// earliest asked for since the last probe (a probe must start after it to
// answer it); the next poke comes at at if that is sooner, so a new event
// is poked at once even while an older wake is backing off. It reports
// whether the heap's minimum may have moved earlier.
func (n *Notifier) wakeLocked(w *watch, at time.Time) bool {
	if w.want.IsZero() || at.Before(w.want) {
		w.want = at
	}
	if w.index >= 0 && !at.Before(w.next) {
		return false
	}
	w.next, w.tries = at, 0
	if w.index >= 0 {
		heap.Fix(&n.h, w.index)
	} else {
		heap.Push(&n.h, w)
	}
	return true
}

func (n *Notifier) clearWakeLocked(w *watch) {
	w.want, w.next, w.tries = time.Time{}, time.Time{}, 0
	if w.index >= 0 {
		heap.Remove(&n.h, w.index)
	}
}

// Unwatch forgets watch id: its directories and its wakes.
func (n *Notifier) Unwatch(id string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.forgetLocked(id)
}

func (n *Notifier) forgetLocked(id string) {
	w := n.ids[id]
	if w == nil {
		return
	}
	n.detachAllLocked(w)
	n.clearWakeLocked(w)
	delete(n.ids, id)
}

// Tick pokes every watch whose wake is due at now and returns how many it
// poked. Run calls it; tests call it with a fake clock.
func (n *Notifier) Tick(now time.Time) int {
	n.mu.Lock()
	var due []*watch
	for len(n.h) > 0 && !n.h[0].next.After(now) {
		w := n.h[0]
		w.tries++
		w.next = now.Add(backoff(w.tries))
		heap.Fix(&n.h, 0)
		due = append(due, w)
	}
	n.mu.Unlock()
	poked := 0
	for _, w := range due {
		active := true
		if n.cfg.ActiveFunc != nil {
			active = n.cfg.ActiveFunc(w.id)
		} else {
			active = w.tries <= maxUnanswered
		}
		if !active {
			n.drop(w)
			continue
		}
		n.cfg.PokeFunc(w.id)
		poked++
	}
	return poked
}

// drop forgets a stale watch, unless it registered again meanwhile.
func (n *Notifier) drop(w *watch) {
	n.mu.Lock()
	stale := n.ids[w.id] == w
	if stale {
		n.forgetLocked(w.id)
	}
	onDrop := n.onDrop
	n.mu.Unlock()
	if stale && n.cfg.DropFunc != nil {
		n.cfg.DropFunc(w.id)
	}
	if stale {
		for _, f := range onDrop {
			f(w.id)
		}
	}
}

// Drop forgets watch id as Unwatch does and, if the notifier knew it,
// tells Config.DropFunc and OnDrop's functions, as of a watch found stale:
// the daemon calls it for the watches of a shard another replica took,
// which are no longer this notifier's to wake.
func (n *Notifier) Drop(id string) {
	n.mu.Lock()
	w := n.ids[id]
	n.mu.Unlock()
	if w != nil {
		n.drop(w)
	}
}

// OnDrop adds f to what hears of each watch forgotten as stale (as
// Config.DropFunc does): the watcher that registered a watch lets go of
// what it kept for it. A watcher calls it once, when it is made.
func (n *Notifier) OnDrop(f func(id string)) {
	n.mu.Lock()
	n.onDrop = append(n.onDrop, f)
	n.mu.Unlock()
}

func backoff(tries int) time.Duration {
	d := retryFirst
	for i := 1; i < tries && d < retryMax; i++ {
		d *= 2
	}
	return min(d, retryMax)
}

// wakeAll wants every registered watch probed again.
func (n *Notifier) wakeAll(now time.Time) {
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, w := range n.ids {
		n.wakeLocked(w, now)
	}
}

// handle maps one event to the watches it concerns and wants them probed.
func (n *Notifier) handle(ev fsnotify.Event) {
	now := n.cfg.NowFunc()
	name := filepath.Clean(ev.Name)
	parent, base := filepath.Dir(name), filepath.Base(name)
	var newDir bool
	if ev.Has(fsnotify.Create) {
		if info, err := os.Lstat(name); err == nil && info.IsDir() {
			newDir = true
		}
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	// The watched directory itself went away or moved: the kernel has
	// dropped its watch, so forget it and let the next probe add it
	// again if it comes back.
	if self, ok := n.dirs[name]; ok && (ev.Has(fsnotify.Remove) || ev.Has(fsnotify.Rename)) {
		for w := range self {
			n.detachLocked(w, name)
			n.wakeLocked(w, now)
		}
	}
	for w := range n.dirs[parent] {
		if w.names != nil {
			if _, ok := w.names[base]; !ok {
				continue
			}
		}
		if newDir && w.rec && (w.skip == nil || !w.skip(base)) {
			n.attachTreeLocked(w, name)
		}
		n.wakeLocked(w, now)
	}
}

// attachTreeLocked watches a new directory and its subdirectories for w,
// up to maxNewDirs; errors are left for the next probe to find.
func (n *Notifier) attachTreeLocked(w *watch, root string) {
	added := 0
	_ = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return nil
		}
		if path != root && w.skip != nil && w.skip(d.Name()) {
			return filepath.SkipDir
		}
		if added >= maxNewDirs {
			return filepath.SkipAll
		}
		if _, have := w.dirs[path]; !have {
			if err := n.attachLocked(w, path); err != nil {
				return filepath.SkipAll
			}
		}
		added++
		return nil
	})
}

// Watched lists the directories watched for id, sorted (for tests and
// diagnostics).
func (n *Notifier) Watched(id string) []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	w := n.ids[id]
	if w == nil {
		return nil
	}
	out := make([]string, 0, len(w.dirs))
	for d := range w.dirs {
		out = append(out, d)
	}
	sort.Strings(out)
	return out
}

// Len returns how many watches are registered and how many directories
// are watched.
func (n *Notifier) Len() (watches, dirs int) {
	n.mu.Lock()
	defer n.mu.Unlock()
	return len(n.ids), len(n.dirs)
}

// describe words a system error without its "inotify_add_watch" prefix.
func describe(err error) string {
	var errno syscall.Errno
	if errors.As(err, &errno) {
		return errno.Error()
	}
	return err.Error()
}

// wakeHeap orders watches by their next poke.
type wakeHeap []*watch

func (h wakeHeap) Len() int           { return len(h) }
func (h wakeHeap) Less(i, j int) bool { return h[i].next.Before(h[j].next) }
func (h wakeHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].index, h[j].index = i, j
}
func (h *wakeHeap) Push(x any) {
	w := x.(*watch)
	w.index = len(*h)
	*h = append(*h, w)
}
func (h *wakeHeap) Pop() any {
	old := *h
	w := old[len(old)-1]
	old[len(old)-1] = nil
	w.index = -1
	*h = old[:len(old)-1]
	return w
}

var _ fmt.Stringer = Status{}
