package engine_test

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vigil-run/vigil"
	"github.com/vigil-run/vigil/internal/pgtest"
	"github.com/vigil-run/vigil/store/memstore"
	"github.com/vigil-run/vigil/store/postgres"
	"github.com/vigil-run/vigil/store/sqlite"
	"github.com/vigil-run/vigil/watcher"
	"github.com/vigil-run/vigil/watcher/watchertest"
)

// listCounting counts the store's WatchList calls.
type listCounting struct {
	vigil.Store
	lists atomic.Int64
}

func (s *listCounting) WatchList(ctx context.Context, p vigil.WatchListParams) (vigil.WatchPage, error) {
	s.lists.Add(1)
	return s.Store.WatchList(ctx, p)
}

// listStores are the stores the list tests run on: memstore, SQLite and,
// with VIGIL_TEST_POSTGRES, PostgreSQL.
func listStores(t *testing.T) map[string]func(t *testing.T) vigil.Store {
	return map[string]func(t *testing.T) vigil.Store{
		"memstore": func(*testing.T) vigil.Store { return memstore.New() },
		"sqlite": func(t *testing.T) vigil.Store {
			st, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "v.db"), nil)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { st.Close() })
			return st
		},
		"postgres": func(t *testing.T) vigil.Store {
			u := pgtest.Schema(t, "vigil_engine")
			st, err := postgres.Open(context.Background(), u, &postgres.Options{MaxConns: 4})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { st.Close() })
			return st
		},
	}
}

// pageAll lists q page by page and returns the ids in the order given,
// failing on a page larger than its limit, on a page short of its limit
// but for the last that has a next cursor, and on more than max pages.
func pageAll(t *testing.T, v *env, q vigil.ListRequest, maxPages int) (ids []string, pages []int) {
	t.Helper()
	for range maxPages {
		page, err := v.eng.Watches(v.ctx, q)
		if err != nil {
			t.Fatalf("Watches(%+v): %v", q, err)
		}
		if len(page.Watches) > q.Limit {
			t.Fatalf("a page of %d watches for a limit of %d", len(page.Watches), q.Limit)
		}
		for _, w := range page.Watches {
			ids = append(ids, w.ID)
		}
		pages = append(pages, len(page.Watches))
		if page.Next == "" {
			return ids, pages
		}
		q.After = page.Next
	}
	t.Fatalf("more than %d pages for %+v", maxPages, q)
	return nil, nil
}

// TestListPageHoldsItsLimitOfWhatTheViewShows: the store matches a list's
// state and text against the stored rows; the answer keeps what its view
// matches (a pending row of a kind this build cannot watch is shown
// unwatchable, a secret of the predicate [redacted]). A page the view cut
// short is filled from the store's next rows, so a page holds its limit
// while more match, with the next cursor of the last watch shown. The
// view's filter ran on one page of the store: newer rows it dropped left
// the page short or empty, with a next cursor, and a client taking an
// empty or short page for the end missed the older matches.
func TestListPageHoldsItsLimitOfWhatTheViewShows(t *testing.T) {
	for name, open := range listStores(t) {
		t.Run(name, func(t *testing.T) {
			st := open(t)
			old := newEnv(t, envOpts{store: st, watchers: []watcher.Watcher{watchertest.NeverSettles(vigil.KindTCP), watchertest.NeverSettles(vigil.KindHTTP)}})
			var timers []string
			for i := range 3 {
				old.clock.Add(time.Second)
				w := old.register(vigil.RegisterRequest{Kind: vigil.KindTimer, Predicate: obj(fmt.Sprintf(`{"in":"%dh"}`, i+1)), Note: fmt.Sprintf("hunter2 %d", i)})
				timers = append(timers, w.ID)
			}
			// Newer, so first in the list: pending rows of tcp (which
			// the next build cannot watch), http watches whose only
			// "hunter2" is their URL's password.
			for i := range 3 {
				old.clock.Add(time.Second)
				old.register(vigil.RegisterRequest{Kind: vigil.KindTCP, Predicate: obj(fmt.Sprintf(`{"address":"db%d:5432"}`, i))})
				old.clock.Add(time.Second)
				old.register(vigil.RegisterRequest{Kind: vigil.KindHTTP, Predicate: obj(fmt.Sprintf(`{"url":"https://u:hunter2@example.com/%d"}`, i))})
			}
			slices.Reverse(timers) // newest first
			v := newEnvAt(t, envOpts{store: st, watchers: []watcher.Watcher{watchertest.NeverSettles(vigil.KindHTTP)}}, old.clock.Now())

			for _, q := range []vigil.ListRequest{
				{Kind: vigil.KindTimer, State: vigil.StatePending, Limit: 2}, // control: the store alone filters
				{State: vigil.StatePending, Text: "hunter2", Limit: 2},
				{Text: "HUNTER2", Limit: 2},
			} {
				ids, pages := pageAll(t, v, q, 10)
				if !slices.Equal(ids, timers) || !slices.Equal(pages, []int{2, 1}) {
					t.Errorf("%+v: pages of %v holding %v, want pages of [2 1] holding %v", q, pages, ids, timers)
				}
			}
			// Pending rows of tcp are unwatchable, the rest pending.
			ids, pages := pageAll(t, v, vigil.ListRequest{State: vigil.StateUnwatchable, Limit: 2}, 10)
			if len(ids) != 3 || !slices.Equal(pages, []int{2, 1}) {
				t.Errorf("state unwatchable: pages of %v holding %v, want pages of [2 1] of the 3 tcp watches", pages, ids)
			}
			ids, pages = pageAll(t, v, vigil.ListRequest{State: vigil.StatePending, Limit: 4}, 10)
			if len(ids) != 6 || !slices.Equal(pages, []int{4, 2}) {
				t.Errorf("state pending: pages of %v holding %v, want pages of [4 2] of the 3 http and 3 timer watches", pages, ids)
			}
		})
	}
}

