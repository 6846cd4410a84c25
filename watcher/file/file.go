// Package file is the watcher for kind file: a watch on whether a path
// exists and, optionally, what the file holds.
//
// The predicate:
//
//	{"path": "/srv/app/READY", "exists": true}
//	{"path": "/var/log/app.log", "contains": "listening on"}
//	{"path": "/tmp/out.json", "matches": "\"state\":\\s*\"done\"", "max_bytes": 65536}
//
// path is absolute; exists defaults to true; at most one of contains (a
// substring) and matches (an RE2 regular expression) may be given, and only
// with exists true. max_bytes (default 1 MiB, at most 16 MiB) bounds how
// much of the file is searched: a larger file is searched in its LAST
// max_bytes, where a growing log writes. The canonical form has path
// cleaned, exists always present, and max_bytes only with contains or
// matches:
//
//	{"exists": true, "path": "/var/log/app.log", "contains": "listening on", "max_bytes": 1048576}
//
// A probe is satisfied when the state matches, else pending. A path that
// exists must, for contains and matches, be a regular file. Errors other
// than "does not exist" (permission denied, say) are unavailable.
//
// A symbolic link is present as soon as the link exists, whatever it
// points to (exists is decided with lstat): a dangling link satisfies
// exists:true and keeps exists:false pending. contains and matches read
// the file the link points to; a link to nothing has nothing to read and
// stays pending. The file is opened without blocking and checked again
// once open, so a file swapped for a named pipe is never waited on.
//
// With Config.Roots set, a path must resolve inside one of the roots: the
// path itself after symlinks, or, while it does not exist yet, its deepest
// existing parent. Admit refuses other paths as unobservable, and every
// probe checks the resolved path again, so a symlink planted later cannot
// lead a probe outside.
//
// With Config.Waker set (the daemon's file system notifier), a change in
// the file's folder wakes the watch at once instead of at its next
// interval; the interval (5s) stays as the fallback.
package file

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"time"

	"github.com/vigil-run/vigil"
	"github.com/vigil-run/vigil/internal/fspath"
	"github.com/vigil-run/vigil/watcher"
	"github.com/vigil-run/vigil/watcher/fsevent"
)

// Defaults and bounds of a file predicate.
const (
	DefaultMaxBytes = 1 << 20
	MaxMaxBytes     = 16 << 20
	MaxPath         = 4096
	MaxContains     = 4096
	MaxPattern      = 1024
	// maxShown bounds the contains or matches text shown in a summary.
	maxShown = 64
)

// Config configures the file watcher.
type Config struct {
	// Roots, when not empty, are the directories a watched path must
	// resolve inside (the daemon's roots setting, VIGIL_ROOTS).
	Roots []string
	// Waker, when set, wakes a watch as soon as its file's folder
	// changes (the daemon's fsevent.Notifier); the watch's interval
	// still applies.
	Waker Waker
}

// Waker is what the file watcher needs of the file system notifier
// (fsevent.Notifier).
type Waker interface {
	Watch(id string, now time.Time, t fsevent.Target) fsevent.Status
	Unwatch(id string)
}

// Watcher answers file watches.
type Watcher struct {
	roots fspath.Roots
	waker Waker
}

var _ watcher.Watcher = (*Watcher)(nil)

// New returns a file watcher. Relative roots are made absolute.
func New(cfg Config) *Watcher {
	return &Watcher{roots: fspath.NewRoots(cfg.Roots), waker: cfg.Waker}
}

type input struct {
	Path     string `json:"path"`
	Exists   *bool  `json:"exists,omitempty"`
	Contains string `json:"contains,omitempty"`
	Matches  string `json:"matches,omitempty"`
	MaxBytes *int64 `json:"max_bytes,omitempty"`
}

type canonical struct {
	Path     string `json:"path"`
	Exists   bool   `json:"exists"`
	Contains string `json:"contains,omitempty"`
	Matches  string `json:"matches,omitempty"`
	MaxBytes int64  `json:"max_bytes,omitempty"`
}

type spec struct {
	canonical
	re *regexp.Regexp
}

func (s *spec) content() bool { return s.Contains != "" || s.Matches != "" }

// Kind returns vigil.KindFile.
func (*Watcher) Kind() vigil.Kind { return vigil.KindFile }

// Canonicalize validates the predicate and returns its canonical form. It
// does not look at the file system.
func (*Watcher) Canonicalize(_ context.Context, raw json.RawMessage, _ time.Time) (watcher.Canonical, error) {
	s, err := parse(raw)
	if err != nil {
		return watcher.Canonical{}, err
	}
	b, err := watcher.Encode(s.canonical)
	if err != nil {
		return watcher.Canonical{}, err
	}
	return watcher.Canonical{Predicate: b}, nil
}

