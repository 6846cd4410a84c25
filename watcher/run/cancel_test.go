package run_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/vigil-run/vigil"
	"github.com/vigil-run/vigil/engine"
	"github.com/vigil-run/vigil/store/memstore"
	"github.com/vigil-run/vigil/watcher"
	"github.com/vigil-run/vigil/watcher/run"
)

// TestCancelBeforeStart: a run watch cancelled after the scheduler read it
// as pending and before its first probe started the run (here from the
// check that runs between the two, as a recipient close or a token's
// revocation may land) never starts its program: no pid file is made, and
// the program does not run.
func TestCancelBeforeStart(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st, dir := memstore.New(), t.TempDir()
	marker := filepath.Join(t.TempDir(), "ran")
	w := run.New(testConfig(t, dir, nil, st))
	var (
		eng  *engine.Engine
		once sync.Once
	)
	eng = engine.New(engine.Config{Store: st, Watchers: watcher.NewRegistry(w),
		CheckFunc: func(ctx context.Context, wt *vigil.Watch) error {
			once.Do(func() {
				if _, err := eng.Cancel(ctx, wt.ID); err != nil {
					t.Errorf("Cancel = %v", err)
				}
			})
			return nil
		}})
	if err := eng.Prime(ctx); err != nil {
		t.Fatal(err)
	}
	reg, err := eng.Register(ctx, vigil.RegisterRequest{Kind: vigil.KindRun, Recipient: "r",
		Predicate: json.RawMessage(`{"argv":["touch",` + string(mustJSON(marker)) + `]}`)})
	if err != nil {
		t.Fatal(err)
	}
	eng.Tick(ctx, time.Now())
	got, err := eng.Watch(ctx, reg.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.State != vigil.StateCancelled {
		t.Fatalf("watch = %s, want cancelled", got.State)
	}
	if _, err := os.Stat(filepath.Join(dir, reg.ID+".pid")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a cancelled watch's probe made its pid file (stat: %v): its run was started", err)
	}
	// Had the supervisor been started, the program would have run by now:
	// the probe returns only once the supervisor reports it started.
	if _, err := os.Stat(marker); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the program of a cancelled watch ran (stat: %v)", err)
	}
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}
