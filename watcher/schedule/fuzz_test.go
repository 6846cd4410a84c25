package schedule_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/vigil-run/vigil/watcher/schedule"
	"github.com/vigil-run/vigil/watcher/watchertest"
)

// FuzzCanonicalize: predicate decoding never panics, and what it accepts
// has one stable spelling (see watchertest.CheckCanonicalize) and a next
// fire after now: a schedule that never fires is refused. Seeds are in
// testdata/fuzz/FuzzCanonicalize.
func FuzzCanonicalize(f *testing.F) {
	w := schedule.New(schedule.Config{AllowExec: true})
	f.Fuzz(func(t *testing.T, raw []byte) {
		watchertest.CheckCanonicalize(t, w, raw)
		c, err := w.Canonicalize(context.Background(), json.RawMessage(raw), watchertest.FuzzNow)
		if err != nil {
			return
		}
		next, err := w.NextDue(c.Predicate, watchertest.FuzzNow, watchertest.FuzzNow)
		if err != nil || !next.After(watchertest.FuzzNow) {
			t.Fatalf("NextDue(%s) = %v, %v: an accepted schedule must fire after now", c.Predicate, next, err)
		}
	})
}
