package folder_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/vigil-run/vigil"
	"github.com/vigil-run/vigil/watcher"
	"github.com/vigil-run/vigil/watcher/folder"
	"github.com/vigil-run/vigil/watcher/fsevent"
)

// TestRetargetedLinkWakes: a watch on a path that is a symlink (to a
// file in another folder of the root) is woken when the link is pointed
// at another file: its content, as the watch reads it, changed.
func TestRetargetedLinkWakes(t *testing.T) {
	root := t.TempDir()
	for _, d := range []string{"a", "b"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(root, "a", "notes.md"), []byte("one\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "b", "notes.md"), []byte("two, longer\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(root, "current.md")
	if err := os.Symlink(filepath.Join(root, "a", "notes.md"), link); err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	n, pokes := runNotifier(t)

	w := folder.New(folder.Config{Roots: []string{root}, Waker: n})
	c, err := w.Canonicalize(ctx, json.RawMessage(`{"path":"`+link+`","settle":"0s","standing":true}`), time.Now())
	if err != nil {
		t.Fatal(err)
	}
	obs, err := watcher.Run(ctx, w, watcher.Probe{WatchID: "W1", Kind: vigil.KindFolder, Predicate: c.Predicate, Now: time.Now()})
	if err != nil || obs.Verdict != vigil.VerdictPending || obs.Facts["wake"] != "events" {
		t.Fatalf("baseline: %+v, %v", obs, err)
	}
	// Point the link at the other file.
	tmp := filepath.Join(root, ".current.tmp")
	if err := os.Symlink(filepath.Join(root, "b", "notes.md"), tmp); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, link); err != nil {
		t.Fatal(err)
	}
	select {
	case <-pokes:
	case <-time.After(3 * time.Second):
		// What the watch reads did change: a probe now reports it.
		got, _ := watcher.Run(ctx, w, watcher.Probe{WatchID: "W1", Kind: vigil.KindFolder, Predicate: c.Predicate, Now: time.Now(), Last: &obs})
		t.Fatalf("the link was pointed elsewhere and no event woke the watch (the next look answers %s: %q); it waits for its %s interval",
			got.Verdict, got.Summary, folder.EventEvery)
	}
}

// TestFollowedLinkTargetEditWakes: a symlink inside the watched folder
// to a file elsewhere in the root is followed (its content is what the
// watch tracks); an edit of that file wakes the watch.
func TestFollowedLinkTargetEditWakes(t *testing.T) {
	root := t.TempDir()
	for _, d := range []string{"docs", "shared"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	target := filepath.Join(root, "shared", "policy.md")
	if err := os.WriteFile(target, []byte("one\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(target, filepath.Join(root, "docs", "policy.md")); err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	n, pokes := runNotifier(t)

	w := folder.New(folder.Config{Roots: []string{root}, Waker: n})
	c, err := w.Canonicalize(ctx, json.RawMessage(`{"path":"`+filepath.Join(root, "docs")+`","settle":"0s","standing":true}`), time.Now())
	if err != nil {
		t.Fatal(err)
	}
	obs, err := watcher.Run(ctx, w, watcher.Probe{WatchID: "W2", Kind: vigil.KindFolder, Predicate: c.Predicate, Now: time.Now()})
	if err != nil || obs.Verdict != vigil.VerdictPending || obs.Facts["file_count"] != 1 {
		t.Fatalf("baseline: %+v, %v", obs, err)
	}
	if err := os.WriteFile(target, []byte("two, longer\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	select {
	case <-pokes:
	case <-time.After(3 * time.Second):
		got, _ := watcher.Run(ctx, w, watcher.Probe{WatchID: "W2", Kind: vigil.KindFolder, Predicate: c.Predicate, Now: time.Now(), Last: &obs})
		t.Fatalf("the followed file was edited and no event woke the watch (the next look answers %s: %q); it waits for its %s interval",
			got.Verdict, got.Summary, folder.EventEvery)
	}
}

// runNotifier runs a file system notifier until t ends; its pokes come on
// the channel.
func runNotifier(t *testing.T) (*fsevent.Notifier, <-chan string) {
	pokes := make(chan string, 16)
	n := fsevent.New(fsevent.Config{PokeFunc: func(id string) { pokes <- id }})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = n.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	return n, pokes
}
