package folder

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// errStop ends a walk early: the walk's bound was reached.
var errStop = errors.New("the walk's bound was reached")

// readChunk is how many entries one read of a directory asks for.
const readChunk = 512

// walker walks a folder in the order filepath.WalkDir does (depth first,
// each directory's entries sorted by name), but reads each directory in
// chunks against a budget of entries for the whole walk, so a directory
// of 100 000 entries is not read whole on every look: once the budget is
// spent the walk stops where it stands.
type walker struct {
	root   string
	budget int
	// stoppedAt is the path, relative to root, where the walk stopped
	// (a directory too large for what was left of the budget, or the
	// entry the visit function stopped at); "" with stopped for the root.
	stoppedAt string
	stopped   bool
	// read counts the entries read.
	entriesRead int
}

// visitFunc is called for each entry below the root with its path
// relative to the root (slash-separated). It may return filepath.SkipDir
// for a directory, errStop to end the walk at this entry, or another
// error to abort it.
type visitFunc func(rel, path string, d fs.DirEntry) error

// walk walks the root. An error reading the root itself is returned; a
// subdirectory that cannot be read is skipped (what it held is not seen
// this time).
func (w *walker) walk(visit visitFunc) error {
	entries, err := w.read(w.root, "")
	if err != nil || w.stopped {
		return err
	}
	err = w.walkEntries(w.root, "", entries, visit)
	if errors.Is(err, errStop) {
		return nil
	}
	return err
}

func (w *walker) walkEntries(dir, rel string, entries []fs.DirEntry, visit visitFunc) error {
	for _, d := range entries {
		childRel := d.Name()
		if rel != "" {
			childRel = rel + "/" + d.Name()
		}
		child := filepath.Join(dir, d.Name())
		err := visit(childRel, child, d)
		switch {
		case errors.Is(err, errStop):
			w.stopped, w.stoppedAt = true, childRel
			return err
		case errors.Is(err, filepath.SkipDir):
			continue
		case err != nil:
			return err
		}
		if !d.IsDir() {
			continue
		}
		sub, err := w.read(child, childRel)
		if w.stopped {
			return errStop
		}
		if err != nil {
			continue // gone or unreadable: not seen this time
		}
		if err := w.walkEntries(child, childRel, sub, visit); err != nil {
			return err
		}
	}
	return nil
}

// read returns a directory's entries sorted by name, reading at most
// what is left of the budget (plus one to tell that more remain). A
// directory with more entries than that stops the walk at it.
func (w *walker) read(dir, rel string) ([]fs.DirEntry, error) {
	f, err := os.Open(dir)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var entries []fs.DirEntry
	for {
		n := min(readChunk, w.budget-len(entries)+1)
		chunk, err := f.ReadDir(n)
		w.entriesRead += len(chunk)
		entries = append(entries, chunk...)
		if len(entries) > w.budget {
			w.stopped, w.stoppedAt = true, rel
			return nil, nil
		}
		if errors.Is(err, io.EOF) || (err == nil && len(chunk) == 0) {
			break
		}
		if err != nil {
			return nil, err
		}
	}
	w.budget -= len(entries)
	slices.SortFunc(entries, func(a, b fs.DirEntry) int { return strings.Compare(a.Name(), b.Name()) })
	return entries, nil
}

// walkCompare orders two relative paths as a walk meets them: component
// by component, each compared by name, a directory before what it holds.
func walkCompare(a, b string) int {
	for {
		ha, ra, moreA := strings.Cut(a, "/")
		hb, rb, moreB := strings.Cut(b, "/")
		if c := strings.Compare(ha, hb); c != 0 {
			return c
		}
		switch {
		case !moreA && !moreB:
			return 0
		case !moreA:
			return -1
		case !moreB:
			return 1
		}
		a, b = ra, rb
	}
}

// covered reports whether a walk that stopped at frontier (truncated) saw
// every entry that comes before rel, and rel itself: whether rel's
// absence from the walk's files means it is not there.
func covered(rel string, truncated bool, frontier string) bool {
	if !truncated {
		return true
	}
	if frontier == "" {
		return false // stopped at the root: nothing was seen
	}
	return walkCompare(rel, frontier) < 0
}