func parse(raw json.RawMessage) (*spec, error) {
	var in input
	if err := watcher.Decode(raw, "", &in); err != nil {
		return nil, err
	}
	s := &spec{}
	var err error
	if s.Path, err = fspath.Check("path", in.Path, MaxPath); err != nil {
		return nil, err
	}
	s.Exists = in.Exists == nil || *in.Exists
	if in.Contains != "" && in.Matches != "" {
		return nil, watcher.InvalidPredicate("", "has both contains and matches: give at most one")
	}
	if (in.Contains != "" || in.Matches != "") && !s.Exists {
		return nil, watcher.InvalidPredicate("exists", "must be true with contains or matches")
	}
	if len(in.Contains) > MaxContains {
		return nil, watcher.InvalidPredicate("contains", "is longer than %d bytes", MaxContains)
	}
	s.Contains = in.Contains
	if in.Matches != "" {
		if len(in.Matches) > MaxPattern {
			return nil, watcher.InvalidPredicate("matches", "is longer than %d bytes", MaxPattern)
		}
		re, err := regexp.Compile(in.Matches)
		if err != nil {
			return nil, watcher.InvalidPredicate("matches", "is not a valid RE2 regular expression")
		}
		s.Matches, s.re = in.Matches, re
	}
	maxBytes := int64(DefaultMaxBytes)
	if in.MaxBytes != nil {
		if *in.MaxBytes < 1 || *in.MaxBytes > MaxMaxBytes {
			return nil, watcher.InvalidPredicate("max_bytes", "must be from 1 to %d", MaxMaxBytes)
		}
		maxBytes = *in.MaxBytes
	}
	if s.content() {
		s.MaxBytes = maxBytes
	}
	return s, nil
}

// Admit refuses a path that resolves outside the configured roots (see
// Roots.Admit).
func (w *Watcher) Admit(_ context.Context, predicate json.RawMessage) error {
	if !w.roots.Set() {
		return nil
	}
	s, err := parse(predicate)
	if err != nil {
		return err
	}
	return w.roots.Admit(s.Path)
}

// Probe looks at the file once. With a Waker, it first registers the
// file's folder (or, while the file's folder does not exist yet, the
// deepest one that does), so a change wakes the watch at once; a
// satisfied watch is unregistered.
func (w *Watcher) Probe(ctx context.Context, p watcher.Probe) (vigil.Observation, error) {
	obs, err := w.probe(ctx, p)
	if w.waker != nil && err == nil && obs.Verdict == vigil.VerdictSatisfied {
		w.waker.Unwatch(p.WatchID)
	}
	return obs, err
}

// wake registers the folder that will see target change.
func (w *Watcher) wake(p watcher.Probe, target string) {
	if w.waker == nil {
		return
	}
	dir, name := filepath.Dir(target), filepath.Base(target)
	for {
		if info, err := os.Stat(dir); err == nil && info.IsDir() {
			break
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return
		}
		dir, name = parent, filepath.Base(dir)
	}
	w.waker.Watch(p.WatchID, p.Now, fsevent.Target{Dirs: []string{dir}, Names: []string{name}})
}

