// Package folder is the watcher for kind folder: a watch on the changes
// someone else makes to a folder (or to one file), reported in settled
// bursts as a summary line and unified diffs, and optionally reviewed by
// a command the watch names.
//
// The predicate:
//
//	{"path": "/srv/docs"}
//	{"path": "/src/app", "pattern": ["*.go", "docs/**/*.md"], "settle": "20s", "standing": true}
//	{"path": "/src/app", "standing": true, "on_change": ["llm", "review", "--stdin"]}
//
// path is absolute: a folder, watched recursively, or one file. pattern
// (a glob or a list of globs, each may hold several separated by commas;
// "**" crosses folders) limits which files count: a glob without a slash
// matches a file's name at any depth ("*.go"), one with a slash matches
// its path from the folder ("docs/**/*.md"); none means every file.
// Version control folders (.git, .hg, .svn, .jj, .bzr) are left out.
// settle (default 20s, 0 to report every change) is how long the folder
// must stay still before a burst of changes is reported; max_wait
// (default five times settle, at least 1m) bounds how long a burst that
// never goes quiet waits: it is reported anyway, and the window starts
// again. standing makes
// the watch report each burst until it is cancelled; without it the first
// settled burst fires the watch. max_file_bytes (1 MiB) bounds the files
// whose content is read: larger ones are tracked by size and modification
// time alone. max_files (2 000) bounds the files tracked (the first ones
// in path order); a look reads at most max(10 × max_files, 10 000)
// directory entries, so a huge directory is not read whole, and stops
// where a bound is reached: past it, only what is known to have changed
// is reported, never a file that is still there as removed.
// report_max_chars (24 000) bounds a report. on_change
// names a reviewer: argv (a list), a shell line (a string), or an object
// {argv | shell, cwd, env, timeout (default 5m, at most 10m)}; it runs in
// the folder (unless cwd says otherwise) with the report on stdin, and
// what it prints goes into the message. The canonical form fills every
// default, sorts the globs and spells on_change as an object:
//
//	{"max_file_bytes": 1048576, "max_files": 2000, "max_wait": "1m40s", "path": "/src/app", "pattern": ["*.go"], "report_max_chars": 24000, "settle": "20s", "standing": true}
//
// # Baseline
//
// The first probe records the folder as the baseline and answers pending:
// only later changes count. The baseline is the observation's facts: for
// each file, "<size> <mtime ns> <kind><hash>" (kind t text, b binary, s
// size only; hash the first 128 bits of SHA-256), plus a digest of them.
// A probe compares the folder with the baseline, reading only files whose
// size or mtime changed, and writes nothing while nothing changed: its
// facts are the baseline's. To show what an edit changed, the previous
// contents of small text files are kept outside the facts, in a
// content-addressed store under Config.BlobDir (see blobs), bounded per
// watch by Config.MaxKeptBytes; a file whose old content was not kept is
// reported as edited without a diff.
//
// # Settling
//
// A probe that finds changes notes, in memory, when it first saw the
// folder as it is now. While that is younger than settle it answers
// pending with the baseline's facts unchanged (so the baseline does not
// move) and asks the notifier to wake the watch when the window closes.
// A burst that goes on for max_wait is reported then, still or not.
// Once the folder has been still for settle, the probe answers satisfied:
// its facts are the new baseline and the report. The scheduler writes a
// standing watch's report as a "changed" message in the same transaction
// as the new baseline; a one-shot watch fires with it. The baseline moves
// with every report, whatever the reviewer did, so no change is reported
// twice. A restart forgets the window, not the baseline: what changed
// while the daemon was down is reported once the folder is still.
//
// # Waking
//
// With a Config.Waker (the daemon's fsevent.Notifier), each probe
// registers the folder's directories: a change pokes the watch at once,
// and a new subfolder is watched as it appears. The watch's interval
// (EventEvery) is then only a safety net. When events cannot be had
// (inotify unavailable, its limit reached, a network file system) the
// notifier wakes the watch every PollEvery instead, and the observation
// says so. Without a Waker the watch polls at the kind's interval.
//
// # Roots
//
// With Config.Roots set, path must resolve (after symlinks) inside a root:
// Admit refuses others as unobservable, naming the roots setting, and
// every probe checks again. A symlink inside the folder whose target lies
// outside the roots is not followed (the report names it); links to
// folders are never followed.
package folder

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/vigil-run/vigil"
	"github.com/vigil-run/vigil/internal/fspath"
	"github.com/vigil-run/vigil/internal/proc"
	"github.com/vigil-run/vigil/watcher"
	"github.com/vigil-run/vigil/watcher/fsevent"
)

