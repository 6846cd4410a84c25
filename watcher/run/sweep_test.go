package run

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/vigil-run/vigil/watcher"
)

// TestSweepKeepsTheAnswersOfPendingWatches: the daemon's sweep keeps a
// run's files while its watch may still be pending: with a max_deadline
// past the default retention, a run that ended 9 days ago, while no
// daemon ran, may belong to a watch whose 20-day deadline has not come,
// and its status is that watch's answer. Files older than max_deadline
// and a day go. (Before, every file older than 8 days went, and the
// watch's next probe found no status and no pid file: errored, or the
// run started again.)
func TestSweepKeepsTheAnswersOfPendingWatches(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	w := fromDeps(watcher.Deps{AllowExec: true, DataDir: dir, MaxDeadline: 30 * 24 * time.Hour}).(*Watcher)
	rdir := filepath.Join(dir, DirName)
	if err := os.MkdirAll(rdir, 0o700); err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	age := map[string]time.Duration{"01PENDING.json": 9 * 24 * time.Hour, "01PENDING.pid": 9 * 24 * time.Hour,
		"01LONGGONE.json": 32 * 24 * time.Hour, "01LONGGONE.pid": 32 * 24 * time.Hour}
	for name, a := range age {
		path := filepath.Join(rdir, name)
		if err := os.WriteFile(path, []byte(`{}`), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(path, now.Add(-a), now.Add(-a)); err != nil {
			t.Fatal(err)
		}
	}
	var poked []string
	w.cfg.PokeFunc = func(id string) { poked = append(poked, id) }
	w.sweep(now)
	for name, a := range age {
		_, err := os.Stat(filepath.Join(rdir, name))
		if kept, want := err == nil, a < 31*24*time.Hour; kept != want {
			t.Errorf("%s, %v old: kept %v, want %v", name, a, kept, want)
		}
	}
	if len(poked) != 1 || poked[0] != "01PENDING" {
		t.Errorf("poked %q, want the kept status's watch", poked)
	}
}
