package folder

import (
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/vigil-run/vigil"
	"github.com/vigil-run/vigil/watcher"
)

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestWalkDoesNotReadAHugeDirectoryWhole: a directory with more entries
// than a look may read is read only until the budget is spent, and the
// walk stops at it: what comes before it is seen, it and what follows
// are not.
func TestWalkDoesNotReadAHugeDirectoryWhole(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	writeFile(t, filepath.Join(root, "a.txt"), "a")
	for i := range 300 {
		writeFile(t, filepath.Join(root, "big", fmt.Sprintf("%04d", i)), "")
	}
	writeFile(t, filepath.Join(root, "z.txt"), "z")

	const budget = 100
	wk := &walker{root: root, budget: budget}
	var seen []string
	err := wk.walk(func(rel, _ string, d fs.DirEntry) error {
		seen = append(seen, rel)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if !wk.stopped || wk.stoppedAt != "big" {
		t.Fatalf("walk stopped %v at %q, want stopped at big", wk.stopped, wk.stoppedAt)
	}
	if strings.Join(seen, ",") != "a.txt,big" {
		t.Errorf("walk visited %v, want a.txt and big, and nothing in or after big", seen)
	}
	if wk.entriesRead > budget+1 {
		t.Errorf("the walk read %d entries, want at most %d: big is not read whole", wk.entriesRead, budget+1)
	}
	if !covered("a.txt", true, wk.stoppedAt) || covered("big/0001", true, wk.stoppedAt) || covered("z.txt", true, wk.stoppedAt) {
		t.Error("covered: a.txt is known, big/… and z.txt are not")
	}
}

// TestTransientReadErrorIsNotAnEdit: a file whose read fails for a
// passing reason (an I/O error, no descriptor left) is not reported as
// edited ("unreadable"): the look answers unavailable and keeps the
// baseline, and the next one reports the real edit once, with its diff. A
// file that cannot be read for good (permission denied) is tracked by
// size and time, and its becoming readable again, unchanged, is no edit.
func TestTransientReadErrorIsNotAnEdit(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	path := filepath.Join(root, "notes.txt")
	writeFile(t, path, "one\n")
	w := New(Config{BlobDir: filepath.Join(t.TempDir(), "blobs")})
	var fail error
	w.readFileFunc = func(p string, limit int64) ([]byte, entry, error) {
		if fail != nil {
			return nil, entry{}, &fs.PathError{Op: "read", Path: p, Err: fail}
		}
		return readFile(p, limit)
	}
	c, err := w.Canonicalize(context.Background(), json.RawMessage(`{"path":`+strconvQuote(root)+`,"standing":true,"settle":"0"}`), time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	var last *vigil.Observation
	look := func(at time.Duration) (vigil.Observation, error) {
		obs, err := watcher.Run(context.Background(), w, watcher.Probe{WatchID: "w1", Kind: vigil.KindFolder, Predicate: c.Predicate,
			Now: t0.Add(at), Last: last})
		if err == nil && obs.Verdict != vigil.VerdictUnavailable {
			last = &obs
		}
		return obs, err
	}
	if obs, _ := look(0); obs.Verdict != vigil.VerdictPending {
		t.Fatalf("baseline = %+v", obs)
	}

	writeFile(t, path, "one\ntwo\n")
	fail = syscall.EIO
	obs, _ := look(10 * time.Second)
	if obs.Verdict != vigil.VerdictUnavailable || !strings.Contains(obs.Reason, "input/output error") {
		t.Fatalf("a look whose read failed with EIO = %+v, want unavailable saying why", obs)
	}
	fail = nil
	obs, _ = look(20 * time.Second)
	if obs.Verdict != vigil.VerdictSatisfied || obs.Summary != "1 edited: notes.txt" {
		t.Fatalf("the next look = %+v, want the edit reported", obs)
	}
	rep, _ := obs.Facts["report"].(map[string]any)
	if text, _ := rep["text"].(string); !strings.Contains(text, "+two") {
		t.Errorf("the report has no diff:\n%s", text)
	}
	if obs, _ = look(30 * time.Second); obs.Verdict != vigil.VerdictPending {
		t.Fatalf("a look after the report = %+v, want pending: nothing changed", obs)
	}

	// Permission denied is for good: the file is tracked by size and time.
	writeFile(t, path, "one\ntwo\nthree\n")
	fail = syscall.EACCES
	if obs, _ = look(40 * time.Second); obs.Verdict != vigil.VerdictSatisfied || !strings.Contains(obs.Summary, "1 edited") {
		t.Fatalf("an edit of a file that cannot be read = %+v, want it reported (by size)", obs)
	}
	fail = nil
	if obs, _ = look(50 * time.Second); obs.Verdict != vigil.VerdictPending {
		t.Fatalf("the same file readable again, unchanged = %+v, want pending: no edit", obs)
	}
}

func strconvQuote(s string) string { b, _ := json.Marshal(s); return string(b) }

// TestDataDirIsNotWalked: a folder watch on a folder above the daemon's
// data directory does not see the daemon's own writes there (its
// database, the contents it keeps for diffs), which every report makes:
// they were reported, and the report's writes reported again, without
// end. A change beside it is reported as ever.
func TestDataDirIsNotWalked(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	data := filepath.Join(root, ".local", "share", "vigil")
	if err := os.MkdirAll(data, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(data, "vigil.db"), []byte("one"), 0o600); err != nil {
		t.Fatal(err)
	}
	w := New(Config{DataDir: data, BlobDir: filepath.Join(data, BlobDirName)})
	c, err := w.Canonicalize(context.Background(), json.RawMessage(`{"path":`+strconv.Quote(root)+`,"standing":true,"settle":"0"}`), time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)
	probe := func(now time.Time, last *vigil.Observation) vigil.Observation {
		t.Helper()
		obs, err := w.Probe(context.Background(), watcher.Probe{WatchID: "w1", Kind: vigil.KindFolder, Predicate: c.Predicate, Now: now, Last: last})
		if err != nil {
			t.Fatalf("Probe = %v", err)
		}
		return obs
	}
	base := probe(t0, nil)
	if err := os.WriteFile(filepath.Join(data, "vigil.db"), []byte("two, after a report"), 0o600); err != nil {
		t.Fatal(err)
	}
	if obs := probe(t0.Add(time.Second), &base); obs.Verdict != vigil.VerdictPending {
		t.Fatalf("after a write in the data dir: %s %q, want pending (nothing changed)", obs.Verdict, obs.Summary)
	}
	if err := os.WriteFile(filepath.Join(root, "notes.md"), []byte("hello\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if obs := probe(t0.Add(2*time.Second), &base); obs.Verdict != vigil.VerdictSatisfied || !strings.Contains(obs.Summary, "notes.md") {
		t.Fatalf("after a file added beside it: %s %q, want notes.md reported", obs.Verdict, obs.Summary)
	}
}
