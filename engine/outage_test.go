package engine_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vigil-run/vigil"
	"github.com/vigil-run/vigil/store/memstore"
	"github.com/vigil-run/vigil/watcher"
	"github.com/vigil-run/vigil/watcher/watchertest"
)

// downStore fails every read of watches with down's error while it is
// set: a store that cannot be reached.
type downStore struct {
	vigil.Store
	down atomic.Pointer[error]
}

func (s *downStore) WatchGet(ctx context.Context, id string) (*vigil.Watch, error) {
	if err := s.down.Load(); err != nil {
		return nil, *err
	}
	return s.Store.WatchGet(ctx, id)
}

// records keeps the log records an engine writes.
type records struct {
	mu   sync.Mutex
	recs []slog.Record
}

func (h *records) Enabled(context.Context, slog.Level) bool { return true }
func (h *records) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	h.recs = append(h.recs, r.Clone())
	h.mu.Unlock()
	return nil
}
func (h *records) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *records) WithGroup(string) slog.Handler      { return h }

// count returns how many records have msg, and the sum of their
// "unlogged" attributes.
func (h *records) count(msg string) (n int, unlogged int64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, r := range h.recs {
		if r.Message != msg {
			continue
		}
		n++
		r.Attrs(func(a slog.Attr) bool {
			if a.Key == "unlogged" {
				unlogged += a.Value.Int64()
			}
			return true
		})
	}
	return n, unlogged
}

// TestUnavailableStoreLoggedOncePerInterval: while the store cannot be
// reached, the probes that fall due each fail to read their watch and are
// tried again as before, but the log says so once per message per 10 s,
// the next line counting those it did not log; any other store error is
// logged every time. Each failed read was logged: a database down for a
// few seconds under a replica holding thousands of watches wrote
// thousands of error lines.
func TestUnavailableStoreLoggedOncePerInterval(t *testing.T) {
	t.Parallel()
	const n = 20
	for _, tt := range []struct {
		name         string
		err          error
		lines        int   // logged over the two rounds of failed reads
		unloggedSeen int64 // the "unlogged" the lines report in all
	}{
		{"unavailable", &vigil.Error{Code: vigil.CodeUnavailable, Message: "vigil's PostgreSQL database is unavailable: try again"}, 2, n - 1},
		{"other", errors.New("a row that does not decode"), 2 * n, 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			st := &downStore{Store: memstore.New()}
			logs := &records{}
			v := newEnv(t, envOpts{store: st, watchers: []watcher.Watcher{watchertest.NeverSettles(vigil.KindHTTP)}, logger: slog.New(logs)})
			var ids []string
			for i := range n {
				ids = append(ids, v.register(vigil.RegisterRequest{Kind: vigil.KindHTTP, Recipient: fmt.Sprintf("agent-%d", i),
					Predicate: obj(`{}`), Every: "1m", Deadline: "1h"}).ID)
			}
			v.tick(t0)
			st.down.Store(&tt.err)
			v.tick(t0.Add(time.Minute))     // every read fails
			v.tick(t0.Add(2 * time.Minute)) // tried again: every read fails
			lines, unlogged := logs.count("reading watch before probe")
			if lines != tt.lines || unlogged != tt.unloggedSeen {
				t.Fatalf("%d reads failed in two rounds a minute apart: %d lines logged, reporting %d unlogged; want %d lines, %d unlogged",
					2*n, lines, unlogged, tt.lines, tt.unloggedSeen)
			}
			st.down.Store(nil)
			v.tick(t0.Add(3 * time.Minute))
			// Once the store answers, the errors not logged since the
			// last line are counted: every failed read is logged or
			// counted, once.
			_, again := logs.count("reading watch before probe: the store answers again")
			if int(tt.unloggedSeen+again) != 2*n-tt.lines {
				t.Errorf("of %d failed reads %d were logged, and the lines count %d unlogged (%d once the store answered again), want %d",
					2*n, tt.lines, tt.unloggedSeen+again, again, 2*n-tt.lines)
			}
			for _, id := range ids {
				if got := v.get(id); got.Polls < 2 || got.State != vigil.StatePending {
					t.Fatalf("watch %s once the store is back: %s after %d probes, want pending, probed again", id, got.State, got.Polls)
				}
			}
		})
	}
}
