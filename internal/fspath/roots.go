// Package fspath holds what the kinds that watch the file system (file,
// folder) check of a path alike: that a predicate's path is absolute and
// bounded, and that it resolves inside the daemon's roots.
package fspath

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/vigil-run/vigil/watcher"
)

// Roots are the directories a watched path must resolve inside: the
// daemon's roots setting (VIGIL_ROOTS). The zero value allows every path.
// The file and folder watchers share them, so both kinds refuse the same
// paths.
type Roots struct {
	dirs []string
}

// NewRoots returns roots for dirs: empty entries are skipped and relative
// ones made absolute.
func NewRoots(dirs []string) Roots {
	var r Roots
	for _, d := range dirs {
		if d == "" {
			continue
		}
		if abs, err := filepath.Abs(d); err == nil {
			d = abs
		}
		r.dirs = append(r.dirs, filepath.Clean(d))
	}
	return r
}

// Set reports whether any root is configured; without one every path is
// allowed.
func (r Roots) Set() bool { return len(r.dirs) > 0 }

// String lists the roots, comma-separated.
func (r Roots) String() string { return strings.Join(r.dirs, ", ") }

// OutsideError says a path resolved outside every root.
type OutsideError struct {
	Path, Resolved string
}

// Error implements error.
func (e *OutsideError) Error() string {
	return fmt.Sprintf("%s resolves to %s, outside the allowed roots", e.Path, e.Resolved)
}

// Resolve returns path with every symlink resolved: the path itself if it
// exists, else its deepest existing parent with the rest appended. With
// roots set, it refuses a result outside them with *OutsideError.
func (r Roots) Resolve(path string) (string, error) {
	resolved, err := resolvePath(path)
	if err != nil {
		return "", err
	}
	if !r.Contains(resolved) {
		return "", &OutsideError{Path: path, Resolved: resolved}
	}
	return resolved, nil
}

// Contains reports whether resolved, a path whose symlinks are already
// resolved, lies inside one of the roots (always true without roots).
func (r Roots) Contains(resolved string) bool {
	if len(r.dirs) == 0 {
		return true
	}
	for _, root := range r.dirs {
		rr, err := filepath.EvalSymlinks(root)
		if err != nil {
			rr = root
		}
		if within(resolved, rr) {
			return true
		}
	}
	return false
}

// Check validates a predicate's path field: present, at most max bytes, no
// NUL byte, absolute. It returns the path cleaned; refusals are
// invalid_predicate errors naming field.
func Check(field, path string, max int) (string, error) {
	switch {
	case path == "":
		return "", watcher.InvalidPredicate(field, "is required")
	case len(path) > max:
		return "", watcher.InvalidPredicate(field, "is longer than %d bytes", max)
	case strings.ContainsRune(path, 0):
		return "", watcher.InvalidPredicate(field, "must not hold a NUL byte")
	case !filepath.IsAbs(path):
		return "", watcher.InvalidPredicate(field, "must be absolute")
	}
	return filepath.Clean(path), nil
}

// Admit refuses, as watch_unobservable naming the roots setting, a path
// that resolves outside the roots. A path that cannot be resolved now for
// another reason (permission denied, say) is admitted: every probe
// resolves it again before looking.
func (r Roots) Admit(path string) error {
	if len(r.dirs) == 0 {
		return nil
	}
	_, err := r.Resolve(path)
	var out *OutsideError
	if errors.As(err, &out) {
		return watcher.Unobservable("%s resolves to %s, outside the allowed roots (%s): add a root with the daemon's roots setting (VIGIL_ROOTS)",
			path, out.Resolved, r)
	}
	return nil
}

func resolvePath(path string) (string, error) {
	rest := ""
	for p := path; ; {
		r, err := filepath.EvalSymlinks(p)
		if err == nil {
			return filepath.Join(r, rest), nil
		}
		if !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, syscall.ENOTDIR) {
			return "", err
		}
		parent := filepath.Dir(p)
		if parent == p {
			return "", err
		}
		rest = filepath.Join(filepath.Base(p), rest)
		p = parent
	}
}

func within(path, root string) bool {
	if root == string(filepath.Separator) {
		return true
	}
	return path == root || strings.HasPrefix(path, root+string(filepath.Separator))
}
