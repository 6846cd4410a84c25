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
// the folder watcher can tell: equal hashes, or for a file tracked by
// size alone, equal size and mtime.
func sameContent(a, b entry) bool {
	if a.kind == kindSize || b.kind == kindSize {
		return a.kind == b.kind && a.size == b.size && a.mtime == b.mtime
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
	content     map[string][]byte
	truncated   bool
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
			snap.files[name] = w.entryFor(s, resolved, info, prev[name], name, snap, &budget)
			snap.real[name] = resolved
		}
		return snap, nil
	}
	snap.dirs = append(snap.dirs, resolved)
	visited := 0
	limit := visitLimit(s.MaxFiles)
	err = filepath.WalkDir(resolved, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if p == resolved {
				return err
			}
			// A subfolder that went away or cannot be read: what it held
			// is not seen this time.
			if d != nil && d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		if p == resolved {
			return nil
		}
		visited++
		if visited%256 == 0 && ctx.Err() != nil {
			return ctx.Err()
		}
		if visited > limit {
			snap.truncated = true
			return filepath.SkipAll
		}
		rel := filepath.ToSlash(p[len(resolved)+1:])
		switch t := d.Type(); {
		case t.IsDir():
			if skipDir(d.Name()) {
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
	return snap, nil
}

// visitLimit bounds the entries one walk looks at.
func visitLimit(maxFiles int) int { return max(50*maxFiles, 10_000) }

func (w *Watcher) track(s *spec, snap *snapshot, rel, real string, fi fs.FileInfo, prev map[string]entry, budget *int64) error {
	if len(snap.files) >= s.MaxFiles {
		snap.truncated = true
		return filepath.SkipAll
	}
	snap.files[rel] = w.entryFor(s, real, fi, prev[rel], rel, snap, budget)
	snap.real[rel] = real
	return nil
}

// entryFor returns the entry of one file: the baseline's when size and
// mtime are unchanged, else one made by reading the file (remembering
// what was read while the budget lasts).
func (w *Watcher) entryFor(s *spec, path string, fi fs.FileInfo, prev entry, rel string, snap *snapshot, budget *int64) entry {
	e := entry{size: fi.Size(), mtime: fi.ModTime().UnixNano(), kind: kindSize}
	if prev.kind != 0 && prev.size == e.size && prev.mtime == e.mtime && (prev.kind == kindSize) == (e.size > s.MaxFileBytes) {
		return prev
	}
	if e.size > s.MaxFileBytes {
		return e
	}
	data, fe, err := readFile(path, s.MaxFileBytes)
	if err != nil {
		return e
	}
	e = fe
	if int64(len(data)) > s.MaxFileBytes {
		return e
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
	return e
}

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
		return nil, entry{}, fmt.Errorf("%s is not a regular file", path)
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
		b, ok := decodeBaseline(map[string]any{"files": files, "digest": facts["digest"], "wake": facts["wake"]})
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
	return b, true
}

// change is one file that differs from the baseline.
type change struct {
	rel      string
	op       string // "added", "edited", "removed"
	old, cur entry
}

// diffSnapshots lists the content changes from base to cur, in path
// order, and reports whether anything else (an mtime) differs.
func diffSnapshots(base, cur map[string]entry) (changes []change, other bool) {
	for rel, e := range cur {
		o, ok := base[rel]
		switch {
		case !ok:
			changes = append(changes, change{rel: rel, op: "added", cur: e})
		case !sameContent(o, e):
			changes = append(changes, change{rel: rel, op: "edited", old: o, cur: e})
		case o != e:
			other = true
		}
	}
	for rel, o := range base {
		if _, ok := cur[rel]; !ok {
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
