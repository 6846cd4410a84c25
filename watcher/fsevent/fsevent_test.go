package fsevent_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/fsnotify/fsnotify"

	"github.com/vigil-run/vigil/watcher/fsevent"
)

// needInotify skips a test where this machine has no inotify: asked of
// fsnotify directly, so a bug in the notifier cannot turn into a skip.
func needInotify(t *testing.T) {
	t.Helper()
	fw, err := fsnotify.NewWatcher()
	if err == nil {
		err = fw.Add(t.TempDir())
		fw.Close()
	}
	if err != nil {
		t.Skipf("inotify is not available here: %v", err)
	}
}

// eventWait bounds how long a test waits for a file system event to
// arrive: I/O, not a schedule.
const eventWait = 5 * time.Second

// running starts a notifier whose pokes arrive on the returned channel.
func running(t *testing.T) (*fsevent.Notifier, <-chan string) {
	t.Helper()
	ch := make(chan string, 64)
	n := fsevent.New(fsevent.Config{PokeFunc: func(id string) { ch <- id }})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = n.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	return n, ch
}

func waitPoke(t *testing.T, ch <-chan string, want string) {
	t.Helper()
	timeout := time.After(eventWait)
	for {
		select {
		case id := <-ch:
			if id == want {
				return
			}
		case <-timeout:
			t.Fatalf("no poke for %s within %v", want, eventWait)
		}
	}
}

// TestEventsPokeWatches: a write in a watched directory pokes the watch,
// and so do a new subtree and, once registered, a write deep inside it.
func TestEventsPokeWatches(t *testing.T) {
	t.Parallel()
	needInotify(t)
	n, ch := running(t)
	root := t.TempDir()
	st := n.Watch("w1", time.Now(), fsevent.Target{Dirs: []string{root}, Recursive: true})
	if !st.Events {
		t.Fatalf("Watch = %+v, want events", st)
	}
	if err := os.WriteFile(filepath.Join(root, "a.txt"), []byte("a"), 0o644); err != nil {
		t.Fatal(err)
	}
	waitPoke(t, ch, "w1")

	sub := filepath.Join(root, "new", "deeper")
	if err := os.MkdirAll(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	waitPoke(t, ch, "w1")
	// The probe the poke causes registers what its walk found.
	n.Watch("w1", time.Now(), fsevent.Target{Dirs: []string{root, filepath.Dir(sub), sub}, Recursive: true})
	if got := n.Watched("w1"); !slices.Contains(got, sub) {
		t.Fatalf("watched %v, want %s among them", got, sub)
	}
	if err := os.WriteFile(filepath.Join(sub, "b.txt"), []byte("b"), 0o644); err != nil {
		t.Fatal(err)
	}
	waitPoke(t, ch, "w1")
}

// TestNewSubfolderWatchedBeforeTheProbe: the notifier adds a new
// subfolder itself, so a write inside it wakes the watch even before the
// watch's next probe registers it.
func TestNewSubfolderWatchedBeforeTheProbe(t *testing.T) {
	t.Parallel()
	needInotify(t)
	n, ch := running(t)
	root := t.TempDir()
	skip := func(name string) bool { return name == ".git" }
	if st := n.Watch("w", time.Now(), fsevent.Target{Dirs: []string{root}, Recursive: true, Skip: skip}); !st.Events {
		t.Fatalf("Watch = %+v, want events", st)
	}
	sub := filepath.Join(root, "sub")
	if err := os.Mkdir(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(root, ".git"), 0o755); err != nil {
		t.Fatal(err)
	}
	waitPoke(t, ch, "w")
	deadline := time.Now().Add(eventWait)
	for !slices.Contains(n.Watched("w"), sub) {
		if time.Now().After(deadline) {
			t.Fatalf("watched %v, want %s", n.Watched("w"), sub)
		}
		waitPoke(t, ch, "w")
	}
	if slices.Contains(n.Watched("w"), filepath.Join(root, ".git")) {
		t.Fatal("a skipped directory was watched")
	}
	if err := os.WriteFile(filepath.Join(sub, "x"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	waitPoke(t, ch, "w")
}