// Defaults and bounds of a folder predicate and of a watcher.
const (
	DefaultSettle         = 20 * time.Second
	MaxSettle             = time.Hour
	MaxMaxWait            = 24 * time.Hour
	DefaultMaxFileBytes   = 1 << 20
	MaxMaxFileBytes       = 16 << 20
	DefaultMaxFiles       = 2000
	MaxMaxFiles           = 20_000
	DefaultReportMaxChars = 24_000
	MinReportMaxChars     = 500
	MaxReportMaxChars     = 200_000
	MaxPatterns           = 64
	MaxPatternBytes       = 512
	MaxPath               = 4096
	DefaultReviewTimeout  = 5 * time.Minute
	// DefaultMaxKeptBytes bounds the previous contents kept per watch.
	DefaultMaxKeptBytes = 64 << 20
	// EventEvery is the interval of a watch woken by file system events:
	// a safety net for an event the kernel lost without saying so (a
	// queue overflow wakes every watch at once). One re-check of a small
	// folder costs about 0.14 ms of CPU, so 1 000 watches cost about 5 ms
	// of CPU a minute at this interval (bench/folder).
	EventEvery = 30 * time.Minute
	// PollEvery is how often a watch looks when events cannot be had.
	PollEvery = 10 * time.Second
	// retryAfter is when a watch that could not look tries again.
	retryAfter = 30 * time.Second
	// maxReadBytes bounds the contents one probe holds in memory; files
	// read beyond it are read again for the report.
	maxReadBytes = 8 << 20
	// reviewOutput bounds the reviewer's output in the facts.
	reviewOutput = 16 << 10
	reviewStderr = 2 << 10
	// maxNames bounds each list of changed files in the facts.
	maxNames = 200
)

// Waker is what the folder watcher needs of the file system notifier
// (fsevent.Notifier).
type Waker interface {
	Watch(id string, now time.Time, t fsevent.Target) fsevent.Status
	WakeAt(id string, at time.Time)
	Unwatch(id string)
}

// Config configures the folder watcher.
type Config struct {
	// Roots, when not empty, are the directories a watched path must
	// resolve inside (the daemon's roots setting).
	Roots []string
	// AllowExec allows on_change reviewers (the daemon's --allow-exec).
	AllowExec bool
	// Waker wakes watches on file system events; nil: watches poll at the
	// kind's interval.
	Waker Waker
	// BlobDir keeps the previous contents of small text files for diffs
	// (the daemon passes <data_dir>/folder); "" keeps none, so edits are
	// reported without a diff.
	BlobDir string
	// MaxKeptBytes bounds the contents kept per watch (default
	// DefaultMaxKeptBytes).
	MaxKeptBytes int64
	// KillGrace is the reviewer's time between SIGTERM and SIGKILL.
	KillGrace time.Duration
	// DataDir is the daemon's data directory, never walked: its database
	// and BlobDir change with every report, which a watch on a folder
	// above it would report, and report again, without end.
	DataDir string
}

// Watcher answers folder watches.
type Watcher struct {
	roots     fspath.Roots
	allowExec bool
	waker     Waker
	blobs     blobs
	maxKept   int64
	runner    proc.Runner
	dataDir   string // resolved; "" when none
	// readFileFunc reads one file (readFile; a test may fail it).
	readFileFunc func(path string, limit int64) ([]byte, entry, error)

	mu    sync.Mutex
	state map[string]*state
}

// state is what the watcher remembers of a watch between probes: in
// memory only, so a restart forgets it (and loses nothing but time).
type state struct {
	// pred and spec are the predicate last parsed for the watch.
	pred string
	spec *spec
	// burst is the digest of the folder as the watch last saw it changed,
	// and since is when it first saw it so; first is when the burst's
	// first change was seen, which max_wait counts from.
	burst string
	since time.Time
	first time.Time
	// gc is the baseline digest whose unneeded blobs were last removed.
	gc string
}

