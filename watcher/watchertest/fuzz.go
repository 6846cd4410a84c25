package watchertest

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/vigil-run/vigil"
	"github.com/vigil-run/vigil/watcher"
)

// FuzzNow is the clock the predicate fuzz targets canonicalise against.
var FuzzNow = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

// CheckCanonicalize is the body of every watcher's predicate fuzz target:
// Canonicalize on arbitrary bytes never panics; a refusal carries a code
// other than internal; an accepted predicate is a JSON object that
// canonicalises to itself (one spelling, so identity is stable) and that
// Admit answers without panicking.
func CheckCanonicalize(t *testing.T, w watcher.Watcher, raw []byte) {
	t.Helper()
	ctx := context.Background()
	c, err := w.Canonicalize(ctx, json.RawMessage(raw), FuzzNow)
	if err != nil {
		if vigil.ErrorCode(err) == vigil.CodeInternal && err.Error() == "" {
			t.Fatalf("Canonicalize(%q) = an empty error", raw)
		}
		return
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(c.Predicate, &obj); err != nil {
		t.Fatalf("Canonicalize(%q) = %s, not a JSON object: %v", raw, c.Predicate, err)
	}
	again, err := w.Canonicalize(ctx, c.Predicate, FuzzNow)
	if err != nil {
		t.Fatalf("Canonicalize(canonical %s) = %v; the input %q was accepted", c.Predicate, err, raw)
	}
	if string(again.Predicate) != string(c.Predicate) {
		t.Fatalf("canonical form is not stable: %q gave %s, then %s", raw, c.Predicate, again.Predicate)
	}
	_ = w.Admit(ctx, c.Predicate)
}
