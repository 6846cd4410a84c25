package httpwatch

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vigil-run/vigil"
	"github.com/vigil-run/vigil/watcher"
)

// TestSpecCache: a pending watch's predicate is parsed once and kept; it
// goes when the watch settles, is stopped, or is probed for the last time;
// the cache holds at most its bound.
func TestSpecCache(t *testing.T) {
	t.Parallel()
	var done atomic.Bool
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, `{"done":%v}`, done.Load())
	}))
	defer srv.Close()
	w := New(Config{})
	defer w.Close()
	pred := func(n int) []byte {
		c, err := w.Canonicalize(context.Background(), []byte(fmt.Sprintf(`{"url":"%s/%d","done":{"path":"done","equals":true}}`, srv.URL, n)), time.Time{})
		if err != nil {
			t.Fatal(err)
		}
		return c.Predicate
	}
	probe := func(id string, n int, final bool) vigil.Observation {
		t.Helper()
		obs, err := w.Probe(context.Background(), watcher.Probe{WatchID: id, Kind: vigil.KindHTTP, Predicate: pred(n), Final: final})
		if err != nil {
			t.Fatal(err)
		}
		return obs
	}
	probe("a", 1, false)
	first, _ := w.specs.c.Peek("a")
	probe("a", 1, false)
	again, _ := w.specs.c.Peek("a")
	if first.spec == nil || first.spec != again.spec {
		t.Errorf("a pending watch's predicate was parsed again (%p, then %p), want once", first.spec, again.spec)
	}
	probe("b", 2, false)
	if err := w.Stop(context.Background(), "b"); err != nil {
		t.Fatal(err)
	}
	probe("c", 3, true)
	if w.specs.len() != 1 {
		t.Errorf("%d kept after a stop and a final probe, want 1 (a)", w.specs.len())
	}
	done.Store(true)
	if obs := probe("a", 1, false); obs.Verdict != vigil.VerdictSatisfied {
		t.Fatalf("probe = %+v, want satisfied", obs)
	}
	if w.specs.len() != 0 {
		t.Errorf("%d kept after the watch was satisfied, want 0", w.specs.len())
	}
	small := newSpecCache(2)
	for i := range 3 {
		if _, err := small.get(fmt.Sprint(i), pred(i)); err != nil {
			t.Fatal(err)
		}
	}
	if small.len() != 2 {
		t.Errorf("a cache bounded to 2 holds %d", small.len())
	}
}