// TestListPageCutShortGoesOn: the store reads one page's filling a
// bounded number of times; a page still short of its limit then carries
// the cursor of the last row read, never the end, so paging on finds
// every match once.
func TestListPageCutShortGoesOn(t *testing.T) {
	st := &listCounting{Store: memstore.New()}
	v := newEnv(t, envOpts{store: st, watchers: []watcher.Watcher{watchertest.NeverSettles(vigil.KindHTTP)}})
	var want []string
	for i := range 2 {
		v.clock.Add(time.Second)
		want = append(want, v.register(vigil.RegisterRequest{Kind: vigil.KindTimer, Predicate: obj(fmt.Sprintf(`{"in":"%dh"}`, i+1)), Note: "hunter2"}).ID)
	}
	// 40 newer watches whose only match is a secret.
	for i := range 40 {
		v.clock.Add(time.Second)
		v.register(vigil.RegisterRequest{Kind: vigil.KindHTTP, Predicate: obj(fmt.Sprintf(`{"url":"https://u:hunter2@example.com/%d"}`, i))})
	}
	slices.Reverse(want)
	q := vigil.ListRequest{Text: "hunter2", Limit: 1}
	var got []string
	for pages := 0; ; pages++ {
		if pages > 50 {
			t.Fatal("paging did not end")
		}
		before := st.lists.Load()
		page, err := v.eng.Watches(v.ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		if n := st.lists.Load() - before; n > 8 {
			t.Fatalf("one page read the store %d times, want at most 8", n)
		}
		for _, w := range page.Watches {
			got = append(got, w.ID)
		}
		if page.Next == "" {
			break
		}
		q.After = page.Next
	}
	if !slices.Equal(got, want) {
		t.Fatalf("paging found %v, want %v", got, want)
	}
}

// TestLabelValueNotUTF8OrNULRefused: a label value, registered or
// filtered on, that is not UTF-8 or holds a NUL is refused
// (invalid_request, naming the label) in every store. PostgreSQL refuses
// such a text, so there a list filter (GET /v1/watches?label=k=%00) and a
// registration ("labels":{"k":"\u0000"}) were answered 500 internal.
func TestLabelValueNotUTF8OrNULRefused(t *testing.T) {
	for name, open := range listStores(t) {
		t.Run(name, func(t *testing.T) {
			v := newEnv(t, envOpts{store: open(t)})
			for i, bad := range []string{"a\x00", "\xc3", "ok\xff"} {
				_, err := v.eng.Watches(v.ctx, vigil.ListRequest{Labels: map[string]string{"team": bad}})
				if vigil.ErrorCode(err) != vigil.CodeInvalidRequest || vigil.ErrorField(err) != "labels.team" {
					t.Errorf("list with label %q: %v (code %q field %q), want invalid_request on labels.team", bad, err, vigil.ErrorCode(err), vigil.ErrorField(err))
				}
				_, err = v.eng.Register(v.ctx, vigil.RegisterRequest{Kind: vigil.KindTimer, Recipient: "a", Predicate: obj(fmt.Sprintf(`{"in":"%dh"}`, i+1)), Labels: map[string]string{"team": bad}})
				if vigil.ErrorCode(err) != vigil.CodeInvalidRequest || vigil.ErrorField(err) != "labels.team" {
					t.Errorf("register with label %q: %v (code %q field %q), want invalid_request on labels.team", bad, err, vigil.ErrorCode(err), vigil.ErrorField(err))
				}
			}
			// A label of any other UTF-8 is kept and found.
			w := v.register(vigil.RegisterRequest{Kind: vigil.KindTimer, Recipient: "a", Predicate: obj(`{"in":"9h"}`), Labels: map[string]string{"team": "Zürich ✓"}})
			page, err := v.eng.Watches(v.ctx, vigil.ListRequest{Labels: map[string]string{"team": "Zürich ✓"}})
			if err != nil || len(page.Watches) != 1 || page.Watches[0].ID != w.ID {
				t.Errorf("list by a UTF-8 label = %v, %v; want %s", page.Watches, err, w.ID)
			}
		})
	}
}
