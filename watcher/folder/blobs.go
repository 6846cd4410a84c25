package folder

import (
	"compress/gzip"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// blobs keeps the previous contents of a watch's small text files, so a
// report can show what an edit changed. They live in one directory per
// watch, <dir>/<watch id>/<content hash>, gzip-compressed, and are
// content-addressed: the observation's facts name each file's hash, and a
// blob is written before the observation that names it is returned, so a
// committed baseline never names a blob that was never written (a blob may
// still be missing, for a file over the budget: then the report says the
// previous content was not kept). Blobs no baseline names are removed by
// the watch's next probe after its baseline moved; a watch that ends is
// removed by Forget, and by Sweep at start-up.
type blobs struct {
	dir string
}

func (b blobs) enabled() bool { return b.dir != "" }

// safeID reports whether id may name a directory: the engine's ids are
// ULIDs; anything else is refused rather than joined into a path.
func safeID(id string) bool {
	if id == "" || len(id) > 64 {
		return false
	}
	for _, c := range []byte(id) {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}

func (b blobs) file(id, hash string) (string, bool) {
	if !b.enabled() || !safeID(id) || !validHash(hash) {
		return "", false
	}
	return filepath.Join(b.dir, id, hash), true
}

// has reports whether the blob is kept.
func (b blobs) has(id, hash string) bool {
	p, ok := b.file(id, hash)
	if !ok {
		return false
	}
	_, err := os.Stat(p)
	return err == nil
}

// put keeps content under its hash, unless it is kept already. The file
// appears whole or not at all (written aside, then renamed).
func (b blobs) put(id, hash string, content []byte) error {
	p, ok := b.file(id, hash)
	if !ok {
		return nil
	}
	if _, err := os.Stat(p); err == nil {
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		return err
	}
	f, err := os.CreateTemp(filepath.Dir(p), ".tmp-*")
	if err != nil {
		return err
	}
	zw, _ := gzip.NewWriterLevel(f, gzip.BestSpeed)
	_, werr := zw.Write(content)
	cerr := zw.Close()
	ferr := f.Close()
	if err := errors.Join(werr, cerr, ferr); err != nil {
		os.Remove(f.Name())
		return err
	}
	if err := os.Rename(f.Name(), p); err != nil {
		os.Remove(f.Name())
		return err
	}
	return nil
}

// get returns a kept content, at most limit bytes of it.
func (b blobs) get(id, hash string, limit int64) ([]byte, bool) {
	p, ok := b.file(id, hash)
	if !ok {
		return nil, false
	}
	f, err := os.Open(p)
	if err != nil {
		return nil, false
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		return nil, false
	}
	data, err := io.ReadAll(io.LimitReader(zr, limit+1))
	if err != nil || int64(len(data)) > limit || hashOf(data) != hash {
		return nil, false
	}
	return data, true
}

// gc removes the watch's blobs whose hash is not in keep.
func (b blobs) gc(id string, keep map[string]bool) {
	if !b.enabled() || !safeID(id) {
		return
	}
	dir := filepath.Join(b.dir, id)
	ents, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	for _, e := range ents {
		if !keep[e.Name()] {
			os.Remove(filepath.Join(dir, e.Name()))
		}
	}
}

// drop removes everything kept for the watch.
func (b blobs) drop(id string) {
	if !b.enabled() || !safeID(id) {
		return
	}
	os.RemoveAll(filepath.Join(b.dir, id))
}

// sweep removes the directories of watches keep does not name.
func (b blobs) sweep(keep func(id string) bool) error {
	if !b.enabled() {
		return nil
	}
	ents, err := os.ReadDir(b.dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	var errs []error
	for _, e := range ents {
		name := e.Name()
		if strings.HasPrefix(name, ".") || keep(name) {
			continue
		}
		if err := os.RemoveAll(filepath.Join(b.dir, name)); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
