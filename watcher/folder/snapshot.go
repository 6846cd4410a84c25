package folder

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"unicode/utf8"
)

// Kinds of tracked file.
const (
	kindText   = 't' // content hashed, diffed, kept for the next diff
	kindBinary = 'b' // content hashed, named but never diffed
	kindSize   = 's' // over max_file_bytes or unreadable: size and mtime only
)

// entry is one tracked file, spelled in the facts as
// "<size> <mtime unix ns> <kind><hash>", e.g. "120 1732970000123456789 t3f2a…".
type entry struct {
	size  int64
	mtime int64
	kind  byte
	hash  string
}

func (e entry) String() string {
	return strconv.FormatInt(e.size, 10) + " " + strconv.FormatInt(e.mtime, 10) + " " + string(e.kind) + e.hash
}

func parseEntry(s string) (entry, bool) {
	sz, rest, ok1 := strings.Cut(s, " ")
	mt, kh, ok2 := strings.Cut(rest, " ")
	if !ok1 || !ok2 || kh == "" {
		return entry{}, false
	}
	size, err1 := strconv.ParseInt(sz, 10, 64)
	mtime, err2 := strconv.ParseInt(mt, 10, 64)
	e := entry{size: size, mtime: mtime, kind: kh[0], hash: kh[1:]}
	if err1 != nil || err2 != nil {
		return entry{}, false
	}
	switch e.kind {
	case kindText, kindBinary:
		return e, validHash(e.hash)
	case kindSize:
		return e, e.hash == ""
	}
	return entry{}, false
}

// sameContent reports whether a and b hold the same content as far as
// the folder watcher can tell: equal hashes, or when either is tracked by
// size alone, equal size and mtime (a file that became readable again,
// unchanged, is not an edit).
func sameContent(a, b entry) bool {
	if a.kind == kindSize || b.kind == kindSize {
		return a.size == b.size && a.mtime == b.mtime
	}
	return a.kind == b.kind && a.hash == b.hash
}

// hashOf is the content address: the first 128 bits of SHA-256, in hex.
func hashOf(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:16])
}