var _ watcher.Watcher = (*Watcher)(nil)

// New returns a folder watcher.
func New(cfg Config) *Watcher {
	w := &Watcher{
		roots:     fspath.NewRoots(cfg.Roots),
		allowExec: cfg.AllowExec,
		waker:     cfg.Waker,
		blobs:     blobs{dir: cfg.BlobDir},
		maxKept:   cfg.MaxKeptBytes,
		runner:    proc.Runner{KillGrace: cfg.KillGrace},
		state:     make(map[string]*state),

		readFileFunc: readFile,
	}
	if w.maxKept <= 0 {
		w.maxKept = DefaultMaxKeptBytes
	}
	if cfg.DataDir != "" {
		if d, err := filepath.Abs(cfg.DataDir); err == nil {
			if r, err := filepath.EvalSymlinks(d); err == nil {
				d = r
			}
			w.dataDir = d
		}
	}
	return w
}

// Kind returns vigil.KindFolder.
func (*Watcher) Kind() vigil.Kind { return vigil.KindFolder }

// Canonicalize validates the predicate and returns its canonical form; a
// predicate with standing true makes a standing watch. It does not look
// at the file system.
func (w *Watcher) Canonicalize(_ context.Context, raw json.RawMessage, _ time.Time) (watcher.Canonical, error) {
	s, err := parse(raw)
	if err != nil {
		return watcher.Canonical{}, err
	}
	b, err := watcher.Encode(s.canonical)
	if err != nil {
		return watcher.Canonical{}, err
	}
	c := watcher.Canonical{Predicate: b, Standing: s.Standing, Exec: s.OnChange != nil}
	if w.waker != nil {
		c.Every = EventEvery
	}
	return c, nil
}

// Admit refuses a path that resolves outside the roots, and a reviewer
// while exec is not allowed.
func (w *Watcher) Admit(_ context.Context, predicate json.RawMessage) error {
	s, err := parse(predicate)
	if err != nil {
		return err
	}
	if s.OnChange != nil && !w.allowExec {
		return watcher.Unobservable("folder watches with on_change run a reviewer command: start the daemon with --allow-exec (VIGIL_ALLOW_EXEC=1), or leave on_change out")
	}
	return w.roots.Admit(s.Path)
}

// FinalProbe implements watcher.FinalProber: the probe at the deadline
// reports a burst still settling, which an earlier probe waits on, so it
// runs even after a probe that was running as the deadline came.
func (*Watcher) FinalProbe() {}

// Forget lets go of what the watcher keeps for watch id: its settle
// window and its kept contents. The daemon calls it for a watch that
// ended (through the notifier's DropFunc).
func (w *Watcher) Forget(id string) {
	w.mu.Lock()
	delete(w.state, id)
	w.mu.Unlock()
	w.blobs.drop(id)
}

// Sweep removes the kept contents of every watch keep does not name: the
// daemon calls it at start-up with the pending folder watches.
func (w *Watcher) Sweep(keep func(id string) bool) error { return w.blobs.sweep(keep) }

func (w *Watcher) stateOf(id string) *state {
	w.mu.Lock()
	defer w.mu.Unlock()
	st := w.state[id]
	if st == nil {
		st = &state{}
		w.state[id] = st
	}
	return st
}