func (w *Watcher) probe(_ context.Context, p watcher.Probe) (vigil.Observation, error) {
	if err := watcher.CheckKind(p, vigil.KindFile); err != nil {
		return vigil.Observation{}, err
	}
	s, err := parse(p.Predicate)
	if err != nil {
		return vigil.Observation{}, watcher.Permanent(fmt.Errorf("stored file predicate is invalid: %w", err))
	}
	target := s.Path
	if w.roots.Set() {
		resolved, err := w.roots.Resolve(s.Path)
		var out *fspath.OutsideError
		if errors.As(err, &out) {
			return vigil.Observation{}, watcher.Permanent(err)
		}
		if err != nil {
			return vigil.Observation{}, fmt.Errorf("resolving %s: %w", s.Path, unwrapPath(err))
		}
		target = resolved
	}
	w.wake(p, target)

	facts := map[string]any{"path": s.Path}
	// A link is present even when it points nowhere: lstat, not stat.
	info, err := os.Lstat(target)
	exists := err == nil
	switch {
	case err == nil:
	case errors.Is(err, fs.ErrNotExist), errors.Is(err, syscall.ENOTDIR):
	default:
		return vigil.Observation{}, fmt.Errorf("checking %s: %w", s.Path, unwrapPath(err))
	}
	facts["exists"] = exists
	if afterLook != nil {
		afterLook(target)
	}
	if !exists {
		if s.Exists {
			return obs(vigil.VerdictPending, s.Path+" does not exist yet", facts), nil
		}
		return obs(vigil.VerdictSatisfied, s.Path+" does not exist", facts), nil
	}
	if !s.Exists {
		return obs(vigil.VerdictPending, s.Path+" still exists", facts), nil
	}
	if !s.content() {
		return obs(vigil.VerdictSatisfied, s.Path+" exists", facts), nil
	}
	if info.Mode()&fs.ModeSymlink != 0 {
		// Content is read through the link.
		info, err = os.Stat(target)
		switch {
		case errors.Is(err, fs.ErrNotExist), errors.Is(err, syscall.ENOTDIR), errors.Is(err, syscall.ELOOP):
			facts["regular"] = false
			return obs(vigil.VerdictPending, fmt.Sprintf("%s is a symbolic link to nothing, so it cannot %s", s.Path, s.describe(true)), facts), nil
		case err != nil:
			return vigil.Observation{}, fmt.Errorf("checking %s: %w", s.Path, unwrapPath(err))
		}
	}
	notRegular := func() vigil.Observation {
		facts["regular"] = false
		return obs(vigil.VerdictPending, fmt.Sprintf("%s exists but is not a regular file, so it cannot %s", s.Path, s.describe(true)), facts)
	}
	if !info.Mode().IsRegular() {
		return notRegular(), nil
	}
	// With roots, target was resolved inside them, every link followed
	// (a link left pointed nowhere then): a link there now points where
	// the roots were not checked, and is not followed.
	data, tail, err := readTail(target, s.MaxBytes, w.roots.Set())
	if errors.Is(err, errNotRegular) {
		return notRegular(), nil // swapped since the stat
	}
	if errors.Is(err, syscall.ELOOP) && w.roots.Set() {
		return vigil.Observation{}, fmt.Errorf("reading %s: it is now a symbolic link, to a file not checked against the roots; the path is resolved again at the next probe", s.Path)
	}
	if err != nil {
		return vigil.Observation{}, fmt.Errorf("reading %s: %w", s.Path, unwrapPath(err))
	}
	if tail {
		facts["searched"] = fmt.Sprintf("last %d bytes", s.MaxBytes)
	}
	var found bool
	if s.Contains != "" {
		found = strings.Contains(string(data), s.Contains)
	} else {
		found = s.re.Match(data)
	}
	facts["matched"] = found
	if found {
		return obs(vigil.VerdictSatisfied, fmt.Sprintf("%s %s", s.Path, s.describe(false)), facts), nil
	}
	return obs(vigil.VerdictPending, fmt.Sprintf("%s exists but does not yet %s", s.Path, s.describe(true)), facts), nil
}

// describe words the content check: `contains "x"`, or with base
// `contain "x"` to follow "does not".
func (s *spec) describe(base bool) string {
	verb := map[bool]string{false: "contains", true: "contain"}
	what := fmt.Sprintf("%q", watcher.Clip(s.Contains, maxShown))
	if s.Contains == "" {
		verb = map[bool]string{false: "matches", true: "match"}
		what = "/" + watcher.Clip(s.Matches, maxShown) + "/"
	}
	return verb[base] + " " + what
}

func obs(v vigil.Verdict, summary string, facts map[string]any) vigil.Observation {
	return vigil.Observation{Verdict: v, Summary: summary, Facts: facts}
}

// errNotRegular says the file opened is not a regular file.
var errNotRegular = errors.New("not a regular file")

// afterLook, when set (by tests), is called once a probe has looked at
// target, before it reads it: a file swapped meanwhile.
var afterLook func(target string)

// readTail reads the whole file if it holds at most limit bytes, else its
// last limit bytes; tail reports the second case. The open never waits
// (on a named pipe swapped in since the caller's stat, say), and the file
// opened must be a regular one, else errNotRegular. With noFollow, a
// symbolic link at path is not followed (syscall.ELOOP on Linux).
func readTail(path string, limit int64, noFollow bool) (data []byte, tail bool, err error) {
	flags := openFlags
	if noFollow {
		flags |= noFollowFlag
	}
	f, err := os.OpenFile(path, flags, 0)
	if err != nil {
		return nil, false, err
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return nil, false, err
	}
	if !info.Mode().IsRegular() {
		return nil, false, errNotRegular
	}
	if size := info.Size(); size > limit {
		if _, err := f.Seek(size-limit, io.SeekStart); err != nil {
			return nil, false, err
		}
		tail = true
	}
	data, err = io.ReadAll(io.LimitReader(f, limit))
	return data, tail, err
}

// unwrapPath drops the "stat /path:" prefix of a *fs.PathError, whose path
// the caller names already.
func unwrapPath(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}
