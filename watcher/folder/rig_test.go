package folder_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fsnotify/fsnotify"

	"github.com/vigil-run/vigil"
	"github.com/vigil-run/vigil/engine"
	"github.com/vigil-run/vigil/scheduler"
	"github.com/vigil-run/vigil/store/memstore"
	"github.com/vigil-run/vigil/watcher"
	"github.com/vigil-run/vigil/watcher/folder"
	"github.com/vigil-run/vigil/watcher/fsevent"
)

var t0 = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

// eventWait bounds how long a test waits for a file system event: I/O,
// not a schedule.
const eventWait = 5 * time.Second

type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) Set(t time.Time) {
	c.mu.Lock()
	c.t = t
	c.mu.Unlock()
}

// rig is an engine on a fake clock with the folder watcher, a root the
// watches may look inside, a place outside it, and a data dir for kept
// contents.
type rig struct {
	t       *testing.T
	ctx     context.Context
	clock   *clock
	store   vigil.Store
	eng     *engine.Engine
	sched   *scheduler.Scheduler
	w       *folder.Watcher
	n       *fsevent.Notifier
	pokes   chan string
	root    string
	outside string
	blobs   string
}

type rigOpts struct {
	// events: a running notifier wakes watches (the daemon's setup);
	// poll: a notifier with events turned off (the fallback); neither: no
	// notifier, the kind's interval.
	events, poll bool
	allowExec    bool
	// beforeWatch, with events, runs as a probe registers its watch with
	// the notifier, before the registration: what it does to the folder
	// happens after the probe looked and before anything watched it.
	beforeWatch func()
	// store and dirs of a rig restarted on the same state.
	from *rig
}

