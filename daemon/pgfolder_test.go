package daemon_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/vigil-run/vigil"
	"github.com/vigil-run/vigil/store/postgres"
	"github.com/vigil-run/vigil/watcher/folder"
)

// TestPostgresReplicaFolderHandOver: a folder watch whose shard moves to a
// replica that joins is registered with that replica's file system
// notifier (woken within the polling interval, as at a start, rather than
// left to its 30-minute one) and settles there on a change; the replica
// that lost the shard stops watching its folder. The notifier's time is
// brought forward by the test, never waited for.
func TestPostgresReplicaFolderHandOver(t *testing.T) {
	t.Parallel()
	store := pgStore(t)
	root := t.TempDir()
	cfgA := testConfig(t.TempDir(), root)
	cfgA.Store, cfgA.Replica, cfgA.Lease, cfgA.LeaseRenew = store, "replica-a", 3*time.Second, time.Second
	a := start(t, cfgA)
	ca := newClient(t, a)
	shardsOf(t, 64, ca)

	// A folder watch on A in the upper half of the shards: the half A
	// gives to a replica that joins (it keeps the first 32).
	var w *vigil.Watch
	var dir string
	for i := 0; w == nil; i++ {
		dir = filepath.Join(root, fmt.Sprint(i))
		if err := os.Mkdir(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		got, err := ca.Register(t.Context(), vigil.RegisterRequest{Kind: vigil.KindFolder, Recipient: "f", Observe: true,
			Predicate: json.RawMessage(`{"path":` + quote(dir) + `,"settle":"0"}`)})
		if err != nil {
			t.Fatal(err)
		}
		if postgres.ShardOf(got.ID) >= 32 {
			w = got
		} else if _, err := ca.Cancel(t.Context(), got.ID); err != nil {
			t.Fatal(err)
		}
	}
	if len(a.FilesWatched(w.ID)) == 0 {
		t.Fatalf("A does not watch the folder of its own watch %s (wake %v)", w.ID, w.LastObservation.Facts["wake"])
	}

	cfgB := cfgA
	cfgB.DataDir, cfgB.Replica = t.TempDir(), "replica-b"
	sameKeys(t, cfgA.DataDir, cfgB.DataDir)
	b := start(t, cfgB)
	cb := newClient(t, b)
	held := shardsOf(t, 32, ca, cb)
	if !slices.Contains(held[1], postgres.ShardOf(w.ID)) {
		t.Fatalf("shard %d of the watch stayed with A (B holds %v)", postgres.ShardOf(w.ID), held[1])
	}
	waitFor(t, "A to stop watching the folder of the watch it lost", func() bool { return len(a.FilesWatched(w.ID)) == 0 })
	waitFor(t, "B to arm the watch of the shard it took", func() bool {
		m, err := http.Get(b.URL() + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(m.Body)
		m.Body.Close()
		return strings.Contains(string(body), "\nvigil_watches_pending 1\n")
	})
	// Whatever B's notifier was asked to wake within the polling
	// interval is woken now: the probe registers the folder.
	b.TickFiles(time.Now().Add(folder.PollEvery))
	waitFor(t, "B to watch the folder of the watch it took", func() bool { return len(b.FilesWatched(w.ID)) > 0 })

	if err := os.WriteFile(filepath.Join(dir, "new.txt"), []byte("hello\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	db := pgConn(t, store)
	if got := waitSettled(t, db, []string{w.ID}); got[w.ID] != "replica-b" {
		t.Errorf("the folder watch settled by %q, want replica-b", got[w.ID])
	}
	if now, err := cb.Watch(t.Context(), w.ID); err != nil || now.State != vigil.StateFired {
		t.Errorf("the folder watch after the change: %+v, %v; want fired", now, err)
	}
}