// Probe looks at the folder once and compares it with the baseline.
func (w *Watcher) Probe(ctx context.Context, p watcher.Probe) (vigil.Observation, error) {
	if err := watcher.CheckKind(p, vigil.KindFolder); err != nil {
		return vigil.Observation{}, err
	}
	st := w.stateOf(p.WatchID)
	if st.spec == nil || st.pred != string(p.Predicate) {
		s, err := parse(p.Predicate)
		if err != nil {
			return vigil.Observation{}, watcher.Permanent(fmt.Errorf("stored folder predicate is invalid: %w", err))
		}
		st.pred, st.spec = string(p.Predicate), s
	}
	s := st.spec
	var last map[string]any
	if p.Last != nil {
		last = p.Last.Facts
	}
	base, hasBase := decodeBaseline(last)
	// An answer that cannot tell keeps the baseline's facts: a one-shot
	// watch records it, and must not lose its baseline to it.
	unavailable := func(err error) (vigil.Observation, error) {
		if w.waker != nil && !watcher.IsPermanent(err) {
			w.waker.WakeAt(p.WatchID, p.Now.Add(retryAfter))
		}
		return vigil.Observation{Facts: last}, err
	}
	resolved, err := w.roots.Resolve(s.Path)
	if err != nil {
		var out *fspath.OutsideError
		if errors.As(err, &out) {
			return unavailable(watcher.Permanent(err))
		}
		return unavailable(fmt.Errorf("resolving %s: %w", s.Path, err))
	}
	var prev map[string]entry
	if hasBase {
		prev = base.files
	}
	snap, err := w.look(ctx, s, resolved, prev)
	if err != nil {
		return unavailable(fmt.Errorf("reading %s: %w", s.Path, err))
	}
	wake, added := w.register(p, s.Path, resolved, snap)
	for range maxRelooks {
		if !added {
			break
		}
		// The look came before these directories were watched: a change
		// made in them between the two raised no event, and would wait
		// for the watch's long interval (EventEvery). Look again, now
		// that they are watched; only what changed since the first look
		// is read again.
		again, err := w.look(ctx, s, resolved, snap.files)
		if err != nil {
			return unavailable(fmt.Errorf("reading %s: %w", s.Path, err))
		}
		for rel, data := range snap.content {
			// What the first look read of a file the second found
			// unchanged (and so did not read).
			if _, ok := again.content[rel]; !ok && again.files[rel] == snap.files[rel] {
				again.content[rel] = data
			}
		}
		snap = again
		wake, added = w.register(p, s.Path, resolved, snap)
	}

	keepMax := w.maxKept
	if !hasBase {
		// The first look: the folder as it is now is the baseline.
		w.keepAll(p.WatchID, snap, keepSet(snap.files, keepMax))
		return pending(s, snapFacts(s, snap, wake, nil)), nil
	}
	if st.gc != base.digest {
		w.blobs.gc(p.WatchID, keepSet(base.files, keepMax))
		st.gc = base.digest
	}
	changes, other := diffSnapshots(base, snap)
	if len(changes) == 0 {
		st.burst, st.since, st.first = "", time.Time{}, time.Time{}
		if other || wake != base.wake || !sameNotes(base.facts, snap) {
			// Only times or the way the watch is woken changed: the
			// baseline moves silently, keeping the last report.
			return pending(s, snapFacts(s, snap, wake, base.facts["report"])), nil
		}
		return pending(s, base.facts), nil
	}
	digest := digestOf(snap.files)
	if st.burst != digest {
		st.burst, st.since = digest, p.Now
	}
	if st.first.IsZero() {
		st.first = p.Now
	}
	// The window closes when the folder has been still for settle, or,
	// for a burst that never goes quiet, max_wait after its first change.
	due := st.since.Add(s.settle)
	if capped := st.first.Add(s.maxWait); capped.Before(due) {
		due = capped
	}
	if p.Now.Before(due) && !p.Final {
		// Still settling: keep the baseline, look again when the window
		// closes (or sooner, on the next change). The deadline cuts the
		// window short: a change made in time is reported by the final
		// probe, never lost to the expiry (nor, for an unless watch,
		// taken for a window in which nothing happened).
		if w.waker != nil {
			w.waker.WakeAt(p.WatchID, due)
		}
		return pending(s, base.facts), nil
	}
	keep := keepSet(snap.files, keepMax)
	r := w.writeReport(p.WatchID, s, snap, changes, keep)
	rep := map[string]any{
		"at":      vigil.FormatTime(p.Now),
		"summary": r.line,
		"text":    r.text,
	}
	for k, names := range map[string][]string{"added": r.added, "edited": r.edited, "removed": r.removed} {
		if len(names) > 0 {
			rep[k] = clipNames(names)
		}
	}
	if len(r.cut) > 0 {
		rep["cut"] = clipNames(r.cut)
	}
	summary := reportSummary(snap, r)
	if s.OnChange != nil {
		review := w.review(ctx, p, s, resolved, snap, r.text)
		rep["review"] = review
		summary += reviewNote(review)
	}
	st.burst, st.since, st.first = "", time.Time{}, time.Time{}
	facts := snapFacts(s, snap, wake, rep)
	if !s.Standing {
		// A one-shot watch fires with this answer: nothing more to watch.
		if w.waker != nil {
			w.waker.Unwatch(p.WatchID)
		}
		w.Forget(p.WatchID)
	}
	return vigil.Observation{Verdict: vigil.VerdictSatisfied, Summary: watcher.Clip(summary, 1024), Facts: facts}, nil
}