func newRig(t *testing.T, o rigOpts) *rig {
	t.Helper()
	r := &rig{t: t, ctx: context.Background(), clock: &clock{t: t0}, pokes: make(chan string, 1024)}
	if o.from != nil {
		r.store, r.root, r.outside, r.blobs = o.from.store, o.from.root, o.from.outside, o.from.blobs
		r.clock.Set(o.from.clock.Now())
	} else {
		base := t.TempDir()
		r.root, r.outside, r.blobs = filepath.Join(base, "root"), filepath.Join(base, "outside"), filepath.Join(base, "data", "folder")
		for _, d := range []string{r.root, r.outside} {
			if err := os.MkdirAll(d, 0o755); err != nil {
				t.Fatal(err)
			}
		}
		r.store = memstore.New()
	}
	cfg := folder.Config{Roots: []string{r.root}, BlobDir: r.blobs, AllowExec: o.allowExec, KillGrace: 200 * time.Millisecond}
	if o.events || o.poll {
		r.n = fsevent.New(fsevent.Config{
			// Pokes reach the engine from the test's goroutine (deliver),
			// between its ticks, as they would reach a running scheduler
			// between probes.
			PokeFunc: func(id string) {
				select {
				case r.pokes <- id:
				default:
				}
			},
			NowFunc:  r.clock.Now,
			Disabled: o.poll,
		})
		cfg.Waker = r.n
		if o.beforeWatch != nil {
			cfg.Waker = hookedWaker{r.n, o.beforeWatch}
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { _ = r.n.Run(ctx); close(done) }()
		t.Cleanup(func() { cancel(); <-done })
	}
	r.w = folder.New(cfg)
	r.sched = scheduler.New(scheduler.Config{NowFunc: r.clock.Now})
	r.eng = engine.New(engine.Config{Store: r.store, Watchers: watcher.NewRegistry(r.w), Scheduler: r.sched, NowFunc: r.clock.Now,
		JitterFunc: func(time.Duration) time.Duration { return 0 }})
	if err := r.eng.Prime(r.ctx); err != nil {
		t.Fatal(err)
	}
	return r
}

// hookedWaker is the notifier with a hook run before each registration.
type hookedWaker struct {
	*fsevent.Notifier
	before func()
}

func (h hookedWaker) Watch(id string, now time.Time, t fsevent.Target) fsevent.Status {
	h.before()
	return h.Notifier.Watch(id, now, t)
}

// register registers a folder watch for agent-1.
func (r *rig) register(pred string) *vigil.Watch {
	r.t.Helper()
	w, err := r.eng.Register(r.ctx, vigil.RegisterRequest{Kind: vigil.KindFolder, Recipient: "agent-1", Predicate: json.RawMessage(pred)})
	if err != nil {
		r.t.Fatalf("Register(%s) = %v", pred, err)
	}
	r.eng.Tick(r.ctx, r.clock.Now())
	return w
}

// at moves the clock to t0+d and runs what is due: the notifier's
// wakes, the pokes they made, then the scheduler.
func (r *rig) at(d time.Duration) {
	r.clock.Set(t0.Add(d))
	if r.n != nil {
		r.n.Tick(r.clock.Now())
	}
	r.deliver()
	r.eng.Tick(r.ctx, r.clock.Now())
}

// deliver hands the pokes made so far to the engine.
func (r *rig) deliver() {
	for {
		select {
		case id := <-r.pokes:
			r.sched.Poke(id)
		default:
			return
		}
	}
}

// poked waits for an event to poke watch id, then runs what is due.
func (r *rig) poked(id string) {
	r.t.Helper()
	timeout := time.After(eventWait)
	for {
		select {
		case got := <-r.pokes:
			r.sched.Poke(got)
			if got == id {
				r.deliver()
				r.eng.Tick(r.ctx, r.clock.Now())
				return
			}
		case <-timeout:
			r.t.Fatalf("no event woke watch %s within %v", id, eventWait)
		}
	}
}

// changed returns the "changed" messages of agent-1.
func (r *rig) changed() []*vigil.Message {
	r.t.Helper()
	zero := int64(0)
	p, err := r.eng.Messages(r.ctx, vigil.MessagesRequest{Recipient: "agent-1", After: &zero, Limit: 1000})
	if err != nil {
		r.t.Fatal(err)
	}
	var out []*vigil.Message
	for _, m := range p.Messages {
		if m.Type == vigil.MessageChanged {
			out = append(out, m)
		}
	}
	return out
}

func (r *rig) get(id string) *vigil.Watch {
	r.t.Helper()
	w, err := r.eng.Watch(r.ctx, id)
	if err != nil {
		r.t.Fatal(err)
	}
	return w
}

// path returns a path under the root.
func (r *rig) path(parts ...string) string {
	return filepath.Join(append([]string{r.root}, parts...)...)
}

func write(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func q(s string) string { b, _ := json.Marshal(s); return string(b) }

// reportOf is the report a changed message or an observation carries.
type reportOf struct {
	Summary string         `json:"summary"`
	Text    string         `json:"text"`
	Added   []string       `json:"added"`
	Edited  []string       `json:"edited"`
	Removed []string       `json:"removed"`
	Review  map[string]any `json:"review"`
}

func messageReport(t *testing.T, m *vigil.Message) reportOf {
	t.Helper()
	var d struct {
		Observation struct {
			Summary string `json:"summary"`
			Facts   struct {
				Report reportOf `json:"report"`
			} `json:"facts"`
		} `json:"observation"`
	}
	if err := json.Unmarshal(m.Data, &d); err != nil {
		t.Fatalf("message data: %v", err)
	}
	return d.Observation.Facts.Report
}

func observationReport(t *testing.T, o *vigil.Observation) reportOf {
	t.Helper()
	b, _ := json.Marshal(o.Facts["report"])
	var r reportOf
	_ = json.Unmarshal(b, &r)
	return r
}

// hasLines reports the first of want that text lacks as a line.
func missingLine(text string, want ...string) string {
	lines := map[string]bool{}
	for _, l := range strings.Split(text, "\n") {
		lines[l] = true
	}
	for _, w := range want {
		if !lines[w] {
			return w
		}
	}
	return ""
}

// needInotify skips a test of the event path where this machine has no
// inotify: asked of fsnotify directly, so a bug in the code under test
// cannot turn into a skip.
func needInotify(t *testing.T) {
	t.Helper()
	fw, err := fsnotify.NewWatcher()
	if err == nil {
		err = fw.Add(t.TempDir())
		fw.Close()
	}
	if err != nil {
		t.Skipf("inotify is not available here: %v", err)
	}
}