func validHash(h string) bool {
	if len(h) != 32 {
		return false
	}
	for _, c := range []byte(h) {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

// isText reports whether content is shown as text: valid UTF-8 without a
// NUL byte.
func isText(b []byte) bool { return bytes.IndexByte(b, 0) < 0 && utf8.Valid(b) }

// snapshot is what one look at the watched path found.
type snapshot struct {
	exists bool
	single bool // the path is one file, named by its base name
	files  map[string]entry
	// real is where each file was read: the resolved target of a followed
	// symlink, else the file itself.
	real map[string]string
	// dirs are the directories seen (the folder first), for the notifier.
	dirs []string
	// content holds what was read this look, by relative name, for the
	// files read while the memory budget lasted.
	content map[string][]byte
	// truncated: the walk stopped at frontier (max_files, or its bound of
	// entries), so files from frontier on are not known.
	truncated   bool
	frontier    string
	notFollowed []string
}

// names returns the tracked files in order.
func (s *snapshot) names() []string {
	out := make([]string, 0, len(s.files))
	for k := range s.files {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// digest identifies the snapshot's entries.
func digestOf(files map[string]entry) string {
	names := make([]string, 0, len(files))
	for k := range files {
		names = append(names, k)
	}
	sort.Strings(names)
	h := sha256.New()
	for _, n := range names {
		io.WriteString(h, n)
		h.Write([]byte{0})
		io.WriteString(h, files[n].String())
		h.Write([]byte{'\n'})
	}
	return hex.EncodeToString(h.Sum(nil)[:16])
}

// skipDir reports whether a directory is left out of a walk: version
// control metadata, whose churn is nobody's edit.
func skipDir(name string) bool {
	switch name {
	case ".git", ".hg", ".svn", ".jj", ".bzr":
		return true
	}
	return false
}

// look takes a snapshot of the resolved path. prev are the baseline's
// entries: a file whose size and mtime match its baseline entry is not
// read again.
func (w *Watcher) look(ctx context.Context, s *spec, resolved string, prev map[string]entry) (*snapshot, error) {
	snap := &snapshot{files: make(map[string]entry), real: make(map[string]string), content: make(map[string][]byte)}
	info, err := os.Stat(resolved)
	switch {
	case errors.Is(err, fs.ErrNotExist), errors.Is(err, syscall.ENOTDIR):
		return snap, nil
	case err != nil:
		return nil, err
	}
	snap.exists = true
	budget := int64(maxReadBytes)
	if !info.IsDir() {
		snap.single = true
		if info.Mode().IsRegular() {
			name := filepath.Base(resolved)
			e, err := w.entryFor(s, resolved, info, prev[name], name, snap, &budget)
			switch {
			case errors.Is(err, errGone):
			case err != nil:
				return nil, err
			default:
				snap.files[name] = e
				snap.real[name] = resolved
			}
		}
		return snap, nil
	}
	snap.dirs = append(snap.dirs, resolved)
	visited := 0
	wk := &walker{root: resolved, budget: visitLimit(s.MaxFiles)}
	err = wk.walk(func(rel, p string, d fs.DirEntry) error {
		visited++
		if visited%256 == 0 && ctx.Err() != nil {
			return ctx.Err()
		}
		switch t := d.Type(); {
		case t.IsDir():
			if skipDir(d.Name()) || p == w.dataDir {
				return filepath.SkipDir
			}
			snap.dirs = append(snap.dirs, p)
			return nil
		case t&fs.ModeSymlink != 0:
			if !s.match(rel) {
				return nil
			}
			target, err := filepath.EvalSymlinks(p)
			if err != nil {
				return nil // dangling: nothing to read
			}
			if !w.roots.Contains(target) {
				snap.notFollowed = append(snap.notFollowed, rel)
				return nil
			}
			ti, err := os.Stat(target)
			if err != nil || !ti.Mode().IsRegular() {
				return nil // a link to a folder is not followed, nor to a device
			}
			return w.track(s, snap, rel, target, ti, prev, &budget)
		case t.IsRegular():
			if !s.match(rel) {
				return nil
			}
			fi, err := d.Info()
			if err != nil {
				return nil
			}
			return w.track(s, snap, rel, p, fi, prev, &budget)
		}
		return nil // sockets, devices, pipes: never opened
	})
	if err != nil {
		return nil, err
	}
	if wk.stopped {
		snap.truncated, snap.frontier = true, wk.stoppedAt
	}
	return snap, nil
}

// visitLimit bounds the entries one walk reads, directories included:
// a directory larger than what is left is not read whole, and the walk
// stops at it.
func visitLimit(maxFiles int) int { return max(10*maxFiles, 10_000) }

// track adds one file to the snapshot; past max_files the walk stops at
// it.
func (w *Watcher) track(s *spec, snap *snapshot, rel, real string, fi fs.FileInfo, prev map[string]entry, budget *int64) error {
	if len(snap.files) >= s.MaxFiles {
		return errStop
	}
	e, err := w.entryFor(s, real, fi, prev[rel], rel, snap, budget)
	switch {
	case errors.Is(err, errGone):
		return nil // went away (or was swapped for a non-file) since the walk saw it
	case err != nil:
		return err
	}
	snap.files[rel] = e
	snap.real[rel] = real
	return nil
}

// errGone says a file went away, or stopped being a regular file,
// between the walk and its read: it is left out of this look.
var errGone = errors.New("the file went away")

// entryFor returns the entry of one file: the baseline's when size and
// mtime are unchanged, else one made by reading the file (remembering
// what was read while the budget lasts). A file that cannot be read for
// good (permission denied) is tracked by size and mtime; one that went
// away is errGone; any other read error (an I/O error, no descriptor
// left) is returned, so the look fails and is tried again instead of
// reporting an edit that nobody made.
func (w *Watcher) entryFor(s *spec, path string, fi fs.FileInfo, prev entry, rel string, snap *snapshot, budget *int64) (entry, error) {
	e := entry{size: fi.Size(), mtime: fi.ModTime().UnixNano(), kind: kindSize}
	if prev.kind != 0 && prev.size == e.size && prev.mtime == e.mtime && (prev.kind == kindSize) == (e.size > s.MaxFileBytes) {
		return prev, nil
	}
	if e.size > s.MaxFileBytes {
		return e, nil
	}
	data, fe, err := w.readFileFunc(path, s.MaxFileBytes)
	switch {
	case err == nil:
	case errors.Is(err, fs.ErrNotExist), errors.Is(err, syscall.ENOTDIR), errors.Is(err, syscall.ELOOP), errors.Is(err, errNotRegular):
		return entry{}, errGone
	case errors.Is(err, fs.ErrPermission):
		return e, nil
	default:
		return entry{}, fmt.Errorf("reading %s: %w", rel, unwrapPath(err))
	}
	e = fe
	if int64(len(data)) > s.MaxFileBytes {
		return e, nil
	}
	e.hash = hashOf(data)
	e.kind = kindBinary
	if isText(data) {
		e.kind = kindText
		if *budget >= int64(len(data)) {
			*budget -= int64(len(data))
			snap.content[rel] = data
		}
	}
	return e, nil
}

// unwrapPath drops the "open /path:" prefix of a *fs.PathError.
func unwrapPath(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// errNotRegular says the file opened is not a regular file.
var errNotRegular = errors.New("not a regular file")

// readFile reads a regular file, at most limit+1 bytes, and returns the
// entry its open handle describes. It never blocks on a pipe swapped in
// for the file.
func readFile(path string, limit int64) ([]byte, entry, error) {
	f, err := os.OpenFile(path, openFlags, 0)
	if err != nil {
		return nil, entry{}, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, entry{}, err
	}
	if !fi.Mode().IsRegular() {
		return nil, entry{}, fmt.Errorf("%s: %w", path, errNotRegular)
	}
	data, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, entry{}, err
	}
	return data, entry{size: fi.Size(), mtime: fi.ModTime().UnixNano(), kind: kindSize}, nil
}

// baseline is what the facts of the last observation hold.
type baseline struct {
	files  map[string]entry
	digest string
	wake   string
	facts  map[string]any
	// truncated and frontier: the look stopped at frontier (see snapshot).
	truncated bool
	frontier  string
}

// decodeBaseline reads the snapshot out of an observation's facts; false
// when there is none (the first look, or facts from another build).
func decodeBaseline(facts map[string]any) (*baseline, bool) {
	raw, ok := facts["files"]
	if !ok {
		return nil, false
	}
	b := &baseline{files: make(map[string]entry), facts: facts}
	switch m := raw.(type) {
	case map[string]string:
		for k, v := range m {
			e, ok := parseEntry(v)
			if !ok {
				return nil, false
			}
			b.files[k] = e
		}
	case map[string]any:
		for k, v := range m {
			str, _ := v.(string)
			e, ok := parseEntry(str)
			if !ok {
				return nil, false
			}
			b.files[k] = e
		}
	default:
		// Some other spelling of the same JSON: read it as JSON.
		data, err := json.Marshal(raw)
		if err != nil {
			return nil, false
		}
		var files map[string]string
		if json.Unmarshal(data, &files) != nil {
			return nil, false
		}
		b, ok := decodeBaseline(map[string]any{"files": files, "digest": facts["digest"], "wake": facts["wake"],
			"truncated": facts["truncated"], "frontier": facts["frontier"]})
		if ok {
			b.facts = facts
		}
		return b, ok
	}
	b.digest, _ = facts["digest"].(string)
	b.wake, _ = facts["wake"].(string)
	if b.digest == "" {
		b.digest = digestOf(b.files)
	}
	b.truncated, _ = facts["truncated"].(bool)
	if b.truncated {
		var ok bool
		if b.frontier, ok = facts["frontier"].(string); !ok {
			// A baseline from before the frontier was recorded: it held
			// the first files in walk order, so it covers up to its last.
			for k := range b.files {
				if walkCompare(k, b.frontier) > 0 {
					b.frontier = k
				}
			}
		}
	}
	return b, true
}

// change is one file that differs from the baseline.
type change struct {
	rel      string
	op       string // "added", "edited", "removed"
	old, cur entry
}

// diffSnapshots lists the content changes from base to cur, in path
// order, and reports whether anything else (an mtime) differs. Past a
// bound (max_files, or the walk's bound of entries) only what is known is
// a change: a file missing from a look that stopped before it may still
// be there, so it is not "removed", and a file that a look that stopped
// before it could not have seen is not "added"; such a file just enters
// or leaves the tracked set (other).
func diffSnapshots(base *baseline, cur *snapshot) (changes []change, other bool) {
	for rel, e := range cur.files {
		o, ok := base.files[rel]
		switch {
		case !ok && !covered(rel, base.truncated, base.frontier):
			other = true
		case !ok:
			changes = append(changes, change{rel: rel, op: "added", cur: e})
		case !sameContent(o, e):
			changes = append(changes, change{rel: rel, op: "edited", old: o, cur: e})
		case o != e:
			other = true
		}
	}
	for rel, o := range base.files {
		if _, ok := cur.files[rel]; !ok {
			if !covered(rel, cur.truncated, cur.frontier) {
				other = true
				continue
			}
			changes = append(changes, change{rel: rel, op: "removed", old: o})
		}
	}
	sort.Slice(changes, func(i, j int) bool { return changes[i].rel < changes[j].rel })
	return changes, other
}

// keepSet names the hashes of the text files whose content is kept, in
// path order until maxBytes: deterministic for a given snapshot.
func keepSet(files map[string]entry, maxBytes int64) map[string]bool {
	names := make([]string, 0, len(files))
	for k, e := range files {
		if e.kind == kindText {
			names = append(names, k)
		}
	}
	sort.Strings(names)
	keep := make(map[string]bool, len(names))
	var total int64
	for _, n := range names {
		e := files[n]
		if keep[e.hash] {
			continue
		}
		if total+e.size > maxBytes {
			break
		}
		total += e.size
		keep[e.hash] = true
	}
	return keep
}