// maxRelooks bounds how many times one probe looks at its folder again
// because its registration began watching directories the look had found
// (each look finds only the directories that exist when it walks; a
// folder still growing new ones is caught by their events after that).
const maxRelooks = 2

// register tells the notifier what to watch and returns how the watch is
// woken, as the facts spell it, and whether it began watching a directory
// for the watch (fsevent.Status.Added).
func (w *Watcher) register(p watcher.Probe, path, resolved string, snap *snapshot) (string, bool) {
	if w.waker == nil {
		return "polling at the watch's interval", false
	}
	t := fsevent.Target{Poll: PollEvery}
	// A symlink on the way to what the watch reads changes where no
	// watched directory sees it: one in the path (pointed elsewhere in
	// its own folder), or a followed link's target (edited in its own).
	linkDirs, linkNames := pathLinks(path)
	switch {
	case snap.exists && !snap.single:
		t.Dirs, t.Recursive, t.Skip = append(slices.Clone(snap.dirs), linkDirs...), true, skipDir
		for rel, real := range snap.real {
			if d := filepath.Dir(real); d != filepath.Dir(filepath.Join(resolved, filepath.FromSlash(rel))) {
				t.Dirs = append(t.Dirs, d)
			}
		}
	case snap.exists:
		t.Dirs, t.Names = []string{filepath.Dir(resolved)}, []string{filepath.Base(resolved)}
		t.Dirs, t.Names = append(t.Dirs, linkDirs...), append(t.Names, linkNames...)
	default:
		// Not there yet: watch the deepest folder that is, for the next
		// step of the path to appear.
		dir, name := existingParent(resolved)
		if dir != "" {
			t.Dirs, t.Names = []string{dir}, []string{name}
			t.Dirs, t.Names = append(t.Dirs, linkDirs...), append(t.Names, linkNames...)
		}
	}
	st := w.waker.Watch(p.WatchID, p.Now, t)
	if st.Events {
		return "events", st.Added
	}
	return fmt.Sprintf("polling every %s: %s", vigil.FormatDuration(PollEvery), st.Reason), false
}

// pathLinks returns the folder and name of each symlink among path's
// components: pointing one elsewhere changes what path names.
func pathLinks(path string) (dirs, names []string) {
	for p := filepath.Clean(path); ; {
		parent := filepath.Dir(p)
		if parent == p {
			return dirs, names
		}
		if fi, err := os.Lstat(p); err == nil && fi.Mode()&fs.ModeSymlink != 0 {
			if r, err := filepath.EvalSymlinks(parent); err == nil {
				dirs, names = append(dirs, r), append(names, filepath.Base(p))
			}
		}
		p = parent
	}
}

// keepAll keeps the contents of a new baseline's text files.
func (w *Watcher) keepAll(id string, snap *snapshot, keep map[string]bool) {
	if !w.blobs.enabled() {
		return
	}
	for _, rel := range snap.names() {
		e := snap.files[rel]
		if e.kind != kindText || !keep[e.hash] || w.blobs.has(id, e.hash) {
			continue
		}
		data, ok := snap.content[rel]
		if !ok {
			d, _, err := readFile(snap.real[rel], e.size)
			if err != nil || hashOf(d) != e.hash {
				continue
			}
			data = d
		}
		_ = w.blobs.put(id, e.hash, data)
	}
}

