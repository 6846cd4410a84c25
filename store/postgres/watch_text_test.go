package postgres

import (
	"context"
	"io/fs"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"

	"github.com/vigil-run/vigil"
)

// TestWatchText: the list filters' text lives in watch_text (schema 5),
// which the triggers fill as watches are inserted (one at a time and in a
// batch's multi-row insert) and empty as they are deleted; no index of
// the watches is a GIN index, so a settling UPDATE adds to none; and
// migrating a schema-4 database fills watch_text from the watches there.
func TestWatchText(t *testing.T) {
	s := internalStore(t, 4)
	ctx := t.Context()
	textOf := func(text string, labels map[string]string) []string {
		t.Helper()
		page, err := s.WatchList(ctx, vigil.WatchListParams{Text: text, Labels: labels})
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, w := range page.Watches {
			ids = append(ids, w.ID)
		}
		return ids
	}
	count := func(q string) int {
		t.Helper()
		var n int
		if err := s.pool.QueryRow(ctx, q).Scan(&n); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		return n
	}
	mk := func(i int64, note string, labels map[string]string) *vigil.Watch {
		w := benchWatch(i)
		w.Note, w.Labels = note, labels
		return w
	}
	if _, err := s.WatchCreate(ctx, vigil.WatchCreateParams{Watch: mk(1, "Deploy the API", map[string]string{"task": "a"})}); err != nil {
		t.Fatal(err)
	}
	res, err := s.WatchCreateMany(ctx, []vigil.WatchCreateParams{{Watch: mk(2, "deploy WEB", nil)}, {Watch: mk(3, "other", map[string]string{"task": "b"})}})
	if err != nil || res[0].Err != nil || res[1].Err != nil {
		t.Fatalf("WatchCreateMany = %v, %v", res, err)
	}
	id := func(i int64) string { return benchWatch(i).ID }
	if got := textOf("DEPLOY", nil); len(got) != 2 || got[0] != id(2) || got[1] != id(1) {
		t.Errorf("text DEPLOY lists %v, want %s and %s", got, id(2), id(1))
	}
	if got := textOf("", map[string]string{"task": "b"}); len(got) != 1 || got[0] != id(3) {
		t.Errorf("label task=b lists %v, want %s", got, id(3))
	}
	if got := textOf("deploy", map[string]string{"task": "a"}); len(got) != 1 || got[0] != id(1) {
		t.Errorf("text deploy and label task=a list %v, want %s", got, id(1))
	}
	if n := count(`SELECT count(*) FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid JOIN pg_am a ON a.oid = c.relam
		WHERE i.indrelid = 'watches'::regclass AND a.amname = 'gin'`); n != 0 {
		t.Errorf("watches has %d GIN indexes, want none: a settlement adds an entry to each", n)
	}

	// Deleted with its watch.
	won, err := s.WatchSettle(ctx, []vigil.WatchSettleParams{{ID: id(3), State: vigil.StateFired, SettledAt: benchAt.Add(time.Hour),
		Outcome: &vigil.Outcome{State: vigil.StateFired}}})
	if err != nil || !won[0] {
		t.Fatalf("settle = %v, %v", won, err)
	}
	if err := s.WatchDelete(ctx, id(3)); err != nil {
		t.Fatal(err)
	}
	if n := count(`SELECT count(*) FROM watch_text`); n != 2 {
		t.Errorf("watch_text holds %d rows after a delete, want 2", n)
	}

	// Back to schema 4 (its Down), a watch written there, and up again:
	// watch_text holds every watch, that one too.
	fsys, err := fs.Sub(migrationFiles, "migrations")
	if err != nil {
		t.Fatal(err)
	}
	db := stdlib.OpenDBFromPool(s.pool)
	defer db.Close()
	p, err := goose.NewProvider(goose.DialectPostgres, db, fsys, goose.WithDisableGlobalRegistry(true))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.DownTo(ctx, 4); err != nil {
		t.Fatal(err)
	}
	if n := count(`SELECT count(*) FROM pg_class WHERE relname = 'watch_text' AND relnamespace = current_schema()::regnamespace`); n != 0 {
		t.Fatalf("schema 4 still has watch_text")
	}
	if _, err := s.pool.Exec(context.Background(), `INSERT INTO watches (id, recipient, kind, state, identity, created_at, predicate, note)
		VALUES ('old', 'r', 'timer', 'pending', 'old', 1, '{}', 'Written at schema FOUR')`); err != nil {
		t.Fatal(err)
	}
	if err := s.migrate(ctx); err != nil {
		t.Fatal(err)
	}
	if got := textOf("four", nil); len(got) != 1 || got[0] != "old" {
		t.Errorf("text four lists %v after migrating, want the watch written at schema 4", got)
	}
	if n := count(`SELECT count(*) FROM watch_text`); n != 3 {
		t.Errorf("watch_text holds %d rows after migrating, want 3", n)
	}
}
