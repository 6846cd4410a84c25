package file_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/fsnotify/fsnotify"

	"github.com/vigil-run/vigil"
	"github.com/vigil-run/vigil/watcher"
	"github.com/vigil-run/vigil/watcher/file"
	"github.com/vigil-run/vigil/watcher/fsevent"
)

// TestEventWakesFileWatch: with a notifier, a file watch registers the
// deepest existing folder on the way to its path; creating the file (and
// the folders above it) pokes the watch, and a satisfied watch is
// unregistered.
func TestEventWakesFileWatch(t *testing.T) {
	t.Parallel()
	pokes := make(chan string, 64)
	n := fsevent.New(fsevent.Config{PokeFunc: func(id string) {
		select {
		case pokes <- id:
		default:
		}
	}})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = n.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })

	root := t.TempDir()
	target := filepath.Join(root, "build", "READY")
	w := file.New(file.Config{Roots: []string{root}, Waker: n})
	pred := canon(t, w, `{"path":`+q(target)+`}`)
	look := func() vigil.Observation {
		obs, err := watcher.Run(context.Background(), w, watcher.Probe{WatchID: "w1", Kind: vigil.KindFile, Predicate: pred, Now: time.Now()})
		if err != nil {
			t.Fatal(err)
		}
		return obs
	}
	wait := func(what string) {
		t.Helper()
		select {
		case <-pokes:
		case <-time.After(5 * time.Second):
			t.Fatalf("no poke after %s within 5s", what)
		}
	}
	if fw, err := fsnotify.NewWatcher(); err != nil {
		t.Skipf("inotify is not available here: %v", err)
	} else {
		fw.Close()
	}
	if got := look(); got.Verdict != vigil.VerdictPending {
		t.Fatalf("first look = %s", got.Verdict)
	}
	resolvedRoot, _ := filepath.EvalSymlinks(root)
	if got := n.Watched("w1"); len(got) != 1 || got[0] != resolvedRoot {
		t.Fatalf("watched %v, want the deepest existing folder %s", got, resolvedRoot)
	}
	if err := os.Mkdir(filepath.Join(root, "build"), 0o755); err != nil {
		t.Fatal(err)
	}
	wait("the folder appeared")
	look()
	for len(pokes) > 0 {
		<-pokes
	}
	if err := os.WriteFile(target, []byte("ok"), 0o644); err != nil {
		t.Fatal(err)
	}
	wait("the file appeared")
	if got := look(); got.Verdict != vigil.VerdictSatisfied {
		t.Fatalf("after the file appeared: %s", got.Verdict)
	}
	if got := n.Watched("w1"); got != nil {
		t.Fatalf("a satisfied watch still watches %v", got)
	}
}