// snapFacts spells a snapshot as an observation's facts; rep, when set,
// is the report they carry (the last one, for a pending answer).
func snapFacts(s *spec, snap *snapshot, wake string, rep any) map[string]any {
	files := make(map[string]string, len(snap.files))
	for k, e := range snap.files {
		files[k] = e.String()
	}
	facts := map[string]any{
		"path":       s.Path,
		"files":      files,
		"file_count": len(snap.files),
		"digest":     digestOf(snap.files),
		"wake":       wake,
	}
	if !snap.exists {
		facts["exists"] = false
	}
	if snap.truncated {
		facts["truncated"] = true
		facts["frontier"] = snap.frontier
	}
	if len(snap.notFollowed) > 0 {
		facts["not_followed"] = clipNames(snap.notFollowed)
	}
	if rep != nil {
		facts["report"] = rep
	}
	return facts
}

// sameNotes reports whether the baseline's notes (exists, truncated, not
// followed) say what the snapshot says.
func sameNotes(facts map[string]any, snap *snapshot) bool {
	exists := true
	if v, ok := facts["exists"].(bool); ok {
		exists = v
	}
	truncated, _ := facts["truncated"].(bool)
	frontier, _ := facts["frontier"].(string)
	var nf []string
	switch v := facts["not_followed"].(type) {
	case []string:
		nf = v
	case []any:
		for _, x := range v {
			s, _ := x.(string)
			nf = append(nf, s)
		}
	}
	want := clipNames(snap.notFollowed)
	if len(nf) != len(want) {
		return false
	}
	for i := range nf {
		if nf[i] != want[i] {
			return false
		}
	}
	return exists == snap.exists && truncated == snap.truncated && frontier == snap.frontier
}

func clipNames(names []string) []string {
	if len(names) <= maxNames {
		return names
	}
	out := append([]string(nil), names[:maxNames]...)
	return append(out, fmt.Sprintf("… and %d more", len(names)-maxNames))
}

// pending is the answer that the folder has not (or not yet) changed. Its
// summary is made from the facts alone, so the same facts give the same
// observation and an unchanged folder writes nothing.
func pending(s *spec, facts map[string]any) vigil.Observation {
	return vigil.Observation{Verdict: vigil.VerdictPending, Summary: pendingSummary(s, facts), Facts: facts}
}

func pendingSummary(s *spec, facts map[string]any) string {
	var b strings.Builder
	n := intFact(facts["file_count"])
	switch exists, ok := facts["exists"].(bool); {
	case ok && !exists:
		fmt.Fprintf(&b, "%s does not exist yet", s.Path)
	case n == 1:
		b.WriteString("1 file watched")
	default:
		fmt.Fprintf(&b, "%d files watched", n)
	}
	if t, _ := facts["truncated"].(bool); t {
		if frontier, ok := facts["frontier"].(string); ok {
			fmt.Fprintf(&b, " (%s)", truncationNote(s, frontier))
		} else { // facts from an older build
			fmt.Fprintf(&b, " (the first %d: max_files)", s.MaxFiles)
		}
	}
	wake, _ := facts["wake"].(string)
	if wake == "events" {
		b.WriteString(", woken by file system events")
	} else if wake != "" {
		b.WriteString(", " + wake)
	}
	if rep, ok := facts["report"].(map[string]any); ok {
		at, _ := rep["at"].(string)
		sum, _ := rep["summary"].(string)
		fmt.Fprintf(&b, "; last change reported at %s: %s", at, sum)
	} else {
		b.WriteString("; no change since the baseline")
	}
	return b.String()
}

func intFact(v any) int {
	switch n := v.(type) {
	case int:
		return n
	case float64:
		return int(n)
	case json.Number:
		i, _ := n.Int64()
		return int(i)
	}
	return 0
}

// reportSummary is the one line of a report: "notes.md edited" for a
// watch on one file, else the counts and the first names.
func reportSummary(snap *snapshot, r *report) string {
	groups := []struct {
		names []string
		verb  string
	}{{r.added, "added"}, {r.edited, "edited"}, {r.removed, "removed"}}
	if snap.single {
		for _, g := range groups {
			if len(g.names) > 0 {
				return g.names[0] + " " + g.verb
			}
		}
	}
	var all []string
	for _, g := range groups {
		all = append(all, g.names...)
	}
	sort.Strings(all)
	return r.line + ": " + nameList(all, 200)
}
